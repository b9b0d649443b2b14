"""Turn relevance scores into rankings: descending score, ties broken by original position."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["rank_indices", "top_n_in_order"]


def rank_indices(scores: Sequence[float] | np.ndarray) -> list[int]:
    """Indices sorted by descending score; equal scores keep their original order; NaN ranks last."""
    values = np.asarray(scores, dtype=np.float64).reshape(-1)
    values = np.where(np.isnan(values), -np.inf, values)
    # np.argsort(kind="stable") on the negated scores keeps ties in index order.
    return [int(i) for i in np.argsort(-values, kind="stable")]


def top_n_in_order(scores: Sequence[float] | np.ndarray, n: int | None) -> list[int]:
    """The indices of the ``n`` best scores, returned in ascending (document) order.

    ``n=None`` keeps everything; ``n`` larger than the number of scores keeps everything; ``n=0`` keeps
    nothing. Raises ``ValueError`` for a negative ``n``.
    """
    if n is not None and n < 0:
        raise ValueError(f"top-n must be >= 0 or None, got {n}")
    ranked = rank_indices(scores)
    kept = ranked if n is None else ranked[:n]
    return sorted(kept)
