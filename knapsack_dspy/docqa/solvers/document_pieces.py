"""A query's document as pieces its selecting predictor may cut per call (``DocumentQA(evidence_selection=
"knapsack")``; docs/retrieval.md, "Selectable evidence").

Today's rules give a table + text solver a fixed context (``HybridRetriever``: the whole table unless it is long, the
top 3 paragraphs). With selectable evidence the solver's ``table`` and ``text`` inputs hold
``knapsack_dspy.Pieces`` instead, and the compiled demo predictor chooses per call which of them to show beside its
demos, in one knapsack (docs/core.md, "Selectable context"):

- **table**: one piece per data row (its text: the row's non-blank cells, ``retrieval.table_rows.row_text``); the
  header rows (``table_layout.header_row_count``) are the fixed part every row needs -- shown once, their cost
  shared; ``render(kept)`` is the table field of the header rows and the rows kept, in table order, rendered exactly
  as the solver renders any table (``render_table_field``: its layout for Python programs, as written for the FinQA
  DSL), ``""`` with no row;
- **text**: one piece per paragraph (FinQA: per pre / post-text sentence); ``render(kept)`` is the text field of
  the paragraphs kept, in document order (``render_paragraphs``).

So with every piece kept the field is the whole document's rendering, and with any subset it is what today's
rendering gives that subset. A table without a data row and a document without paragraphs are plain text (nothing
to choose). A solver marks its query selectable by the source key :data:`SELECTABLE`; after the call it reads which
pieces were shown (the selection's ``pieces``) back into rows and paragraphs (:func:`shown_rows`), which its
program runs against (the labels it saw are the labels of the rows shown).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from knapsack_dspy.docqa.data.rendering import render_paragraphs
from knapsack_dspy.docqa.retrieval.table_rows import row_text
from knapsack_dspy.docqa.solvers.demo_rendering import as_mapping, document_inputs, render_table_field
from knapsack_dspy.docqa.table_layout import header_row_count
from knapsack_dspy.modules.selectable_context import Pieces

__all__ = ["SELECTABLE", "ParagraphLines", "TableRows", "document_query_inputs", "paragraph_pieces", "shown_rows",
           "table_pieces"]

#: The key of a solver's source mapping that asks for its document as pieces (``DocumentQA`` sets it).
SELECTABLE = "selectable"


def _rows(table) -> list[list]:
    return [list(row) for row in (table or [])]


class TableRows:
    """``render`` of a table's pieces: the header rows and the data rows ``kept`` as the solver renders a table
    (``layout``: ``render_table_field``'s). Picklable (a compile keeps a query's inputs on disk)."""

    def __init__(self, header: Sequence[Sequence], rows: Sequence[Sequence], layout: bool = True):
        self.header = _rows(header)
        self.rows = _rows(rows)
        self.layout = bool(layout)

    def __call__(self, kept: tuple[int, ...]) -> str:
        if not kept:
            return ""
        return render_table_field([*self.header, *(self.rows[i] for i in kept)], layout=self.layout)

    def __repr__(self) -> str:  # what a prompt count keyed on the value reads: stable, no address
        return f"TableRows({len(self.header)} header rows, {len(self.rows)} rows, layout={self.layout})"


class ParagraphLines:
    """``render`` of a document's paragraphs as pieces: the paragraphs ``kept``, one per line (picklable)."""

    def __init__(self, paragraphs: Sequence[str]):
        self.paragraphs = [str(p) for p in paragraphs]

    def __call__(self, kept: tuple[int, ...]) -> str:
        return render_paragraphs([self.paragraphs[i] for i in kept])

    def __repr__(self) -> str:
        return f"ParagraphLines({len(self.paragraphs)} paragraphs)"


def table_pieces(table, layout: bool = True) -> Pieces | str:
    """A table (rows of cells, header first) as pieces: its data rows, the header rows their shared fixed part; a
    table without a data row (or a rendered string) as its plain rendering."""
    if table is None or isinstance(table, str):
        return render_table_field(table, layout=layout)
    rows = _rows(table)
    first = header_row_count(rows) if rows else 0
    if first >= len(rows):
        return render_table_field(rows, layout=layout)
    header, body = rows[:first], rows[first:]
    return Pieces(tuple(row_text([str(c) for c in row]) for row in body), TableRows(header, body, layout),
                  needs=(0,) * len(body), fixed_texts=("\n".join(row_text([str(c) for c in row]) for row in header),))


def paragraph_pieces(paragraphs) -> Pieces | str:
    """Paragraphs as pieces (one each, no fixed part); none, or already rendered text, as plain text."""
    if paragraphs is None or isinstance(paragraphs, str) or not len(paragraphs):
        return "" if paragraphs is None else (paragraphs if isinstance(paragraphs, str) else "")
    texts = tuple(str(p) for p in paragraphs)
    return Pieces(texts, ParagraphLines(texts))


def document_query_inputs(source, layout: bool = True) -> dict[str, Any]:
    """A table + text solver's inputs for a query: ``demo_rendering.document_inputs`` (the whole context as given),
    or with ``source[SELECTABLE]`` the table and the paragraphs as pieces (see the module docstring)."""
    fields = as_mapping(source)
    if not fields.get(SELECTABLE) or fields.get("text") is not None:
        return document_inputs(fields, "all", layout=layout)
    plain = document_inputs({**fields, "table": None, "paragraphs": None}, "all", layout=layout)  # the checks
    return {"table": table_pieces(fields.get("table"), layout), "text": paragraph_pieces(fields.get("paragraphs")),
            "question": plain["question"]}


def shown_rows(table, pieces: Mapping[str, Sequence[int]] | None) -> list[list] | None:
    """The rows of ``table`` a prompt showed, given the selection's ``pieces`` (``{field: kept indices}``): the header
    rows and the data rows kept (none kept: no row), or the whole table when its rows were not pieces."""
    if table is None or isinstance(table, str) or not pieces or "table" not in pieces:
        return None if table is None or isinstance(table, str) else _rows(table)
    rows = _rows(table)
    first = header_row_count(rows) if rows else 0
    kept = sorted(int(i) for i in pieces["table"])
    return [*rows[:first], *(rows[first + i] for i in kept)] if kept else []
