"""Per-example scores for the bench: the task's official metric applied to one answer (``Task.score``:
``docqa/tasks/<data set>.py`` says what each data set records), and the selection's model-free quality.

An answer a metric cannot read (or a metric failing on it) is wrong with ``score_error`` saying why, and the
task's ``score_on_error`` fields (TAT-QA: F1 0). Selection quality (model-free): gold-case hit, best program
similarity, attribute match.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from knapsack_dspy.docqa.metrics.selection_proxies import query_selection_scores
from knapsack_dspy.docqa.tasks import TASKS
from knapsack_dspy.messages import one_line

logger = logging.getLogger(__name__)


def _gold_answer(example):
    return example.get("answer")


def score_prediction(example, prediction) -> dict[str, Any]:
    """The score fields of one answer. Never raises: an answer a metric cannot read (or a metric failing on
    it) is wrong, with ``score_error`` saying why."""
    task = TASKS.get(example.get("dataset"))
    row: dict[str, Any] = {"gold": _gold_answer(example), "gold_scale": example.get("scale") or ""}
    if task is None:
        row.update(correct=False)
        return row
    try:
        row.update(task.score(example, prediction))
    except Exception as exc:  # noqa: BLE001 -- one unreadable answer must not stop a run
        row.update(em=0.0, correct=False, score_error=one_line(f"{type(exc).__name__}: {exc}"))
        row.update(task.score_on_error)
        logger.warning("could not score %s: %s", example.get("id"), row["score_error"])
    return row


def correctness_metric(example, prediction, trace=None) -> float:
    """A DSPy metric: 1.0 when the prediction is right by the dataset's official rule."""
    return float(score_prediction(example, prediction).get("correct", False))


def selection_quality(select, example, exemplar_ids: Sequence[str]) -> dict[str, Any]:
    """Gold-case hit, best program similarity and attribute match of the chosen exemplars (model-free)."""
    return query_selection_scores(select, example, exemplar_ids)
