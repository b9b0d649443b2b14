"""Label-based, read-only access to a table for Python programs: ``table["Revenue", "2019"]``.

The table is a list of rows of cells, the first row the header; row labels are the first cells of the
other rows, column labels the header's other cells. A label is looked up exactly first, then ignoring
case, whitespace and punctuation (``"Revenue:"`` finds ``"revenue"``); the first match wins. Unknown labels
raise :class:`TableLookupError` listing a few near labels.

Tables with several header rows (TAT-QA puts years, then units such as "€m", in rows with a blank first
cell: ``knapsack_dspy.docqa.table_layout.header_row_count``) are rendered to the model with all of them, so a program
may name a column by its stacked header: ``"2019 €m"``, or by a lower header cell alone (``"2019"`` under a
spanning "Year ended"). When the first-row label does not match, the joined header of each column is tried,
then each lower header cell; these are accepted only when they name one column (``"€m"`` over every column
is an error that lists the columns).

Last, for columns only, a date: a label holding a number (a year, a day) names the one column whose header
holds its words and otherwise only period words — month names, "year", "ended", "fiscal", "as of",
numbers, units such as "€m" or "$'000". Small models write ``"2019"`` for a column headed ``"Year Ended
March 31, 2019"`` or ``"December 29, 2019"``, and ``"Dec 29, 2019"`` for the latter (month abbreviations
count). ``"2017"`` does not name ``"Change 2019 vs 2017"`` ("change" is not a period word), and rows never
match by their words ("Revenue" is not "Cost of revenue"). When several columns qualify, the error lists
them; nothing is guessed.
"""

from __future__ import annotations

import difflib
import re

from knapsack_dspy.docqa.sandbox.cell_numbers import MISSING, TEXT, parse_cell
from knapsack_dspy.docqa.table_layout import table_layout

__all__ = ["TableLookupError", "TableView", "normalize_label"]

_NOT_ALNUM = re.compile(r"[\W_]+")
_WORD = re.compile(r"[^\W_]+")
_MONTHS = ("january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
           "november", "december")
_MONTH_ABBREVIATIONS = {**{month[:3]: month for month in _MONTHS}, "sept": "september"}
# Words a date column header may hold besides the date itself (and numbers, and month names).
_PERIOD_WORDS = frozenset((
    "year", "years", "fiscal", "fy", "ended", "ending", "end", "as", "of", "at", "on", "for", "the", "in", "to",
    "and", "through", "week", "weeks", "month", "months", "quarter", "quarters", "period", "three", "six", "nine",
    "twelve", "fifty", "two", "unaudited", "m", "bn", "k", "thousand", "thousands", "million", "millions",
    "billion", "billions", "usd", "us", "dollars", "eur", "gbp", "rmb", "cad", "aud", *_MONTHS))


def _words(label: str) -> list[str]:
    return _WORD.findall(str(label).casefold())


def _same_word(wanted: str, word: str) -> bool:
    """``wanted`` is ``word``, or a month abbreviation of it: "dec" and "december"."""
    return wanted == word or _MONTH_ABBREVIATIONS.get(wanted) == word


def _names_the_date_column(wanted: list[str], header: list[str]) -> bool:
    """Every wanted word is in ``header``, and the header's other words are period words or numbers."""
    if not any(word.isdigit() for word in wanted):
        return False
    if not all(any(_same_word(w, word) for word in header) for w in wanted):
        return False
    return all(word.isdigit() or word in _PERIOD_WORDS or any(_same_word(w, word) for w in wanted)
               for word in header)


def _full_names(found: list[int], labels: list[str]) -> str:
    """The shown labels of the ``found`` rows / columns, for an error message."""
    return ", ".join(repr(labels[i]) for i in found[:6])


class TableLookupError(LookupError):
    """An unknown row / column label, a missing cell, or a cell that is not a number where one is needed."""


def normalize_label(label: str) -> str:
    """Case-, whitespace- and punctuation-insensitive form of a label: ``"Net Sales ($)"`` -> ``"netsales"``."""
    return _NOT_ALNUM.sub("", str(label).casefold())


def _label_text(label) -> str:
    if isinstance(label, bool) or not isinstance(label, (str, int, float)):
        raise TableLookupError(f"a table label is a string (or a year like 2019), got {type(label).__name__}")
    if isinstance(label, float):
        if not label.is_integer():
            raise TableLookupError(f"a table label is a string, got the number {label}")
        label = int(label)
    return str(label)


