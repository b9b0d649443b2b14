"""Questions by position: ``FROM:TO`` (1-based, inclusive) in the order the run answered its eval split.

A run takes its eval split (``eval_path`` or ``eval_split``) in the split's order or, with ``order_seed``, in the
order that seed fixes (``data.seeded_order``; the FinQA tuning questions). "Questions 61-150" in a report are
positions in that order, so a script that restricts rows to them must read the same order from the rows' ``spec``
-- positions in the file's order would pick other questions without a word.
"""

from __future__ import annotations

from collections.abc import Mapping

from knapsack_dspy.data.loader import load_examples
from knapsack_dspy.data.seeded_order import in_seeded_order

__all__ = ["QuestionRangeError", "parse_question_range", "questions_at"]


class QuestionRangeError(ValueError):
    """A ``FROM:TO`` that is not two positions 1 <= FROM <= TO."""


def parse_question_range(text: str) -> tuple[int, int]:
    """``"61:150"`` -> ``(61, 150)``; anything else raises :class:`QuestionRangeError` naming the form wanted."""
    first, colon, last = str(text).partition(":")
    try:
        first_n, last_n = int(first), int(last)
    except ValueError:
        first_n = last_n = 0
    if not colon or first_n < 1 or last_n < first_n:
        raise QuestionRangeError(f"wants FROM:TO, two positions with 1 <= FROM <= TO (e.g. 61:150), got {text!r}")
    return first_n, last_n


def questions_at(spec: Mapping, text: str, data_dir=None) -> set[str]:
    """The ids of the questions at positions ``text`` (``FROM:TO``) of the run ``spec`` (a row's ``spec``): its
    eval file or split, in its ``order_seed``'s order when it has one."""
    first, last = parse_question_range(text)
    dataset = spec.get("dataset") or "tatqa"
    if spec.get("eval_path"):
        examples = load_examples(dataset, path=spec["eval_path"], data_dir=data_dir)
    else:
        examples = load_examples(dataset, split=spec.get("eval_split") or None, data_dir=data_dir)
    if spec.get("order_seed") is not None:
        examples = in_seeded_order(examples, int(spec["order_seed"]))
    return {str(example["id"]) for example in list(examples)[first - 1:last]}
