"""The scale of an answer (TAT-QA's ``"" thousand million billion percent``), decided with the document.

A small model copies scale words from its few-shot examples and forgets the units a table states. The
units are in the document: a table's unit line ("€m", "(in thousands)"), a column's own unit ("% of
total"), a row that is a rate ("Dividend yield"), a number in the text followed by "million". The
question says the rest ("What is the percentage change ..."). :func:`decide_scale` combines them:

1. count questions have no scale;
2. a question asking for a percentage (or a proportion / ratio answered in percent units, i.e. the
   value was multiplied by 100) is ``percent``;
3. an arithmetic answer computed only from percentages (cells written with "%", columns in "%", rows
   that are rates, margins or yields) that adds, subtracts or averages them is ``percent``;
4. otherwise the unit of the numbers the answer was computed from or copied from: the column's or the
   table's unit for a cell (or a unit statement in the column's header label, "(in thousand NT
   dollars)"), the word after the number for a text number ("$2.2 billion"), the unit the text states
   for the table ("(in thousands)"); per-share amounts, counts of shares / employees and ratios have none;
5. a span that is not a number (a name, a date, a sentence) has no scale; a number written with "%"
   carries its unit in the text.

The model's own scale is used only where the document is silent (no located number, no stated unit).
``paragraphs`` should be the whole document's text, not only what a prompt shows: a unit is often stated
once, in a paragraph retrieval does not pick for the question (``DocumentQA`` passes them all).
:func:`decide_scale` returns the scale and a short reason (recorded in bench rows, so a wrong scale can
be traced to the rule that chose it).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from knapsack_dspy.docqa.number_text import parse_number
from knapsack_dspy.docqa.table_layout import TableLayout, table_layout, unit_of_text

__all__ = ["ScaleDecision", "decide_scale", "locate_number", "stated_text_unit"]

SCALES = ("", "thousand", "million", "billion", "percent")
_PERCENT_QUESTION = re.compile(r"\bpercent(?:age)?s?\b|%|\bin percent", re.IGNORECASE)
_SHARE_OF_QUESTION = re.compile(r"\bproportion\b|\bratio\b|\bas a (?:share|fraction|portion)\b|\bportion\b",
                                re.IGNORECASE)
_RATE_LABEL = re.compile(r"%|\bpercent|\brate\b|\byield\b|\bmargin\b|\bvolatility\b|\bgrowth\b", re.IGNORECASE)
_NO_UNIT_LABEL = re.compile(r"per (?:share|unit|employee|day|ton|tonne)|\bpence\b|\bcents?\b|\bnumber of\b|"
                            r"\bshares\b|\bemployees?\b|\bheadcount\b|\bratio\b|\bstores\b|\bcustomers\b|"
                            r"\bsubscribers\b|\bvesting term\b|useful li(?:fe|ves)\b|\(years\)|\bin years\b",
                            re.IGNORECASE)
# "How many years did X exceed $30,000 thousand?" counts years: the scale word later in the question is the
# threshold's, not the answer's; only "how many dollars / thousands / ..." asks for an amount.
_COUNT_QUESTION = re.compile(r"\bhow many\s+(?!(?:dollars?|thousands?|millions?|billions?)\b)|\bnumber of\b",
                             re.IGNORECASE)
_YEAR = re.compile(r"^\s*(?:FY\s?)?(?:19|20)\d\d\s*$", re.IGNORECASE)
_MONEY_WORD = re.compile(r"[$€£¥]\s?\d[\d,]*(?:\.\d+)?\s*(thousand|million|billion|bn|m)\b", re.IGNORECASE)
_TEXT_UNIT = re.compile(r"\((?:[^()]*?)(?:in\s*)?(?:thousands|millions|billions)[^()]*\)"
                        r"|\(\s*in\s+(?:thousand|million|billion)\b[^()]*\)"  # "(in thousand NT dollars)"
                        r"|\bin\s+(?:thousands|millions|billions)\b|\$\s?['’]000|['’]000s?\b|\b(?:[$€£]|us\$)\s?m\b",
                        re.IGNORECASE)
# A unit statement inside a column's label ("Appropriation of earnings (in thousand NT dollars) 2018"): the
# table layout keeps such a header as the label of the columns it spans.
_LABEL_UNIT = re.compile(r"\((?:[^()]*?\s)?in\s+(thousands?|millions?|billions?)\b[^()]*\)", re.IGNORECASE)
_WORD_AFTER = re.compile(r"^\s*(%|percent\b|per cent\b|thousands?\b|millions?\b|billions?\b|bn\b|m\b|k\b)",
                         re.IGNORECASE)
_NUMBER_IN_TEXT = re.compile(r"\(?-?[$€£¥]?\s?\d[\d,]*(?:\.\d+)?")


@dataclass(frozen=True)
class ScaleDecision:
    scale: str
    reason: str


@dataclass(frozen=True)
class _Located:
    kind: str  # "cell" | "text"
    unit: str  # scale word of where the number was found ("" none / unknown)
    percent: bool  # written as a percentage, or a rate row / percent column
    no_unit: bool  # a per-share amount, a count of shares / people, a ratio


def stated_text_unit(paragraphs: Sequence[str]) -> str:
    """The unit the text states for its tables ("... as follows (in thousands):"), the most frequent one."""
    units = [unit_of_text(m.group(0)) for p in paragraphs or () for m in _TEXT_UNIT.finditer(p)]
    units = [u for u in units if u and u != "percent"]
    return Counter(units).most_common(1)[0][0] if units else ""


def _same(a: float, b: float) -> bool:
    return abs(abs(a) - abs(b)) <= 1e-9 * max(1.0, abs(b))


def locate_number(value: float, layout: TableLayout, paragraphs: Sequence[str]) -> list[_Located]:
    """Where ``value`` (its absolute value) is written in the document: table cells first, then text."""
    found = []
    for row in layout.rows:
        if row.kind == "section":
            continue
        for j, cell in enumerate(row.cells):
            number = parse_number(cell.replace(" ", "")) if cell else None
            if number is None or not _same(number, value):
                continue
            column_unit = layout.column_scale(j) if j < len(layout.column_units) else layout.scale
            column = layout.column_labels[j] if j < len(layout.column_labels) else ""
            if not column_unit:
                stated = _LABEL_UNIT.search(column)
                column_unit = unit_of_text(stated.group(1)) if stated else ""
            percent = cell.strip().rstrip(")").endswith("%") or column_unit == "percent" or bool(
                _RATE_LABEL.search(row.label))
            no_unit = bool(_NO_UNIT_LABEL.search(row.label) or _NO_UNIT_LABEL.search(column)) and not percent
            found.append(_Located("cell", "" if column_unit == "percent" else column_unit, percent, no_unit))
    for paragraph in paragraphs or ():
        for match in _NUMBER_IN_TEXT.finditer(paragraph):
            number = parse_number(match.group(0).replace(" ", "").lstrip("(").lstrip("-"))
            if number is None or not _same(number, value):
                continue
            after = _WORD_AFTER.match(paragraph[match.end():])
            word = after.group(1).lower() if after else ""
            unit = {"bn": "billion", "m": "million", "k": "thousand"}.get(word) or unit_of_text(word)
            found.append(_Located("text", "" if unit == "percent" else unit, unit == "percent", False))
    return found


def _numbers_of(answer) -> list[float]:
    items = answer if isinstance(answer, (list, tuple)) else [answer]
    out = []
    for item in items:
        number = parse_number(item) if isinstance(item, str) else (
            float(item) if isinstance(item, (int, float)) and not isinstance(item, bool) else None)
        if number is not None:
            out.append(number)
    return out


def _is_number_text(answer) -> bool:
    items = answer if isinstance(answer, (list, tuple)) else [answer]
    return bool(items) and all((isinstance(i, (int, float)) and not isinstance(i, bool)) or (
        isinstance(i, str) and parse_number(i) is not None) for i in items)


def _written_with_percent(answer) -> bool:
    items = answer if isinstance(answer, (list, tuple)) else [answer]
    return any(isinstance(i, str) and "%" in i for i in items)


def decide_scale(question: str, answer_type: str, answer=None, *, table=None, paragraphs: Sequence[str] = (),
                 used_values: Sequence[float] = (), multiplied_by_100: bool | None = None,
                 model_scale: str = "", layout: TableLayout | None = None) -> ScaleDecision:
    """The scale of ``answer`` to ``question`` (see the module docstring).

    answer_type: span / multi-span / arithmetic / count (the predicted or routed type).
    answer: the answer (a number, a string, a list of strings).
    table / layout: the document's table (rows of cells) or its :class:`TableLayout`.
    used_values: the numbers an arithmetic answer was computed from (the program's inputs).
    multiplied_by_100: whether the computation scaled a ratio to percent units (None: unknown).
    model_scale: the scale the model gave (one of SCALES or "").
    """
    layout = layout or table_layout(table or [])
    model_scale = model_scale if model_scale in SCALES else ""
    if answer_type == "count":
        return ScaleDecision("", "count")
    if answer_type in ("span", "multi-span"):
        if not _is_number_text(answer):
            return ScaleDecision("", "span is not a number")
        if _COUNT_QUESTION.search(question or "") and not _PERCENT_QUESTION.search(question or ""):
            return ScaleDecision("", "question asks for a number of things")
        items = answer if isinstance(answer, (list, tuple)) else [answer]
        if all(isinstance(i, str) and _YEAR.match(i) for i in items):
            return ScaleDecision("", "span is a year")
        if _written_with_percent(answer):
            return ScaleDecision("", "span written with %")
        if _PERCENT_QUESTION.search(question or ""):
            return ScaleDecision("percent", "question asks for a percentage")
        return _unit_of_values(_numbers_of(answer), layout, paragraphs, model_scale, "span")
    # arithmetic
    if _COUNT_QUESTION.search(question or "") and not _PERCENT_QUESTION.search(question or ""):
        return ScaleDecision("", "question asks for a number of things")
    if _PERCENT_QUESTION.search(question or ""):
        return ScaleDecision("percent", "question asks for a percentage")
    if _SHARE_OF_QUESTION.search(question or ""):
        if multiplied_by_100:
            return ScaleDecision("percent", "proportion computed in percent units")
        if multiplied_by_100 is False:
            return ScaleDecision("", "proportion computed as a ratio")
        return ScaleDecision(model_scale if model_scale in ("", "percent") else "", "proportion: model's scale")
    located = [locate_number(v, layout, paragraphs) for v in used_values if v not in (0, 1, 2, 3, 4, 12, 100)]
    located = [places for places in located if places]
    if located and all(any(p.percent for p in places) for places in located) and not multiplied_by_100:
        return ScaleDecision("percent", "computed from percentages")
    return _unit_of_values(list(used_values), layout, paragraphs, model_scale, "arithmetic")


def _unit_of_values(values: Sequence[float], layout: TableLayout, paragraphs: Sequence[str], model_scale: str,
                    kind: str) -> ScaleDecision:
    units: Counter = Counter()
    no_unit = located_any = False
    for value in values:
        places = locate_number(value, layout, paragraphs)
        if not places:
            continue
        located_any = True
        best = places[0]
        if best.no_unit:
            no_unit = True
        elif best.percent and kind == "span":
            units["percent"] += 1
        elif best.unit:
            units[best.unit] += 1
    if units:
        return ScaleDecision(units.most_common(1)[0][0], f"{kind}: unit of the numbers used")
    if no_unit:
        return ScaleDecision("", f"{kind}: per-share / count / ratio numbers")
    stated = layout.scale if layout.scale != "percent" else ""
    stated = stated or stated_text_unit(paragraphs)
    if located_any and stated:
        return ScaleDecision(stated, f"{kind}: the document's stated unit")
    written = _money_word_unit(paragraphs)
    if located_any and written and max(abs(v) for v in values) < 1_000_000:
        return ScaleDecision(written, f"{kind}: the unit the text writes amounts in")
    if located_any:
        return ScaleDecision("", f"{kind}: the document states no unit")
    return ScaleDecision(model_scale, f"{kind}: numbers not found in the document; model's scale")


def _money_word_unit(paragraphs: Sequence[str]) -> str:
    """The scale word the text writes its money amounts with ("$224 million"), the most frequent one."""
    words = [m.group(1).lower() for p in paragraphs or () for m in _MONEY_WORD.finditer(p)]
    units = [{"bn": "billion", "m": "million"}.get(w) or unit_of_text(w) for w in words]
    units = [u for u in units if u]
    return Counter(units).most_common(1)[0][0] if units else ""