class TableView:
    """Read-only view of ``table`` (list of rows, first row the header) for label look-ups.

    Labels are those of the table's :func:`~knapsack_dspy.docqa.table_layout.table_layout` -- the labels the
    model was shown: flattened column headings ("2019", "Domestic 2019"), totals named ("Total"), repeated
    row labels qualified ("Federal (Current)"). A label as written in the source table is accepted too
    when it names one row / column only ("Federal" under two sections is an error that lists both)."""

    def __init__(self, table):
        if not isinstance(table, (list, tuple)) or not all(isinstance(row, (list, tuple)) for row in table):
            raise TypeError("the table must be a list of rows, each a list of cells")
        if not table:
            raise TypeError("the table is empty")
        source = [[str(c) if c is not None else "" for c in row] for row in table]
        layout = table_layout(source)
        rows = [row for row in layout.rows if row.kind != "section"]
        self.column_labels = list(layout.column_labels)
        self.row_labels = [row.label for row in rows]
        # _rows[0] is a header placeholder so that _rows[r + 1] is the r-th body row, as before
        self._rows = [["", *self.column_labels], *([row.label, *row.cells] for row in rows)]
        self._row_aliases = [[row.source_label] if row.source_label and row.source_label != row.label else []
                             for row in rows]
        header = source[0][1:] if source else []
        lower = source[1:layout.header_rows]
        width = len(self.column_labels)
        stacked = [[(header[j] if j < len(header) else "").strip(),
                    *((r[j + 1] if j + 1 < len(r) else "").strip() for r in lower)] for j in range(width)]
        # other names of each column: its stacked header as written ("2019 €m"), then each header cell
        self._column_aliases = [[" ".join(c for c in cells if c)] for cells in stacked]
        self._lower_cells = [[c for c in cells if c] for cells in stacked]

    # -- label resolution -------------------------------------------------------------------------
    @staticmethod
    def _resolve(label, labels: list[str], kind: str, aliases: tuple[list[list[str]], ...] = ()) -> int:
        text = _label_text(label)
        if text in labels:
            return labels.index(text)
        wanted = normalize_label(text)
        if wanted:
            for index, candidate in enumerate(labels):
                if normalize_label(candidate) == wanted:
                    return index
        for names in aliases:  # e.g. stacked headers, then lower header cells: only a unique match counts
            for same in (lambda name: name == text, lambda name: bool(wanted) and normalize_label(name) == wanted):
                found = [i for i, options in enumerate(names) if any(same(name) for name in options)]
                if len(found) == 1:
                    return found[0]
                if len(found) > 1:
                    raise TableLookupError(f"table {kind} {text!r} is ambiguous: {len(found)} {kind}s match "
                                           f"({_full_names(found, labels)}); use one of the labels shown")
        found = TableView._date_columns(text, labels, aliases) if kind == "column" else []
        if len(found) == 1:
            return found[0]
        known = [candidate for candidate in labels if candidate.strip()]
        if len(found) > 1:
            more = " ..." if len(found) > 6 else ""
            raise TableLookupError(f"no table {kind} {text!r}; {len(found)} {kind}s are headed by that date "
                                   f"({_full_names(found, labels)}{more}); name one by its full header")
        near = difflib.get_close_matches(text, known, n=3, cutoff=0.4)
        if not near:
            near = difflib.get_close_matches(wanted, [normalize_label(k) for k in known], n=3, cutoff=0.4)
            near = [k for k in known if normalize_label(k) in near][:3]
        hint = f"; near: {', '.join(map(repr, near))}" if near else (
            f"; {kind}s are: {', '.join(map(repr, known[:8]))}{' ...' if len(known) > 8 else ''}"
            if known else f"; the table has no {kind} labels")
        raise TableLookupError(f"no table {kind} {text!r}{hint}")

    @staticmethod
    def _date_columns(text: str, labels: list[str], aliases: tuple[list[list[str]], ...]) -> list[int]:
        """Indexes of the columns whose header (or a stacked / lower header) ``text`` names as a date."""
        wanted = _words(text)
        found = []
        for index, label in enumerate(labels):
            names = [label] + [name for options in aliases for name in options[index]]
            if any(_names_the_date_column(wanted, _words(name)) for name in names):
                found.append(index)
        return found

    def row_index(self, label) -> int:
        return self._resolve(label, self.row_labels, "row", (self._row_aliases,))

    def column_index(self, label) -> int:
        return self._resolve(label, self.column_labels, "column", (self._column_aliases, self._lower_cells))

    def labelled_cells(self):
        """``(row label, column label, cell as written)`` for every body cell, in table order: the look-ups
        ``table[row, column]`` a program can make with the labels shown."""
        for row in self._rows[1:]:
            label, cells = row[0], row[1:]
            for column, cell in zip(self.column_labels, cells, strict=False):
                yield label, column, cell

    # -- cell access ----------------------------------------------------------------------------------
    def _cell(self, row: int, column: int, *, numeric: bool):
        cells = self._rows[row + 1]
        where = f"table cell ({self.row_labels[row]!r}, {self.column_labels[column]!r})"
        if column + 1 >= len(cells):
            raise TableLookupError(f"{where} does not exist (the row is short)")
        raw = cells[column + 1]
        value = parse_cell(raw)
        if value is MISSING:
            raise TableLookupError(f"{where} is {str(raw)!r}: no value")
        if value is TEXT:
            if numeric:
                raise TableLookupError(f"{where} is {str(raw)!r}, not a number")
            return str(raw)
        return value

    def get(self, row_label, column_label):
        """The cell at (row, column): a float, or the cell's text when it is not a number."""
        return self._cell(self.row_index(row_label), self.column_index(column_label), numeric=False)

    def row_values(self, row_label) -> list[float]:
        """All numbers of a row (every column); a cell that is not a number is an error."""
        row = self.row_index(row_label)
        return [self._cell(row, column, numeric=True) for column in range(len(self.column_labels))]

    def column_values(self, column_label) -> list[float]:
        """All numbers of a column (every row); a cell that is not a number is an error."""
        column = self.column_index(column_label)
        return [self._cell(row, column, numeric=True) for row in range(len(self.row_labels))]
