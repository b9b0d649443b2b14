"""A table as a reader should see it: one label per column and per row, units stated once.

Financial tables (TAT-QA, FinQA) arrive as rows of cell strings whose first rows are often a stack of
header rows: a spanning header ("Year Ended March 31,"), the years, a row of units ("€m", "(in
thousands)"). Body rows may be section headings ("Current:"), may repeat a label in another section
("Federal" under "Current:" and under "Deferred:"), or may have no label at all (a total). A small model
asked to name a cell by its row and column then copies the wrong thing: a unit for a year, the label of
another section's row, a label from another table.

:func:`table_layout` turns the rows into a :class:`TableLayout`:

- **Columns**: each value column gets the shortest label that tells it apart from the other columns:
  its lowest non-unit header cell ("2019"), prefixed by the spanning header cells above it only when
  that is needed to make it unique ("Domestic 2019" / "International 2019"). A spanning header cell
  covers the columns from its own up to the next non-blank cell of its row. Spanning text that no label
  needed is kept as the table's ``caption`` ("Year Ended March 31").
- **Units**: header cells that only state a unit ("€m", "$'000", "(Dollars in millions)", "%") are
  lifted out of the labels: a unit shared by every column becomes the table's ``units``; a unit of some
  columns only is appended to their labels ("Change (%)").
- **Rows**: a body row whose value cells are all blank is a ``section`` heading; a row without a label
  that holds values is named "Total" (or "Total <section>"); a label that occurs more than once is
  qualified by its section ("Federal (Current)"), or else by its position ("Other (2nd)").

:func:`render_layout` writes the layout as prompt text (units and caption on their own line, then one
``| label | cell | ...`` line per row); cells are shown exactly as written. The labels shown are the
labels the sandbox's ``table[...]`` look-ups accept (``knapsack_dspy.docqa.sandbox.table_view``), so a
program can only name what the model was shown.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["LayoutRow", "TableLayout", "as_written", "header_row_count", "render_layout", "table_layout",
           "unit_of_text"]

MAX_HEADER_ROWS = 4
_SPACES = re.compile(r"\s+")

# Unit expressions, in the order they are tried. Each maps to the scale word TAT-QA uses.
_UNIT_PATTERNS: tuple[tuple[str, re.Pattern], ...] = (
    ("thousand", re.compile(r"(?:\b|(?<=in))thousands?\b|[$€£¥]?\s*['’‘`]\s*000s?\b|\$\s*000s?\b|\b000s\b|\(000s?\)"
                            r"|\b(?:us)?[$€£]\s*k\b|\bin\s+000s?\b", re.IGNORECASE)),
    ("million", re.compile(r"(?:\b|(?<=in))millions?\b|\b(?:us|rmb|hk|a|c|s)?[$€£¥]\s*m(?:n|m|illion)?\b"
                           r"|(?<![a-z])[$€£¥]\s*m\b|\b(?:eur|usd|gbp|rmb|cad|aud|chf|sek|nok|dkk)\s*m(?:n)?\b"
                           r"|\bm(?:n)?\s*[$€£]|\bmm\b|\$m\b|€m\b|£m\b", re.IGNORECASE)),
    ("billion", re.compile(r"(?:\b|(?<=in))billions?\b|\b[$€£¥]?\s*bn\b|[$€£]\s*b\b", re.IGNORECASE)),
    ("percent", re.compile(r"%|\bpercent(?:age)?s?\b", re.IGNORECASE)),
)
# Text that is nothing but a unit statement (after removing the unit words): "(in millions, except ...)".
_EXCEPT_CLAUSE = re.compile(r"\b(?:except|unless|other than|excluding)\b.*$", re.IGNORECASE)
_UNIT_FILLER = re.compile(
    r"\bu\.\s?s\.|[\s(),.:;\-–—$€£¥'’‘`*]+|\b(?:in|of|the|amounts?|tabular|dollars?|us|usd|eur|euros?|gbp|"
    r"pounds?|rmb|a|c|s|hk|cad|aud|chf|yen|currency|all|figures|expressed|are|is|reported|stated|and)\b",
    re.IGNORECASE)


def _clean(cell) -> str:
    text = cell if isinstance(cell, str) else ("" if cell is None else str(cell))
    return _SPACES.sub(" ", text).strip()


def unit_of_text(text: str) -> str:
    """The scale word a unit statement names: ``"(in thousands)"`` -> ``"thousand"``, ``"€m"`` ->
    ``"million"``, ``"%"`` -> ``"percent"``; ``""`` when it names none. The first unit named wins
    (``"in thousands, except percentages"`` -> ``"thousand"``)."""
    best, where = "", None
    for scale, pattern in _UNIT_PATTERNS:
        found = pattern.search(text or "")
        if found and (where is None or found.start() < where):
            best, where = scale, found.start()
    return best


_TRAILING_UNIT = re.compile(
    r"\s*(\(?\s*(?:(?:us|rmb|hk|a|c|s)?[$€£¥]\s?(?:m|mn|bn|k|['’]000s?|millions?|thousands?|billions?)"
    r"|(?:in\s+)?(?:[$€£]\s?)?(?:thousands|millions|billions)(?:\s+of\s+[\w.$ ]+)?|%)\s*\)?)$", re.IGNORECASE)


def _split_unit(text: str) -> tuple[str, str]:
    """A header cell that names a column and states its unit ("2019 €m") -> ("2019", "€m")."""
    match = _TRAILING_UNIT.search(text)
    if not match or not match.start() or not text[:match.start()].strip():
        return text, ""
    return text[:match.start()].strip(), match.group(1).strip()


def _is_unit_only(text: str) -> bool:
    """Whether a header cell states a unit and nothing else ("€m", "(Dollars in thousands)", "%")."""
    if not text or not unit_of_text(text):
        return False
    rest = _EXCEPT_CLAUSE.sub(" ", text)
    for _, pattern in _UNIT_PATTERNS:
        rest = pattern.sub(" ", rest)
    return not _UNIT_FILLER.sub("", rest).strip()


@dataclass(frozen=True)
class LayoutRow:
    """A body row: its shown ``label``, the label as written, its cells (as written) and its kind:
    ``"data"``, ``"section"`` (a heading: every value cell blank) or ``"total"`` (named by us)."""

    label: str
    source_label: str
    cells: tuple[str, ...]
    kind: str = "data"
    section: str = ""


@dataclass(frozen=True)
class TableLayout:
    caption: str
    units: str  # the table-wide unit statement as written ("€m", "(in thousands)"), "" if none
    column_labels: tuple[str, ...]
    column_units: tuple[str, ...]  # a column's own unit statement when the columns differ, else ""
    rows: tuple[LayoutRow, ...]
    header_rows: int  # how many source rows were headers

    @property
    def scale(self) -> str:
        """The scale word of the table-wide unit ("thousand", "million", ...; "" when none is stated)."""
        return unit_of_text(self.units)

    def column_scale(self, index: int) -> str:
        return unit_of_text(self.column_units[index]) or self.scale

    @property
    def row_labels(self) -> tuple[str, ...]:
        return tuple(row.label for row in self.rows)

    def data_rows(self) -> list[LayoutRow]:
        return [row for row in self.rows if row.kind != "section"]


def header_row_count(rows: Sequence[Sequence]) -> int:
    """How many leading rows of a table (rows of cells) are column headers (see :func:`table_layout`)."""
    cleaned = [[_clean(c) for c in row] for row in rows]
    if not cleaned:
        return 0
    width = max(len(row) for row in cleaned)
    return _header_count([row + [""] * (width - len(row)) for row in cleaned]) if len(cleaned) > 1 else 1


def _header_count(rows: list[list[str]]) -> int:
    """Leading rows that are headers: the first, then rows whose values are names, years or units rather
    than amounts, when their first cell is blank or a unit (TAT-QA's stacked headers), or when they name
    periods ("2019", "FY18"), or when the rows above named no column yet (a title row); at most
    ``MAX_HEADER_ROWS``, never the whole table."""
    count = 1
    while count < len(rows) - 1 and count < MAX_HEADER_ROWS:
        row = rows[count]
        values = [c for c in row[1:] if c]
        if not values or any(_is_amount(c) for c in values):
            break
        first_is_header = not row[0] or _is_unit_only(row[0])
        periods = all(_PERIOD.search(c) for c in values)
        untitled = all(sum(1 for c in above[1:] if c) <= 1 for above in rows[:count])
        if not (first_is_header or periods or untitled):
            break
        count += 1
    return count


_YEAR = re.compile(r"^(?:FY\s?)?(?:1\s?9|2\s?0)\s?\d\s?\d$", re.IGNORECASE)
_PERIOD = re.compile(r"^(?:FY|Q[1-4]|H[12]|fiscal|year)?\s*['’]?\d{2,4}\b|\b(?:19|20)\d\d\b", re.IGNORECASE)


def _is_amount(text: str) -> bool:
    """A cell that holds an amount (a number that is not a year)."""
    return _looks_numeric(text) and not _YEAR.match(text.strip())


_NUMERIC = re.compile(r"^[\s$€£¥(\-–—−+]*\d[\d,.\s]*%?\)?\s*$|^[\s$€£¥]*\(?[\d,.]+\)?\s*%?$")


def _looks_numeric(text: str) -> bool:
    return bool(_NUMERIC.match(text))


def _spread(cells: list[str]) -> list[str]:
    """A header row's cells, each non-blank cell covering the blanks to its right (a spanning header);
    a row with a single non-blank cell covers every column."""
    filled = [c for c in cells if c]
    if len(filled) == 1:
        return [filled[0]] * len(cells)
    out, current = [], ""
    for cell in cells:
        current = cell or current
        out.append(current)
    return out


def _column_labels(header: list[list[str]], width: int) -> tuple[list[str], list[str], list[str], str]:
    """(labels, per-column unit statements, caption parts, title) from the header rows' value cells."""
    title = next((row[0] for row in header if row and row[0] and not _is_unit_only(row[0])), "")
    first_units = [row[0] for row in header if row and row[0] and _is_unit_only(row[0])]
    unit_rows, name_rows = [], []
    for row in header:
        cells = (row[1:] + [""] * width)[:width]
        if any(cells) and all(_is_unit_only(c) for c in cells if c):
            unit_rows.append(cells)
        elif any(cells):
            name_rows.append(cells)
    # unit rows: one statement over the table ("(in millions)", or "€m" over every column) or per column
    units = [""] * width
    own_units = [""] * width  # a unit of one column ("2019 €m", a lone "(%)" under "Change")
    for cells in unit_rows:
        filled = [c for c in cells if c]
        if len(filled) == 1 and unit_of_text(filled[0]) != "percent":
            units = [u or filled[0] for u in units]  # "(in thousands)" somewhere over the table: all of it
        else:
            own_units = [o or c for o, c in zip(own_units, cells, strict=True)]
    levels = [list(cells) for cells in name_rows]
    for level in levels:
        for j, cell in enumerate(level):
            if cell and _is_unit_only(cell):
                own_units[j] = own_units[j] or cell
                level[j] = ""
            elif cell:
                name, unit = _split_unit(cell)
                if unit:
                    own_units[j] = own_units[j] or unit
                    level[j] = name
    # rows that say one thing over every column they cover ("Year ended March 31," or "September 30," twice)
    spanning = [len({c.rstrip(",: ") for c in level if c}) == 1 and width > 1 for level in levels]
    # a column's label: the cells right above it (rows that span every column are the caption)
    named = [level for level, span in zip(levels, spanning, strict=True) if not span]
    labels = [" ".join(level[j].rstrip(",: ") for level in named if level[j]) for j in range(width)]
    for j in range(width):  # a column no row names alone: the nearest header text to its left and above
        if not labels[j]:
            labels[j] = next((level[k].rstrip(",: ") for level in reversed(levels) for k in range(j, -1, -1)
                              if level[k] and not (level is levels[-1] and k != j)), "")
    # labels that repeat ("2019" under "Domestic" and under "International"): prefix the nearest cell to the
    # left in the rows above (a spanning header written in the first column of its span)
    for depth in reversed(range(len(levels) - 1)):
        counts = Counter(labels)
        if all(n == 1 for n in counts.values()):
            break
        level = levels[depth]
        if len({c for c in level if c}) < 2:
            continue
        for j in range(width):
            if counts[labels[j]] > 1:
                prefix = next((level[k] for k in range(j, -1, -1) if level[k]), "").rstrip(",: ")
                if prefix and prefix not in labels[j]:
                    labels[j] = f"{prefix} {labels[j]}".strip()
    row_unit = units[0] if units and all(u == units[0] for u in units) else ""
    units = [own or row for own, row in zip(own_units, units, strict=True)]
    # labels still repeated ("2019 | % of total | 2018 | % of total"): name them after their left neighbour
    counts = Counter(labels)
    for j in range(1, width):
        if counts[labels[j]] > 1 and labels[j] and counts[labels[j - 1]] == 1 and labels[j - 1]:
            labels[j] = f"{labels[j - 1]} {labels[j]}"
    caption = [next(c for c in level if c).rstrip(",: ")
               for level, span in zip(levels, spanning, strict=True) if span]
    caption = [c for c in caption if not any(c in label for label in labels)]
    return labels, units, caption, title, (first_units[0] if first_units else row_unit)


def _dedupe_columns(labels: list[str]) -> list[str]:
    seen: Counter = Counter()
    totals = Counter(labels)
    out = []
    for j, label in enumerate(labels):
        name = label or f"column {j + 1}"
        if totals[label] > 1 or not label:
            seen[label] += 1
            if label:
                name = f"{label} ({_ordinal(seen[label])})"
        out.append(name)
    return out


def _ordinal(n: int) -> str:
    return f"{n}{'tsnrhtdd'[(n // 10 % 10 != 1) * (n % 10 < 4) * n % 10::4]}"


def table_layout(rows: Sequence[Sequence]) -> TableLayout:
    """The :class:`TableLayout` of a table given as rows of cells (first row the header)."""
    cleaned = [[_clean(c) for c in row] for row in rows]
    if not cleaned:
        return TableLayout("", "", (), (), (), 0)
    width = max(len(row) for row in cleaned) - 1
    cleaned = [row + [""] * (width + 1 - len(row)) for row in cleaned]
    if width <= 0:
        body = tuple(LayoutRow(r[0], r[0], (), "data") for r in cleaned if r[0])
        return TableLayout("", "", (), (), body, 0)
    count = _header_count(cleaned) if len(cleaned) > 1 else 1
    labels, units, caption, title, stated = _column_labels(cleaned[:count], width)
    body = _body_rows(cleaned[count:], first_section=caption[-1] if caption else "")
    if not stated:  # "Amounts in thousands of U.S. dollars" as a body row of its own
        stated = next((row.source_label for row in body if row.kind == "section" and _is_unit_only(row.source_label)),
                      "")
        body = [row for row in body if not (row.kind == "section" and row.source_label == stated)] if stated else body
        body = _name_rows(body) if stated else body
    # the table's unit: stated beside the headers, or shared by every column; other columns keep their own
    counts = Counter(unit_of_text(u) for u in units if u)
    table_units = stated
    if not table_units and counts:
        scale, n = counts.most_common(1)[0]
        if n == width or (n == 1 and len(counts) == 1 and scale != "percent"):
            table_units = next(u for u in units if u and unit_of_text(u) == scale)
    units = [u if u and unit_of_text(u) != unit_of_text(table_units) else "" for u in units]
    column_units = []
    shown = []
    for label, unit in zip(labels, units, strict=True):
        if unit and unit_of_text(unit) and label:
            shown.append(f"{label} ({unit.strip('()')})" if unit.strip("()") not in label else label)
        elif unit and not label:
            shown.append(unit)
        else:
            shown.append(label)
        column_units.append(unit)
    shown = _dedupe_columns(shown)
    if title:
        caption = [title.rstrip(",:"), *caption]
    return TableLayout(caption="; ".join(dict.fromkeys(c for c in caption if c)), units=table_units,
                       column_labels=tuple(shown), column_units=tuple(column_units), rows=tuple(body),
                       header_rows=count)


def _body_rows(rows: list[list[str]], first_section: str = "") -> list[LayoutRow]:
    out: list[LayoutRow] = []
    section = ""
    for row in rows:
        label, cells = row[0], tuple(row[1:])
        if not any(cells):
            if label:
                section = _section_name(label)
                out.append(LayoutRow(label, label, cells, "section", section))
            continue
        if not label:
            if all(_looks_numeric(c) or not c for c in cells):
                out.append(LayoutRow("", "", cells, "total", section))
            else:  # a header inside the body: "As of December 31, 2018" starts a section; "Cost | Gains" repeats
                texts = [c for c in cells if c]
                if len(texts) == 1:
                    section = texts[0].rstrip(",: ")
                out.append(LayoutRow("", "", cells, "section", section))
            continue
        out.append(LayoutRow(label, label, cells, "data", section))
    if first_section and any(row.kind == "section" and row.section for row in out):
        # rows above the first body section belong to the header's own period ("As of December 31, 2019")
        head = next(i for i, row in enumerate(out) if row.kind == "section" and row.section)
        out = [LayoutRow(r.label, r.source_label, r.cells, r.kind, r.section or first_section) if i < head else r
               for i, r in enumerate(out)]
    return _name_rows(out)


def _section_name(label: str) -> str:
    """A section heading as a qualifier: without its trailing colon and parenthetical remarks."""
    name = re.sub(r"\s*\([^()]*\)\s*", " ", label).strip().rstrip(":").strip()
    return name or label.rstrip(":").strip()


def _name_rows(rows: list[LayoutRow]) -> list[LayoutRow]:
    """Totals get a name; labels that repeat are qualified by section, else by position."""
    named = []
    for row in rows:
        if row.kind == "total":
            label = f"Total {row.section}".strip() if row.section else "Total"
            named.append(LayoutRow(label, "", row.cells, "total", row.section))
        elif row.kind == "section" and not row.label:
            named.append(LayoutRow("", "", row.cells, "section", row.section))
        else:
            named.append(row)
    counts = Counter(row.label for row in named if row.kind != "section")
    by_section = Counter((row.label, row.section) for row in named if row.kind != "section")
    seen: Counter = Counter()
    out = []
    for row in named:
        label = row.label
        if row.kind != "section" and counts[label] > 1:
            if row.section and by_section[(label, row.section)] == 1 and row.section not in label:
                label = f"{label} ({row.section})"
            else:
                seen[label] += 1
                label = f"{label} ({_ordinal(seen[label])})"
        out.append(LayoutRow(label, row.source_label, row.cells, row.kind, row.section))
    # qualification can itself collide ("Total (2nd)" and a written "Total (2nd)"): number what remains
    final = Counter(r.label for r in out if r.kind != "section")
    seen.clear()
    result = []
    for row in out:
        label = row.label
        if row.kind != "section" and final[label] > 1:
            seen[label] += 1
            label = f"{label} [{seen[label]}]"
        result.append(LayoutRow(label, row.source_label, row.cells, row.kind, row.section))
    return result


def as_written(text, layout: TableLayout):
    """``text`` (a string, or a list answered item by item) with the row labels this layout qualified ("Other
    (2nd)", "Federal (Current)") put back as the document writes them: a model that copies a label from the
    prompt copies our qualifier too, and the gold answer is the document's text. Labels we named ("Total"),
    text without a qualified label and anything not text (a number) are kept."""
    if isinstance(text, list):
        return [as_written(item, layout) for item in text]
    if not isinstance(text, str) or not text:
        return text
    for row in sorted(layout.rows, key=lambda r: -len(r.label)):  # "Other (2nd) [2]" before "Other (2nd)"
        if row.kind == "section" or not row.source_label or row.label == row.source_label:
            continue
        at = text.lower().find(row.label.lower())
        if at >= 0:
            text = text[:at] + row.source_label + text[at + len(row.label):]
    return text


def _cell_text(text: str) -> str:
    return text.replace("|", "\\|")


def render_layout(layout: TableLayout, keep_rows: Sequence[int] | None = None) -> str:
    """Prompt text of a layout: a line stating units and caption (when there are any), the column labels,
    then one line per body row (``keep_rows``: only these body-row indices, in order, sections kept
    when a kept row is in them)."""
    lines = []
    notes = []
    if layout.units:
        notes.append(f"units: {layout.units.strip('()')}")
    if layout.caption:
        notes.append(layout.caption)
    if notes:
        lines.append("(" + "; ".join(notes) + ")")
    if layout.column_labels:
        lines.append("| | " + " | ".join(_cell_text(c) for c in layout.column_labels) + " |")
    wanted = None if keep_rows is None else set(keep_rows)
    for index, row in enumerate(layout.rows):
        if wanted is not None and index not in wanted and not (
                row.kind == "section" and any(i in wanted and layout.rows[i].section == row.section
                                              for i in range(index + 1, len(layout.rows)))):
            continue
        cells = " | ".join(_cell_text(c) for c in row.cells)
        lines.append(f"| {_cell_text(row.label)} | {cells} |" if cells else f"| {_cell_text(row.label)} |")
    return "\n".join(lines)
