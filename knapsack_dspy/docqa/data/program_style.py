"""How a gold program is written for a demo: table look-ups, or the numbers copied with a note of their cell.

Gold programs are synthesised and verified with table look-ups (``table_query_0 = table["Revenue", "2019"]``:
every number bound to the cell it comes from, which is what the strict verification perturbs). The embedded
1.5B model answered arithmetic questions more often when its demos copied the numbers instead (design
experiment on 21 dev_tune arithmetic questions from index 200 on, same demos and instructions otherwise:
13 right with copied numbers, 9 with look-ups; the recorded run before it: 0 of SEER's 17 programs with
look-ups right, 30 of 83 with literal numbers). :func:`as_literal_program` rewrites a look-up program so:

    revenue_2019 = 4411  # Revenue, 2019
    revenue_2018 = 4044  # Revenue, 2018
    ans = (revenue_2019 - revenue_2018) / revenue_2018 * 100

Each look-up becomes a variable named after the cell's labels holding the cell's number, with the labels in
a comment; the rest of the program is unchanged but for the names. The two programs compute the same answer
on the table they were written for (checked by running both).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Sequence
from dataclasses import dataclass

from knapsack_dspy.docqa.number_text import parse_number
from knapsack_dspy.docqa.sandbox.cell_numbers import parse_cell
from knapsack_dspy.docqa.sandbox.table_view import TableLookupError, TableView

__all__ = ["PROGRAM_STYLES", "CellFix", "as_literal_program", "read_cited_cells", "variable_name"]

PROGRAM_STYLES = ("literal", "lookup")
_LOOKUP = re.compile(r'^(?P<name>[A-Za-z_]\w*)\s*=\s*table\[\s*(?P<row>"(?:[^"\\]|\\.)*")\s*,\s*'
                     r'(?P<col>"(?:[^"\\]|\\.)*")\s*\]\s*$')
_WORDS = re.compile(r"[^a-z0-9]+")
_MAX_NAME = 40


def variable_name(row: str, column: str, taken: set[str]) -> str:
    """A Python name from a cell's labels (``"Revenue", "2019"`` -> ``revenue_2019``), unique among ``taken``."""
    base = _WORDS.sub("_", f"{row} {column}".lower()).strip("_")
    if len(base) > _MAX_NAME:
        base = base[:_MAX_NAME].rstrip("_")
    if not base or base[0].isdigit():
        base = f"value_{base}".rstrip("_")
    name, k = base, 2
    while name in taken or name in ("ans", "scale", "table"):
        name, k = f"{base}_{k}", k + 1
    return name


def _number_text(value: float) -> str:
    return str(int(value)) if float(value).is_integer() and abs(value) < 1e15 else repr(float(value))


def as_literal_program(code: str, table: Sequence[Sequence]) -> str:
    """``code`` with each ``name = table["row", "col"]`` line replaced by the cell's number under a name made of
    its labels, the labels in a comment (see the module docstring). Lines that are not such look-ups stay; a
    look-up whose cell is not a number stays a look-up."""
    try:
        view = TableView([list(row) for row in table]) if table else None
    except TypeError:
        view = None
    lines = code.splitlines()
    renames: dict[str, str] = {}
    taken = {node.id for node in ast.walk(ast.parse(code)) if isinstance(node, ast.Name)} if code.strip() else set()
    out: list[tuple[str, bool]] = []  # (line, written here: already final)
    for line in lines:
        match = _LOOKUP.match(line.strip())
        if match is None or view is None:
            out.append((line, False))
            continue
        row, col = ast.literal_eval(match["row"]), ast.literal_eval(match["col"])
        try:
            cell = view.get(row, col)
        except TableLookupError:
            out.append((line, False))
            continue
        value = parse_cell(cell) if isinstance(cell, str) else cell
        if not isinstance(value, float):
            out.append((line, False))
            continue
        name = variable_name(row, col, taken)
        taken.add(name)
        renames[match["name"]] = name
        out.append((f"{name} = {_number_text(value)}  # {row}, {col}", True))
    if not renames:
        return code
    pattern = re.compile(r"\b(" + "|".join(map(re.escape, renames)) + r")\b")
    return "\n".join(line if final else pattern.sub(lambda m: renames[m.group(1)], line) for line, final in out)


# ``name = 1164000  # Income tax expense, 2019``: a number copied from the cell the comment names
_CITED = re.compile(r"^(?P<head>\s*(?P<name>[A-Za-z_]\w*)\s*=\s*)(?P<number>[-+]?\(?[$€£¥]?\d[\d,]*(?:\.\d+)?\)?)"
                    r"(?P<gap>\s*)#\s*(?P<cite>[^#]+?)\s*$")


