"""Strict checks of a gold program: it must reach the gold answer for the right reason, not by coincidence.

Running a synthesised program and getting the gold answer is not enough. ``(table_query_0 + table_query_0) /
2`` gives the average of two years that both hold 4; ``(a + b) / table_query_2`` gives an average when the
cell read for the divisor happens to hold 2. Such a demo teaches the model to read the wrong thing. Two
checks find them:

- :func:`structural_findings` (rules on the derivation's shape, :mod:`knapsack_dspy.docqa.data.derivation_roles`):
  two terms of one sum, or the two operands of one product / quotient, read from one variable ("one
  variable for two terms"); an average's divisor, a ``* 100`` or a count read from the table or the text ("a
  constant read as a quantity"); a table cell read for a record whose answer comes from the text only ("a
  text-only answer reads the table"); a ``table[...]`` label the table's layout does not show ("a label
  not shown").
- :func:`perturbation_finding`: every numeric body cell of the table is multiplied by its own random factor
  (seeded trials), the program is run on the perturbed table and compared with the gold derivation (TAT-QA)
  or the gold FinQA program (run with the official executor) re-evaluated with the numbers bound to those
  cells moved by the same factors. The result must move identically (within float tolerance). This checks
  that the program computes the gold expression over the cells it names -- label resolution, the ``* 100``
  and percent-as-ratio forms, FinQA table operations -- while the structural rules check which cells it names.

:func:`strict_findings` runs both; ``[]`` means the program is verified strictly.
"""

from __future__ import annotations

import ast
import hashlib
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from knapsack_dspy.docqa.data.derivation_roles import (
    align_positions,
    derivation_roles,
    finqa_constants,
    in_answer_unit,
    parse_folded,
)
from knapsack_dspy.docqa.sandbox import execute_program
from knapsack_dspy.docqa.sandbox.cell_numbers import parse_cell
from knapsack_dspy.docqa.sandbox.finqa_dsl import ProgramError, format_program, parse_program
from knapsack_dspy.docqa.sandbox.finqa_executor import official_number
from knapsack_dspy.docqa.sandbox.table_view import TableView
from knapsack_dspy.docqa.table_layout import header_row_count

__all__ = ["FINDING_KINDS", "ProgramParts", "finding_kind", "perturbation_finding", "program_parts",
           "strict_findings", "structural_findings"]

FINDING_KINDS = ("one variable for two terms", "a constant read as a quantity", "a text-only answer reads the table",
                 "a label not shown", "the expression is not the gold one", "moves differently when perturbed")
TRIALS = 3
_RELATIVE_TOLERANCE = 1e-6
_ABSOLUTE_TOLERANCE = 1e-5  # the official FinQA executor rounds to 5 decimals


@dataclass(frozen=True)
class ProgramParts:
    """A SEER-style program taken apart: ``cells`` (variable -> (row label, column label) of its
    ``table[...]`` look-up), ``answer`` (the ``ans`` expression), ``steps`` (``step_<k>`` / ``ans``
    expressions in order, for programs written from a FinQA DSL program)."""

    cells: Mapping[str, tuple[str, str]]
    answer: ast.expr | None
    steps: tuple[ast.expr, ...]


