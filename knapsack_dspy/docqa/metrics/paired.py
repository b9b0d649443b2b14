"""Paired comparison of two systems on the questions both answered.

When two selectors answer the same questions, their per-question scores are paired: the difference of
the means has a much narrower interval than the two means' own intervals suggest, because most of the
variance is between questions, not between systems. ``paired_comparison`` gives the mean difference with
a percentile bootstrap interval over questions (resampling the per-question differences) and, for 0/1
scores, the exact McNemar test on the questions where exactly one system is right.

Questions about one document are not independent (a table one system reads badly costs it every question on
that table). Given each question's group (``groups``: question id -> document id), ``paired_comparison`` also
gives the interval bootstrapped by document (``cluster_low`` / ``cluster_high``: whole documents resampled,
their questions kept together; ``metrics.intervals.cluster_bootstrap_ci``), which is the honest one when
documents carry several questions each; it is wider when a document's questions tend to go the same way.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass

import numpy as np

from knapsack_dspy.docqa.metrics.intervals import DEFAULT_LEVEL, bootstrap_ci, cluster_bootstrap_ci


@dataclass(frozen=True)
class PairedComparison:
    """``a - b`` on ``n`` shared questions. ``wins``: questions where a scored higher; ``losses``: lower.
    ``mcnemar_p``: two-sided exact McNemar p-value (0/1 scores only, else None). ``low`` / ``high``: the
    per-question paired bootstrap; ``cluster_low`` / ``cluster_high``: bootstrapped by group (document) over the
    ``clusters`` groups the shared questions belong to (None when no groups were given)."""

    n: int
    mean_a: float
    mean_b: float
    difference: float
    low: float
    high: float
    wins: int
    losses: int
    mcnemar_p: float | None
    level: float = DEFAULT_LEVEL
    clusters: int | None = None
    cluster_low: float | None = None
    cluster_high: float | None = None

    def to_dict(self) -> dict:
        return {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in asdict(self).items()}


def mcnemar_exact_p(wins: int, losses: int) -> float:
    """Two-sided exact McNemar p-value: the discordant questions split as a fair coin would split them."""
    from scipy.stats import binomtest  # heavy; kdspy score never needs it

    if wins < 0 or losses < 0:
        raise ValueError(f"counts must be non-negative, got {wins}, {losses}")
    if wins + losses == 0:
        return 1.0
    return float(binomtest(wins, wins + losses, 0.5).pvalue)


def paired_comparison(a: Mapping[str, float], b: Mapping[str, float], level: float = DEFAULT_LEVEL,
                      seed: int = 0, resamples: int = 2000,
                      groups: Mapping[str, str | None] | None = None) -> PairedComparison:
    """Compare per-question scores ``a`` and ``b`` (question id -> score) on the ids both have. ``groups``
    (question id -> document id; a question without one is a group of its own) adds the interval bootstrapped
    by document."""
    shared = sorted(set(a) & set(b))
    if not shared:
        nan = math.nan
        return PairedComparison(0, nan, nan, nan, nan, nan, 0, 0, None, level,
                                *((0, nan, nan) if groups is not None else ()))
    sa = np.array([float(a[i]) for i in shared])
    sb = np.array([float(b[i]) for i in shared])
    if np.isnan(sa).any() or np.isnan(sb).any():
        raise ValueError("paired_comparison: scores contain NaN")
    diffs = sa - sb
    low, high = bootstrap_ci(diffs, level=level, resamples=resamples, seed=seed)
    wins, losses = int((diffs > 0).sum()), int((diffs < 0).sum())
    binary = bool(np.isin(sa, (0.0, 1.0)).all() and np.isin(sb, (0.0, 1.0)).all())
    by_group = ()
    if groups is not None:
        labels = [groups.get(i) for i in shared]
        cluster_low, cluster_high = cluster_bootstrap_ci(diffs, labels, level=level, resamples=resamples, seed=seed)
        count = len({g for g in labels if g is not None}) + sum(g is None for g in labels)
        by_group = (count, cluster_low, cluster_high)
    return PairedComparison(len(shared), float(sa.mean()), float(sb.mean()), float(diffs.mean()), low, high, wins,
                            losses, mcnemar_exact_p(wins, losses) if binary else None, level, *by_group)


__all__ = ["PairedComparison", "mcnemar_exact_p", "paired_comparison"]
