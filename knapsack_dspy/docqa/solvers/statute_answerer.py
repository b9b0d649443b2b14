"""``StatuteAnswerer``: SARA statutory reasoning (statute + facts + question -> label or dollar amount)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import dspy
from dspy.utils.exceptions import AdapterParseError

from knapsack_dspy.docqa.signatures import AnswerStatuteQuestion
from knapsack_dspy.docqa.solvers.answer_parsing import parse_statute_answer
from knapsack_dspy.docqa.solvers.answerer_modes import (
    DemoPredictorAccess,
    build_predictor,
    check_mode,
    demos_for_call,
    uses_reasoning,
)
from knapsack_dspy.docqa.solvers.call_plan import LMCall, Plan, PlannedAnswerer
from knapsack_dspy.docqa.solvers.demo_rendering import statute_demo, statute_inputs

__all__ = ["KINDS", "StatuteAnswerer", "infer_kind"]

KINDS = ("entailment", "numerical")


def infer_kind(question: str) -> str:
    """SARA's two case types read off the question: a question (``"How much tax ...?"``) asks for an
    amount; a statement (``"Alice's exemption ... is equal to $4000."``) is checked for entailment."""
    return "numerical" if str(question).rstrip().endswith("?") else "entailment"


class StatuteAnswerer(PlannedAnswerer, DemoPredictorAccess, dspy.Module):
    """Apply statutes to the facts of a case.

    mode: ``"cot"`` (default), ``"few_shot"``, ``"zero_shot"`` or ``"zero_shot_cot"``.
    demo_statute: include a demo's ``statute`` field when the pool example carries one (off by default:
        statute sections are long, and the query's prompt already carries the relevant ones).

    ``forward(question, statute=None, facts=None, paragraphs=None, text=None, kind=None, demos=None)`` ->
    ``dspy.Prediction(answer, kind, raw_answer, reasoning, error)``: ``answer`` is ``"Entailment"``,
    ``"Contradiction"`` or an ``int`` of dollars (``None`` when the reply holds neither). ``kind``
    (``"entailment"`` / ``"numerical"``) decides which is read; by default it is inferred from the
    question (:func:`infer_kind`). ``statute`` is a string or a list of section texts.
    """

    def __init__(self, mode: str = "cot", *, demo_statute: bool = False):
        super().__init__()
        self.mode = check_mode(mode)
        self.demo_statute = bool(demo_statute)
        self.answer = build_predictor(AnswerStatuteQuestion, mode)

    def prompt_inputs(self, source) -> dict[str, str]:
        return statute_inputs(source)

    def as_demo(self, example) -> dspy.Example:
        return statute_demo(example, reasoning=uses_reasoning(self.mode), include_statute=self.demo_statute)

    def _plan(self, question: str, statute: str | Sequence[str] | None = None, facts: str | None = None,
              paragraphs: Iterable[str] | None = None, text: str | None = None, kind: str | None = None,
              demos: Iterable | None = None) -> Plan:
        """``forward`` / ``aforward`` (see the class docstring)."""
        if kind is not None and kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS} or None, got {kind!r}")
        kind = kind or infer_kind(question)
        inputs = self.prompt_inputs({"question": question, "statute": statute, "facts": facts,
                                     "paragraphs": paragraphs, "text": text})
        prediction = yield LMCall(self.answer, inputs, demos_for_call(self.mode, demos))
        if isinstance(prediction, AdapterParseError):
            return dspy.Prediction(answer=None, kind=kind, raw_answer=prediction.lm_response, reasoning=None,
                                   error="the reply did not follow the required output format")
        raw = prediction.get("answer")
        value = parse_statute_answer(raw, kind=kind)
        error = None if value is not None else (
            f"no {'Entailment/Contradiction label' if kind == 'entailment' else 'dollar amount'} in the reply")
        return dspy.Prediction(answer=value, kind=kind, raw_answer=raw, reasoning=prediction.get("reasoning"),
                               error=error)
