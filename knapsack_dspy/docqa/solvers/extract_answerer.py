"""``ExtractAnswerer``: answer a span question by copying the answer from the table or the text.

The route for questions whose answer is *in* the document (TAT-QA's span and multi-span questions): the LM
copies it (``ExtractAnswer``), nothing is computed. The reply is read as a JSON list of spans (several items)
or one span as written; a span keeps its signs and units ("$9.6 million", "22.9%"). Its scale is decided
with the document (``knapsack_dspy.docqa.data.answer_scale``): a span copied from a table of amounts in thousands is
in thousands, a name has none.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Iterable

import dspy
from dspy.utils.exceptions import AdapterParseError

from knapsack_dspy.docqa.data.answer_scale import decide_scale
from knapsack_dspy.docqa.signatures import ExtractAnswer
from knapsack_dspy.docqa.solvers.answer_parsing import strip_answer_decoration
from knapsack_dspy.docqa.solvers.answerer_modes import (
    DemoPredictorAccess,
    build_predictor,
    check_mode,
    demos_for_call,
)
from knapsack_dspy.docqa.solvers.call_plan import LMCall, Plan, PlannedAnswerer
from knapsack_dspy.docqa.solvers.demo_rendering import PARAGRAPH_MODES, as_mapping, document_inputs
from knapsack_dspy.docqa.solvers.document_pieces import SELECTABLE, document_query_inputs, shown_rows
from knapsack_dspy.docqa.table_layout import as_written, table_layout
from knapsack_dspy.modules.selection_context import selection_log

__all__ = ["ExtractAnswerer", "read_spans", "span_answer_text"]


def span_answer_text(answer) -> str:
    """A gold span answer as the extraction demos show it: the span as written, or a JSON list of spans."""
    if isinstance(answer, (list, tuple)):
        items = [str(item) for item in answer]
        return items[0] if len(items) == 1 else json.dumps(items, ensure_ascii=False)
    return "" if answer is None else str(answer)


# "423,209, 428,501": numbers written with thousands separators, the items separated by ", "
_SEPARATED_ITEM = re.compile(r"^[-(]?[$€£¥]?\d{1,3}(?:,\d{3})+(?:\.\d+)?\)?$|^[-(]?[$€£¥]?\d+(?:\.\d+)?\)?$")


def _numbers_with_separators(inner: str) -> list[str] | None:
    """The items of an unquoted list of numbers whose thousands separators are commas (``[423,209, 428,501]``,
    which JSON reads as four numbers), when a comma followed by a space separates the items; else None."""
    parts = [part.strip() for part in re.split(r",\s+", inner)]
    if len(parts) < 2 or not any("," in part for part in parts):
        return None
    return parts if all(_SEPARATED_ITEM.match(part) for part in parts) else None


def _python_list(body: str) -> list | None:
    """A Python-style list literal of strings and numbers (``['a, b', 'c']``), else None."""
    try:
        value = ast.literal_eval(body)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None
    if isinstance(value, list) and all(isinstance(i, (str, int, float)) and not isinstance(i, bool) for i in value):
        return value
    return None


def read_spans(text, *, expect_list: bool | None = None) -> str | list[str] | None:
    """An extraction reply as an answer: a list of spans (a JSON or Python-style list), or one span as written
    (decoration such as ``Answer:`` or surrounding quotes removed); ``None`` for an empty reply. An unquoted
    list of numbers with comma thousands separators (``[423,209, 428,501]``) keeps each number whole; so does
    a bracketed single number (``[4,411]``) when one span is expected (``expect_list=False``: a span question)."""
    if text is None:
        return None
    body = strip_answer_decoration(str(text))
    if expect_list is False and body.startswith("[") and body.endswith("]") and "," in body \
            and _SEPARATED_ITEM.match(body[1:-1].strip()):
        return body[1:-1].strip()
    if body.startswith("[") and body.endswith("]"):
        try:
            items = json.loads(body)
        except ValueError:
            items = _numbers_with_separators(body[1:-1]) or _python_list(body) or [
                part.strip().strip("\"'") for part in body[1:-1].split(",") if part.strip()]
        if isinstance(items, list) and items and all(isinstance(i, (int, float)) and not isinstance(i, bool)
                                                     for i in items):
            items = _numbers_with_separators(body[1:-1]) or items
        if isinstance(items, list):
            items = [str(item).strip() for item in items if str(item).strip()]
            if items:
                return items[0] if len(items) == 1 else items
    return body or None


class ExtractAnswerer(PlannedAnswerer, DemoPredictorAccess, dspy.Module):
    """Copy the answer from the document.

    mode: ``"few_shot"`` (``dspy.Predict`` with demos, default), ``"zero_shot"``, ``"cot"`` or ``"zero_shot_cot"``.
    demo_paragraphs: ``"all"`` or ``"gold"`` (see :class:`ProgramOfThoughtAnswerer`).

    ``forward(question, table=None, paragraphs=None, text=None, demos=None, answer_type=None,
    unit_paragraphs=None)`` -> ``dspy.Prediction(answer, scale, raw_answer, reasoning, error, scale_reason)``;
    ``unit_paragraphs``: the text the scale rule reads units from (default ``paragraphs``). ``selectable=True``: the
    table's rows and the paragraphs go to the (compiled) extractor as pieces it cuts per call (``document_pieces``).
    """

    reads_units = True  # takes ``unit_paragraphs``

    def __init__(self, mode: str = "few_shot", *, demo_paragraphs: str = "all"):
        super().__init__()
        if demo_paragraphs not in PARAGRAPH_MODES:
            raise ValueError(f"demo_paragraphs must be one of {PARAGRAPH_MODES}, got {demo_paragraphs!r}")
        self.mode = check_mode(mode)
        self.demo_paragraphs = demo_paragraphs
        self.answer = build_predictor(ExtractAnswer, mode)

    def prompt_inputs(self, source) -> dict[str, str]:
        return document_query_inputs(source)

    def as_demo(self, example) -> dspy.Example:
        """A span / multi-span pool record as a demo (its gold answer copied as the reply)."""
        fields = as_mapping(example)
        answer = span_answer_text(fields.get("answer"))
        if not answer:
            raise ValueError(f"record {fields.get('id')!r}: an extraction demo needs a gold span answer")
        demo = document_inputs(fields, self.demo_paragraphs)
        demo["answer"] = answer
        return dspy.Example(**demo)

    def _plan(self, question: str, table=None, paragraphs: Iterable[str] | None = None, text: str | None = None,
              demos: Iterable | None = None, answer_type: str | None = None,
              unit_paragraphs: Iterable[str] | None = None, selectable: bool = False) -> Plan:
        """``forward`` / ``aforward`` (see the class docstring)."""
        inputs = self.prompt_inputs({"question": question, "table": table, "paragraphs": paragraphs, "text": text,
                                     SELECTABLE: selectable})
        with selection_log() as selected:  # what a selecting extractor showed (selectable evidence)
            prediction = yield LMCall(self.answer, inputs, demos_for_call(self.mode, demos))
        if selectable and selected:  # its labels and units are those of the rows the prompt showed
            table = shown_rows(table, selected[-1].info.get("pieces"))
        if isinstance(prediction, AdapterParseError):
            return dspy.Prediction(answer=None, scale="", raw_answer=prediction.lm_response, reasoning=None,
                                   error="the reply did not follow the required output format", scale_reason="")
        raw = prediction.get("answer")
        value = read_spans(raw, expect_list={"span": False, "multi-span": True}.get(answer_type))
        if value is None:
            return dspy.Prediction(answer=None, scale="", raw_answer=raw, reasoning=prediction.get("reasoning"),
                                   error="the reply gave an empty answer", scale_reason="")
        layout = table_layout(table if isinstance(table, (list, tuple)) else [])
        value = as_written(value, layout)
        kind = answer_type if answer_type in ("span", "multi-span") else (
            "multi-span" if isinstance(value, list) else "span")
        source = paragraphs if unit_paragraphs is None else unit_paragraphs
        texts = [str(p) for p in source] if source is not None and not isinstance(source, str) \
            else [str(source if source is not None else text or "")]
        decision = decide_scale(question, kind, value, layout=layout, paragraphs=texts)
        return dspy.Prediction(answer=value, scale=decision.scale, raw_answer=raw,
                               reasoning=prediction.get("reasoning"), error=None, scale_reason=decision.reason)
