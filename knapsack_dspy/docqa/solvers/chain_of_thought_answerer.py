"""``ChainOfThoughtAnswerer``: the LM answers directly from the table and text (optionally reasoning first).

The answer text is parsed (:func:`~knapsack_dspy.docqa.solvers.answer_parsing.parse_answer`) into a
number, a span or a list of spans; the scale comes from the ``scale`` field, or from the answer text
itself (``"12.5%"``) when the field gives none.
"""

from __future__ import annotations

from collections.abc import Iterable

import dspy
from dspy.utils.exceptions import AdapterParseError

from knapsack_dspy.docqa.signatures import AnswerFromTableText
from knapsack_dspy.docqa.solvers.answer_parsing import normalise_scale, parse_answer
from knapsack_dspy.docqa.solvers.answerer_modes import (
    DemoPredictorAccess,
    build_predictor,
    check_mode,
    demos_for_call,
    uses_reasoning,
)
from knapsack_dspy.docqa.solvers.call_plan import LMCall, Plan, PlannedAnswerer
from knapsack_dspy.docqa.solvers.demo_rendering import PARAGRAPH_MODES, answer_demo
from knapsack_dspy.docqa.solvers.document_pieces import SELECTABLE, document_query_inputs

__all__ = ["ChainOfThoughtAnswerer"]


class ChainOfThoughtAnswerer(PlannedAnswerer, DemoPredictorAccess, dspy.Module):
    """Answer from the table and the text without a program.

    mode: ``"cot"`` (default: ``dspy.ChainOfThought``, reasoning then answer, with demos),
        ``"few_shot"`` (``dspy.Predict`` with demos), ``"zero_shot"`` (no demos) or ``"zero_shot_cot"``.
    demo_paragraphs: ``"all"`` or ``"gold"`` (see :class:`ProgramOfThoughtAnswerer`).

    ``forward(question, table=None, paragraphs=None, text=None, demos=None, selectable=False)`` ->
    ``dspy.Prediction(answer, scale, raw_answer, reasoning, error)``: ``answer`` is a number, a string or
    a list of strings (``None`` when the reply could not be read, with ``error`` saying why). ``selectable=True``:
    the table's rows and the paragraphs go to the (compiled) predictor as pieces it cuts per call
    (``document_pieces``).
    """

    def __init__(self, mode: str = "cot", *, demo_paragraphs: str = "all"):
        super().__init__()
        if demo_paragraphs not in PARAGRAPH_MODES:
            raise ValueError(f"demo_paragraphs must be one of {PARAGRAPH_MODES}, got {demo_paragraphs!r}")
        self.mode = check_mode(mode)
        self.demo_paragraphs = demo_paragraphs
        self.answer = build_predictor(AnswerFromTableText, mode)

    def prompt_inputs(self, source) -> dict[str, str]:
        return document_query_inputs(source)

    def as_demo(self, example) -> dspy.Example:
        return answer_demo(example, reasoning=uses_reasoning(self.mode), paragraphs=self.demo_paragraphs)

    def _plan(self, question: str, table=None, paragraphs: Iterable[str] | None = None, text: str | None = None,
              demos: Iterable | None = None, selectable: bool = False) -> Plan:
        """``forward`` / ``aforward`` (see the class docstring)."""
        inputs = self.prompt_inputs({"question": question, "table": table, "paragraphs": paragraphs, "text": text,
                                     SELECTABLE: selectable})
        prediction = yield LMCall(self.answer, inputs, demos_for_call(self.mode, demos))
        if isinstance(prediction, AdapterParseError):
            return dspy.Prediction(answer=None, scale="", raw_answer=prediction.lm_response, reasoning=None,
                                   error="the reply did not follow the required output format")
        raw = prediction.get("answer")
        value, hinted_scale = parse_answer(raw)
        scale = normalise_scale(prediction.get("scale")) or hinted_scale
        error = None if value is not None else "the reply gave an empty answer"
        return dspy.Prediction(answer=value, scale=scale, raw_answer=raw, reasoning=prediction.get("reasoning"),
                               error=error)