def program_parts(code: str) -> ProgramParts | None:
    """The parts of a gold program; ``None`` when it is not plain assignments."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return None
    cells, steps, answer = {}, [], None
    for statement in tree.body:
        if not (isinstance(statement, ast.Assign) and len(statement.targets) == 1
                and isinstance(statement.targets[0], ast.Name)):
            return None
        name, value = statement.targets[0].id, statement.value
        if (isinstance(value, ast.Subscript) and isinstance(value.value, ast.Name) and value.value.id == "table"
                and isinstance(value.slice, ast.Tuple) and len(value.slice.elts) == 2
                and all(isinstance(e, ast.Constant) for e in value.slice.elts)):
            cells[name] = (str(value.slice.elts[0].value), str(value.slice.elts[1].value))
        if name == "ans":
            answer = value
        if name == "ans" or name.startswith("step_"):
            steps.append(value)
    return ProgramParts(cells, answer, tuple(steps))


def _labelled_cells(table) -> list[tuple[str, str, float]]:
    try:
        view = TableView([list(row) for row in table])
    except TypeError:
        return []
    return [(row, column, parse_cell(cell)) for row, column, cell in view.labelled_cells()]


# ----------------------------------------------------------------------------------------------------
# structural rules

def structural_findings(code: str, example: Mapping) -> list[str]:
    """The structural rules a program breaks (``"<kind>: <detail>"``, kinds from :data:`FINDING_KINDS`)."""
    parts = program_parts(code)
    if parts is None:
        return []
    findings = []
    table = example.get("table") or []
    shown = {(row, column) for row, column, _ in _labelled_cells(table)} if table else set()
    for variable, (row, column) in parts.cells.items():
        if (row, column) not in shown:
            findings.append(f"a label not shown: {variable} reads table[{row!r}, {column!r}]")
    if parts.cells and (example.get("modality") or "") == "text":
        findings.append(f"a text-only answer reads the table: {', '.join(sorted(parts.cells))}")
    derivation = (example.get("derivation") or "").strip()
    if (example.get("answer_type") or "") == "arithmetic" and derivation and parts.answer is not None:
        findings += _derivation_findings(parts, derivation, str(example.get("question") or ""))
    program = (example.get("program") or "").strip()
    if program and not derivation and parts.steps:
        findings += _finqa_findings(parts, program)
    return findings


def _derivation_findings(parts: ProgramParts, derivation: str, question: str) -> list[str]:
    try:
        expression, literals = parse_folded(derivation)
    except ValueError:
        return []
    aligned = align_positions(expression, parts.answer)
    if aligned is None:
        return [f"the expression is not the gold one: {ast.unparse(parts.answer)} for {derivation!r}"]
    roles = derivation_roles(expression, literals, question)
    findings = []
    names = {p: node.id for p, node in aligned.items() if isinstance(node, ast.Name)}
    reported = set()
    for position, variable in names.items():
        twin = next((q for q in roles.siblings.get(position, ()) if names.get(q) == variable), None)
        if twin is not None and variable not in reported:
            reported.add(variable)
            findings.append(f"one variable for two terms: {variable} stands for {literals[position].written} and "
                            f"{literals[twin].written} of {derivation!r}")
    for position, role in roles.constants.items():
        if position in names:
            findings.append(f"a constant read as a quantity: the {role} {literals[position].written} is "
                            f"{names[position]}")
    return findings


def _finqa_findings(parts: ProgramParts, program: str) -> list[str]:
    try:
        steps = parse_program(program)
    except ProgramError:
        return []
    if len(steps) != len(parts.steps):
        return [f"the expression is not the gold one: {len(parts.steps)} steps for {len(steps)}"]
    findings = []
    constants = finqa_constants(steps, official_number)
    for index, (step, node) in enumerate(zip(steps, parts.steps, strict=True)):
        operands = _step_operands(node)
        if operands is None:
            continue
        left, right = operands
        if (step.args[0] == step.args[1] and isinstance(left, ast.Name) and isinstance(right, ast.Name)
                and left.id == right.id and not left.id.startswith("step_")):
            findings.append(f"one variable for two terms: {left.id} is both arguments of {step.op}")
        for position, operand in enumerate(operands):
            if (index, position) in constants and isinstance(operand, ast.Name) and not operand.id.startswith("step_"):
                findings.append(f"a constant read as a quantity: {step.args[position]} of {step.op} is {operand.id}")
    return findings


def _step_operands(node: ast.expr) -> tuple[ast.expr, ast.expr] | None:
    if isinstance(node, ast.BinOp):
        return node.left, node.right
    if isinstance(node, ast.IfExp) and isinstance(node.test, ast.Compare) and len(node.test.comparators) == 1:
        return node.test.left, node.test.comparators[0]
    return None


# ----------------------------------------------------------------------------------------------------
# perturbation

def _seed(example: Mapping, trial: int) -> int:
    digest = hashlib.sha256(f"{example.get('id')}|{example.get('question')}|{trial}".encode()).hexdigest()
    return int(digest[:16], 16)


def _number_text(value: float, percent: bool) -> str:
    text = f"{value:.6f}".rstrip("0").rstrip(".")
    return text + ("%" if percent else "")


def _perturbed_table(table: Sequence[Sequence[str]], rng: random.Random) -> list[list[str]]:
    """The table with every numeric body cell (not the headers, not the row labels) multiplied by its own
    factor in [1.25, 2.5] or its inverse."""
    rows = [[str(c) if c is not None else "" for c in row] for row in table]
    for row in rows[header_row_count(rows):]:
        for j in range(1, len(row)):
            value = parse_cell(row[j])
            if not isinstance(value, float) or value == 0:
                continue
            factor = rng.uniform(1.25, 2.5)
            row[j] = _number_text(value * (factor if rng.random() < 0.5 else 1 / factor), "%" in row[j])
    return rows


def _close(got, want) -> bool:
    if isinstance(got, str) or isinstance(want, str):
        return got == want
    try:
        got, want = float(got), float(want)
    except (TypeError, ValueError):
        return False
    return abs(got - want) <= _ABSOLUTE_TOLERANCE + _RELATIVE_TOLERANCE * abs(want)


def perturbation_finding(code: str, example: Mapping, *, trials: int = TRIALS,
                         execute: Callable | None = None) -> str | None:
    """``None`` when the program's answer moves as the gold derivation's (or FinQA program's) does when the cells
    it reads are perturbed, else what went wrong. Programs that read no cell pass (nothing to perturb)."""
    parts = program_parts(code)
    table = [list(row) for row in (example.get("table") or [])]
    if parts is None or not table:
        return None
    reads_rows = "table_" in code.replace("table_query_", "")  # FinQA table operations: table_max("row") ...
    if not parts.cells and not reads_rows:
        return None
    expected = _expected_answer(parts, example)
    if expected is None:
        return None
    execute = execute or execute_program
    original = {(row, column): value for row, column, value in _labelled_cells(table)}
    for trial in range(trials):
        perturbed = _perturbed_table(table, random.Random(_seed(example, trial)))
        cells = _labelled_cells(perturbed)
        if [(r, c) for r, c, _ in cells] != list(original):
            continue  # the perturbation changed the layout (a body cell read as a header): not comparable
        moved = {(r, c): v for r, c, v in cells}
        factors = {}
        for variable, (row, column) in parts.cells.items():
            before, after = original.get((row, column)), moved.get((row, column))
            if not isinstance(before, float) or not isinstance(after, float):
                return f"moves differently when perturbed: {variable} reads no number shown"
            factors[variable] = after / before if before else 1.0
        try:
            want = expected(factors, perturbed)
        except (ZeroDivisionError, OverflowError):
            continue
        result = execute(code, perturbed, kind="python")
        if not result.ok:
            continue
        if not any(_close(result.answer, w) for w in want):
            return (f"moves differently when perturbed: trial {trial} gives {result.answer!r}, the gold "
                    f"{'derivation' if example.get('derivation') else 'program'} {want[0]!r}")
    return None


def _expected_answer(parts: ProgramParts, example: Mapping) -> Callable | None:
    """``expected(factors, perturbed table) -> [the answers the gold derivation / program allows]``, or ``None``
    when the program cannot be compared with it."""
    derivation = (example.get("derivation") or "").strip()
    if derivation and parts.answer is not None:
        return _derivation_expected(parts, example, derivation)
    program = (example.get("program") or "").strip()
    if program:
        return _finqa_expected(parts, program)
    return None


def _derivation_expected(parts: ProgramParts, example: Mapping, derivation: str) -> Callable | None:
    """The gold derivation evaluated with each number moved by the factor of the cell the program reads for it,
    in each reading of percents (percent units / ratios) and with or without ``* 100`` that reproduces the
    program's own answer on the unperturbed table."""
    try:
        expression, literals = parse_folded(derivation)
    except ValueError:
        return None
    aligned = align_positions(expression, parts.answer)
    if aligned is None:
        return None
    scale = example.get("scale") or ""
    cell_of = {p: node.id for p, node in aligned.items() if isinstance(node, ast.Name) and node.id in parts.cells}
    readings = []
    for as_ratio in (False, True):
        base = {p: in_answer_unit(lit, scale) / (100 if as_ratio and lit.percent else 1) for p, lit in literals.items()}
        for times in (1.0, 100.0):
            readings.append((base, times))

    def evaluate(values: Mapping[str, float]) -> float:
        return _evaluate(expression, values)

    gold = example.get("answer_value")
    usable = []
    for base, times in readings:
        try:
            value = evaluate(base) * times
        except ZeroDivisionError:
            continue
        if gold is not None and (round(value, 2) == round(float(gold), 2)
                                 or abs(value - float(gold)) <= 0.005 + 1e-6 * abs(float(gold))):
            usable.append((base, times))
    if not usable:
        return None

    def expected(factors: Mapping[str, float], perturbed) -> list[float]:
        out = []
        for base, times in usable:
            values = {p: v * factors.get(cell_of.get(p, ""), 1.0) for p, v in base.items()}
            out.append(evaluate(values) * times)
        return out

    return expected


def _evaluate(node: ast.expr, values: Mapping[str, float]) -> float:
    if isinstance(node, ast.Name):
        return values[node.id]
    if isinstance(node, ast.UnaryOp):
        inner = _evaluate(node.operand, values)
        return -inner if isinstance(node.op, ast.USub) else inner
    left, right = _evaluate(node.left, values), _evaluate(node.right, values)
    if isinstance(node.op, ast.Add):
        return left + right
    if isinstance(node.op, ast.Sub):
        return left - right
    if isinstance(node.op, ast.Mult):
        return left * right
    return left / right


def _finqa_expected(parts: ProgramParts, program: str) -> Callable | None:
    """The gold FinQA program run by the official executor on the perturbed table, each number argument the
    Python program reads from a cell moved by that cell's factor."""
    try:
        steps = parse_program(program)
    except ProgramError:
        return None
    if len(steps) != len(parts.steps):
        return None
    bound: dict[tuple[int, int], str] = {}
    for index, node in enumerate(parts.steps):
        operands = _step_operands(node)
        for position, operand in enumerate(operands or ()):
            if isinstance(operand, ast.Name) and operand.id in parts.cells:
                bound[(index, position)] = operand.id

    def expected(factors: Mapping[str, float], perturbed) -> list[object]:
        moved = []
        for index, step in enumerate(steps):
            args = list(step.args)
            for position, arg in enumerate(args):
                variable = bound.get((index, position))
                value = official_number(arg) if variable else None
                if variable and value is not None:
                    args[position] = _number_text(value * factors[variable], False)
            moved.append(step._replace(args=tuple(args)))
        result = execute_program(format_program(moved), perturbed, kind="finqa")
        if not result.ok:
            raise ZeroDivisionError(result.error)  # not comparable: skip the trial
        return [result.answer]

    return expected


def strict_findings(code: str, example: Mapping, *, trials: int = TRIALS, execute: Callable | None = None) -> list[str]:
    """Every reason to reject a gold program that reproduces the gold answer (``[]``: verified strictly)."""
    findings = structural_findings(code, example)
    if not findings:
        moved = perturbation_finding(code, example, trials=trials, execute=execute)
        if moved:
            findings.append(moved)
    return findings


def finding_kind(finding: str) -> str:
    """The kind of a finding (its text up to the first colon)."""
    return finding.split(":", 1)[0]
