"""Per-example scores for the bench (the official metrics, applied to one example at a time).

- TAT-QA: exact match and numeracy-focused F1 of the answer with its scale (official TAT-QA rules);
  ``correct`` is EM. Loaded examples hold a span answer as one string (the official files: a one-item
  list); a computed 0 is an answer (the official script would read the number 0 as none).
- FinQA: with a FinQA-DSL program, official execution accuracy (``correct``) and program accuracy;
  with a Python program (``prediction.language == "python"``) or a direct answer, the official exact match of
  the executed answer (program accuracy is defined for the DSL only: ``None``); SEER's lenient match is
  recorded separately (``lenient``).
- SARA: label accuracy for entailment cases; exact dollars for numerical cases (+ within 10 %).
Selection quality (model-free): gold-case hit, best program similarity, attribute match.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from knapsack_dspy.metrics.answer_matching import finqa_exact_match, lenient_match
from knapsack_dspy.metrics.finqa import execution_match, program_match
from knapsack_dspy.metrics.sara import score_sara_prediction
from knapsack_dspy.metrics.selection_proxies import query_selection_scores
from knapsack_dspy.metrics.tatqa import score_tatqa_answer

logger = logging.getLogger(__name__)


def _gold_answer(example):
    return example.get("answer")


def score_prediction(example, prediction) -> dict[str, Any]:
    dataset = example.get("dataset")
    answer = getattr(prediction, "answer", None)
    scale = getattr(prediction, "scale", None)
    row: dict[str, Any] = {"gold": _gold_answer(example), "gold_scale": example.get("scale") or ""}
    if dataset == "tatqa":
        if isinstance(answer, (int, float)) and not isinstance(answer, bool):
            # The official script reads a prediction of 0 as "no answer" (``if not prediction``); a program
            # that computes 0 did answer, so numbers are scored as the text they print as (-0.0 as 0.0).
            answer = str(answer + 0.0 if answer == 0 else answer)
        try:
            em, f1 = score_tatqa_answer(answer, scale, example.get("answer"), example.get("scale") or "",
                                        example.get("answer_type"))
        except (ValueError, TypeError) as exc:  # an answer the metric cannot read: wrong, and said why
            em, f1 = 0.0, 0.0
            row["score_error"] = f"{type(exc).__name__}: {exc}"
            logger.warning("could not score %s: %s", example.get("id"), row["score_error"])
        row.update(em=em, f1=f1, correct=em == 1.0)
    elif dataset in ("finqa", "finqa_cases"):  # finqa_cases: FinQA questions + programs without documents
        program = getattr(prediction, "program", None)
        if program and getattr(prediction, "language", "finqa") == "finqa":
            correct = execution_match(program, example.get("table"), example.get("answer"))
            try:
                row["program_correct"] = program_match(program, example.get("program"))
            except ValueError:
                row["program_correct"] = None
        else:
            correct = answer is not None and finqa_exact_match(answer, example.get("answer"))
            if program:
                row["program_correct"] = None
        row.update(correct=bool(correct), em=float(bool(correct)),
                   lenient=answer is not None and lenient_match(answer, example.get("answer")))
    elif dataset == "sara":
        gold_case = {"id": example.get("id"), "type": example.get("answer_type"), "label": example.get("answer"),
                     "answer": example.get("answer"), "answer_value": example.get("answer_value")}
        if gold_case["type"] == "entailment":
            gold_case.pop("answer_value")
        score = score_sara_prediction(answer, gold_case)
        row.update(correct=bool(score.correct), em=float(score.correct), within_10pct=score.within_10pct,
                   case_type=score.case_type)
    else:
        row.update(correct=False)
    return row


def correctness_metric(example, prediction, trace=None) -> float:
    """A DSPy metric: 1.0 when the prediction is right by the dataset's official rule."""
    return float(score_prediction(example, prediction).get("correct", False))


def selection_quality(select, example, exemplar_ids: Sequence[str]) -> dict[str, Any]:
    """Gold-case hit, best program similarity and attribute match of the chosen exemplars (model-free)."""
    return query_selection_scores(select, example, exemplar_ids)