@dataclass(frozen=True)
class CellFix:
    """A number a program copied from a cell it names, replaced by that cell's number."""

    name: str
    written: float
    cell: float
    row: str
    column: str

    def __str__(self) -> str:
        return f"{self.name}: {self.written:g} -> {self.cell:g} ({self.row}, {self.column})"


_FACTORS = (1.0, 100.0, 0.01, 1e3, 1e6, 1e9, 1e-3, 1e-6, 1e-9)


def _decimals(value: float) -> int:
    """Digits after the decimal point as written (``1.6`` -> 1, ``1164000.0`` -> 0)."""
    text = repr(float(value))
    if "e" in text or float(value).is_integer():
        return 0
    return len(text.split(".")[1])


_YEAR = re.compile(r"(?<!\d)(?:19|20)\d\d(?!\d)")


def _copy_relation(written: float, other: float) -> tuple[float, float] | None:
    """(factor, sign) such that ``written`` is ``sign * other / factor`` as written (rounded to its digits), or
    None: how a program copied a cell (as it is, sign flipped, in thousands, a percentage as a fraction)."""
    tolerance = 0.5 * 10.0 ** -_decimals(abs(written))
    for factor in _FACTORS:
        for sign in (1.0, -1.0):
            target = sign * other / factor
            if abs(written - target) <= tolerance + 1e-9 * max(1.0, abs(target)):
                return factor, sign
    return None


def _table_numbers(table: Sequence[Sequence]) -> list[float]:
    numbers = []
    for row in table:
        for cell in list(row)[1:]:
            value = parse_cell(cell) if isinstance(cell, str) else cell
            if isinstance(value, float):
                numbers.append(value)
    return numbers


def read_cited_cells(code: str, table: Sequence[Sequence]) -> tuple[str, list[CellFix]]:
    """``code`` with every number it copied from the wrong cell replaced by the number of the cell its comment
    names (the literal style: ``revenue_2019 = 4411  # Revenue, 2019``).

    The comment is the program's own statement of which cell it reads; the number is a copy the 1.5B model
    gets wrong: it writes the 2018 cell under "2019" when its demos' tables run the other way, or the cell of
    the next row. A line is changed only when all of these hold: its comment names exactly one numeric cell
    (``TableView``'s look-up: the labels shown to the model); its number is not that cell's (up to sign, a
    percentage as a fraction, a unit factor or rounding: :func:`_copy_relation`); its number *is* another cell
    of the table, copied in one way (the same relation); and a year in the
    variable's name, if any, is one of the named column's. The new number is the named cell's, scaled as the
    program scaled its copy (thousands, a percentage as a fraction), with the cell's own sign -- but a program
    that wrote a negative cell as a positive number (costs as magnitudes) gets a magnitude. Returns the code
    and the replacements made."""
    if not table or "#" not in code:
        return code, []
    try:
        view = TableView([list(row) for row in table])
    except TypeError:
        return code, []
    numbers = _table_numbers(table)
    fixes: list[CellFix] = []
    lines = code.splitlines()
    for i, line in enumerate(lines):
        match = _CITED.match(line)
        if match is None or "," not in match["cite"]:
            continue
        row, column = (part.strip() for part in match["cite"].rsplit(",", 1))
        name_years = set(_YEAR.findall(match["name"]))
        if name_years and not name_years & set(_YEAR.findall(column)):
            continue  # the name and the comment disagree: which one is wrong is not known
        try:
            cell = view.get(row, column)
        except TableLookupError:
            continue
        value = parse_cell(cell) if isinstance(cell, str) else cell
        written = parse_number(match["number"])
        if not isinstance(value, float) or written is None or _copy_relation(written, value):
            continue
        relations = {r for other in numbers if other != value and (r := _copy_relation(written, other))}
        if len(relations) != 1:
            continue  # not a copy of another cell (a number of its own), or copied in more than one way
        ((factor, sign),) = relations
        # the named cell's own sign, as a look-up reads it; a program writing magnitudes (a positive copy of a
        # negative cell) keeps writing them
        fixed = abs(value) / factor if sign < 0 and written > 0 else value / factor
        fixed = float(f"{fixed:.12g}")  # no float noise in the program text
        lines[i] = f"{match['head']}{_number_text(fixed)}{match['gap'] or '  '}# {match['cite']}"
        fixes.append(CellFix(match["name"], written, fixed, row, column))
    return ("\n".join(lines) if fixes else code), fixes
