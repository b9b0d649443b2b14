"""Per-example scores for the bench (the official metrics, applied to one example at a time).

- TAT-QA: exact match and numeracy-focused F1 of the answer with its scale (official TAT-QA rules);
  ``correct`` is EM. Loaded examples hold a span answer as one string (the official files: a one-item
  list); a computed 0 is an answer (the official script would read the number 0 as none).
- FinQA: with a FinQA-DSL program, official execution accuracy (``correct``) and program accuracy;
  with a Python program (``prediction.language == "python"``) or a direct answer, the official exact match of
  the executed answer (program accuracy is defined for the DSL only: ``None``); our own lenient match
  (``metrics.answer_matching.kdspy_lenient_match``, not SEER's rule) is recorded separately
  (``kdspy_lenient``).
- SARA: label accuracy for entailment cases; exact dollars for numerical cases (+ within 10 %, and the SARA
  authors' rule ``authors_rule``: within max(10 %, $5,000)).
Every metric is bounded by the size of its input (FinQA program equivalence by steps and operations:
``program_check`` says when it was skipped), and an answer a metric cannot read is wrong with ``score_error``.
Selection quality (model-free): gold-case hit, best program similarity, attribute match.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from knapsack_dspy.docqa.metrics.answer_matching import finqa_exact_match, kdspy_lenient_match
from knapsack_dspy.docqa.metrics.finqa import check_program, execution_match
from knapsack_dspy.docqa.metrics.sara import score_sara_prediction
from knapsack_dspy.docqa.metrics.selection_proxies import query_selection_scores
from knapsack_dspy.docqa.metrics.tatqa import score_tatqa_answer
from knapsack_dspy.messages import one_line

logger = logging.getLogger(__name__)


def _gold_answer(example):
    return example.get("answer")


def score_prediction(example, prediction) -> dict[str, Any]:
    """The score fields of one answer. Never raises: an answer a metric cannot read (or a metric failing on
    it) is wrong, with ``score_error`` saying why."""
    dataset = example.get("dataset")
    row: dict[str, Any] = {"gold": _gold_answer(example), "gold_scale": example.get("scale") or ""}
    scorer = _SCORERS.get(dataset)
    if scorer is None:
        row.update(correct=False)
        return row
    try:
        row.update(scorer(example, prediction))
    except Exception as exc:  # noqa: BLE001 -- one unreadable answer must not stop a run
        row.update(em=0.0, correct=False, score_error=one_line(f"{type(exc).__name__}: {exc}"))
        if dataset == "tatqa":
            row["f1"] = 0.0
        logger.warning("could not score %s: %s", example.get("id"), row["score_error"])
    return row


def _tatqa_scores(example, prediction) -> dict[str, Any]:
    answer = getattr(prediction, "answer", None)
    if isinstance(answer, (int, float)) and not isinstance(answer, bool):
        # The official script reads a prediction of 0 as "no answer" (``if not prediction``); a program
        # that computes 0 did answer, so numbers are scored as the text they print as (-0.0 as 0.0).
        answer = str(answer + 0.0 if answer == 0 else answer)
    em, f1 = score_tatqa_answer(answer, getattr(prediction, "scale", None), example.get("answer"),
                                example.get("scale") or "", example.get("answer_type"))
    return {"em": em, "f1": f1, "correct": em == 1.0}


def _finqa_scores(example, prediction) -> dict[str, Any]:
    """finqa_cases too: FinQA questions + programs without documents."""
    answer = getattr(prediction, "answer", None)
    program = getattr(prediction, "program", None)
    row: dict[str, Any] = {}
    if program and getattr(prediction, "language", "finqa") == "finqa":
        correct = execution_match(program, example.get("table"), example.get("answer"))
        try:  # bounded by the programs' sizes; beyond them only the execution check counts
            check = check_program(program, example.get("program"))
        except ValueError as exc:  # the gold program cannot be read the official way
            row.update(program_correct=None, program_check=f"skipped: {one_line(exc, 200)}")
        else:
            row["program_correct"] = check.equal
            if check.skipped:
                row["program_check"] = check.skipped
    else:  # a Python program's executed answer, or a direct answer: the official exact match
        correct = answer is not None and finqa_exact_match(answer, example.get("answer"))
        if program:
            row["program_correct"] = None  # program accuracy is defined for the FinQA DSL only
    row.update(correct=bool(correct), em=float(bool(correct)),
               kdspy_lenient=answer is not None and kdspy_lenient_match(answer, example.get("answer")))
    return row


def _sara_scores(example, prediction) -> dict[str, Any]:
    gold_case = {"id": example.get("id"), "type": example.get("answer_type"), "label": example.get("answer"),
                 "answer": example.get("answer"), "answer_value": example.get("answer_value")}
    if gold_case["type"] == "entailment":
        gold_case.pop("answer_value")
    score = score_sara_prediction(getattr(prediction, "answer", None), gold_case)
    return {"correct": bool(score.correct), "em": float(score.correct), "within_10pct": score.within_10pct,
            "authors_rule": score.authors_rule, "case_type": score.case_type}


_SCORERS = {"tatqa": _tatqa_scores, "finqa": _finqa_scores, "finqa_cases": _finqa_scores,
            "sara": _sara_scores}


def correctness_metric(example, prediction, trace=None) -> float:
    """A DSPy metric: 1.0 when the prediction is right by the dataset's official rule."""
    return float(score_prediction(example, prediction).get("correct", False))


def selection_quality(select, example, exemplar_ids: Sequence[str]) -> dict[str, Any]:
    """Gold-case hit, best program similarity and attribute match of the chosen exemplars (model-free)."""
    return query_selection_scores(select, example, exemplar_ids)
