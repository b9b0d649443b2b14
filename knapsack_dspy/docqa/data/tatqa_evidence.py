"""The table rows and sentences a TAT-QA record's gold solution reads: what its demo needs to show.

A TAT-QA record names its evidence paragraphs (``gold_evidence``: ``text_<i>``, from ``rel_paragraphs``) and
says whether the table was used (``"table"`` in ``gold_evidence``; ``modality``), but not which rows. Its gold
solution says which: :func:`derivation_rows` finds them --

- an arithmetic derivation: every data row with a cell holding one of its quantities (its constants -- an
  average's divisor, ``* 100`` -- left out: ``data.derivation_roles``), cells read as FinQA's evidence reads them
  (``data.program_evidence.data_row_values``);
- a span / multi-span answer: every row with a cell that writes one of its spans, and for a comparison
  (``"1,496.5>1,202.9"``) every row holding one of the numbers compared;
- a count: every row with a cell that writes one of the counted items (``"a##b##c"``);
- a record answered from the text only: no row (its demo shows no table).

``None`` when the rows cannot be told (a table record whose solution no row holds): its demo shows the table as a
query's does. :func:`context_rows` adds what a kept row needs to be read -- the heading of the section it is in
(its label is qualified by it) -- and the nearest other rows, up to a bound. ``DocumentQA(demo_table="gold_rows")``
cuts its TAT-QA demos so (``HybridRetriever.evidence_context``, as FinQA demos are cut); a query's document is
never cut.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from knapsack_dspy.docqa.data.derivation_roles import derivation_roles, parse_folded, positions_in_order
from knapsack_dspy.docqa.data.program_evidence import data_row_values, sentence_numbers
from knapsack_dspy.docqa.table_layout import header_row_count

__all__ = ["context_rows", "derivation_rows", "evidence_sentences", "tatqa_demo_evidence"]


def _text(value) -> str:
    """Lower case, spacing collapsed, a heading's trailing colon dropped: how a span is matched to a cell."""
    return " ".join(str(value or "").casefold().split()).rstrip(":").strip()


def _rows(table) -> list[list[str]]:
    return [["" if cell is None else str(cell) for cell in row] for row in (table or [])]


def _quantity_values(derivation: str, question: str) -> set[float] | None:
    """The values of an arithmetic derivation's quantities (not its constants), as a cell may hold them
    (``12%`` as 12 and 0.12, an accounting negative as either sign); ``None``: not arithmetic."""
    try:
        expression, literals = parse_folded(derivation)
    except ValueError:
        return None
    constants = derivation_roles(expression, literals, question).constants
    values: set[float] = set()
    for position in positions_in_order(expression):
        if position in constants:
            continue
        literal = literals[position]
        for number in {literal.number, literal.value, literal.number * literal.scale_factor}:
            values.update({round(number, 10), round(-number, 10)})
    return values


def _rows_writing(rows: list[list[str]], texts: Sequence[str], first: int) -> list[int]:
    """Rows from ``first`` on with a cell that writes one of ``texts`` (the whole cell, or a cell containing it
    when it is at least four characters: "Transportation Solutions" in "Transportation Solutions:")."""
    wanted = [t for t in (_text(x) for x in texts) if t]
    found = []
    for i in range(first, len(rows)):
        cells = [_text(c) for c in rows[i] if _text(c)]
        if any(cell == t or (len(t) >= 4 and t in cell) for cell in cells for t in wanted):
            found.append(i)
    return found


def derivation_rows(example: Mapping) -> list[int] | None:
    """The source rows (indices into ``example["table"]``, header rows excluded) a TAT-QA record's gold solution
    reads; ``[]`` when it reads none (answered from the text); ``None`` when they cannot be told."""
    rows = _rows(example.get("table"))
    if not rows or (example.get("modality") or "") == "text":
        return []
    first = header_row_count(rows)
    answer_type = example.get("answer_type") or ""
    derivation = (example.get("derivation") or "").strip()
    found: list[int] = []
    if answer_type == "arithmetic" and derivation:
        values = _quantity_values(derivation, str(example.get("question") or ""))
        if values:
            held = [{round(v, 10) for v in row} for row in data_row_values(rows)]
            found = [i for i in range(first, len(rows)) if held[i] & values]
    elif answer_type in ("span", "multi-span"):
        answer = example.get("answer")
        spans = list(answer) if isinstance(answer, (list, tuple)) else [answer]
        found = _rows_writing(rows, [str(s) for s in spans if s not in (None, "")], first)
        if derivation:  # a comparison ("1,496.5>1,202.9"): the rows holding the numbers compared
            compared = {round(sign * v, 10) for v in sentence_numbers(derivation) for sign in (1, -1)}
            held = [{round(v, 10) for v in row} for row in data_row_values(rows)]
            found = sorted(set(found) | {i for i in range(first, len(rows)) if held[i] & compared})
    elif answer_type == "count" and derivation:
        found = _rows_writing(rows, [item for item in derivation.split("##") if item.strip()], first)
    return found or None


def evidence_sentences(example: Mapping) -> list[int]:
    """The paragraphs named by ``gold_evidence`` (``text_<i>``), ascending."""
    return sorted({int(k[5:]) for k in example.get("gold_evidence") or ()
                   if isinstance(k, str) and k.startswith("text_") and k[5:].isdigit()})


def tatqa_demo_evidence(example: Mapping) -> tuple[list[int] | None, list[int]] | None:
    """(rows, sentences) a TAT-QA record's demo shows: :func:`derivation_rows` (``None``: as a query's table) and
    its evidence paragraphs; ``None`` for other records and records without a gold answer."""
    if (example.get("dataset") or "") != "tatqa" or not (example.get("answer_type") or ""):
        return None
    return derivation_rows(example), evidence_sentences(example)


def _is_heading(row: Sequence[str]) -> bool:
    """A section heading: a label over blank value cells ("Current assets:"), or a text-only row with no label
    ("As of December 31, 2018")."""
    label, cells = (row[0].strip() if row else ""), [c.strip() for c in row[1:]]
    if label:
        return not any(cells)
    return any(cells) and not any(re.search(r"\d", c) for c in cells)


def context_rows(table: Sequence[Sequence], evidence_rows: Sequence[int], bound: int) -> list[int]:
    """``evidence_rows`` (body rows of ``table``) with their context, ascending: the heading of the section each
    is in (the nearest heading row above it), then the body rows nearest an evidence row (by distance in the
    table, the earlier first on a tie) until ``bound`` body rows are shown in all. Evidence rows and their
    headings are kept whatever the bound; header rows are not counted (``evidence_context`` adds them).
    ``[]`` when no evidence row is a body row."""
    rows = _rows(table)
    first = header_row_count(rows) if rows else 0
    evidence = sorted({i for i in evidence_rows if first <= i < len(rows)})
    if not evidence:
        return []
    kept = set(evidence)
    for i in evidence:
        heading = next((j for j in range(i - 1, first - 1, -1) if _is_heading(rows[j])), None)
        if heading is not None:
            kept.add(heading)
    others = sorted((min(abs(i - e) for e in evidence), i) for i in range(first, len(rows)) if i not in kept)
    for _, i in others:
        if len(kept) >= bound:
            break
        kept.add(i)
    return sorted(kept)
