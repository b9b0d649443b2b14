"""Majority vote over the answers of several sampled programs (self-consistency, Wang et al., 2023).

Answers are grouped by value: numbers equal after rounding to 4 decimals (``0.2`` and ``0.20000001`` are one
answer; ``True`` / ``False`` are not numbers here), strings equal up to whitespace and case, lists item by item.
A sample that failed (``None``) does not vote. The most frequent value wins; a tie goes to the value that was
sampled first, so the first sample's answer wins every tie it is part of.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

__all__ = ["answer_key", "majority_vote"]


def answer_key(answer):
    """The value an answer is grouped by (hashable)."""
    if isinstance(answer, bool):
        return ("bool", answer)
    if isinstance(answer, (int, float)):
        value = float(answer)
        return ("number", round(value, 4) + 0.0) if math.isfinite(value) else ("number", repr(value))
    if isinstance(answer, (list, tuple)):
        return ("list", tuple(answer_key(item) for item in answer))
    return ("text", " ".join(str(answer).split()).casefold())


def majority_vote(answers: Sequence) -> tuple[int | None, int]:
    """(index of the winning sample -- the first sample with the winning value --, its number of votes);
    ``(None, 0)`` when every sample failed (``None``)."""
    counts: dict = {}
    first: dict = {}
    for index, answer in enumerate(answers):
        if answer is None:
            continue
        key = answer_key(answer)
        counts[key] = counts.get(key, 0) + 1
        first.setdefault(key, index)
    if not counts:
        return None, 0
    winner = max(counts, key=lambda key: (counts[key], -first[key]))
    return first[winner], counts[winner]
