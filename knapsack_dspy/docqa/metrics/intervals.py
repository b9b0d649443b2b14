"""Confidence intervals for benchmark scores (90 % by default, as in SEER's tables).

- :func:`proportion_ci` — Wilson score interval for a proportion (accuracy, exact match, hit rates). Unlike the
  normal ("Wald") interval it stays inside [0, 1] and does not collapse to a point at 0 or n successes.
- :func:`bootstrap_ci` — seeded percentile bootstrap for the mean (or another statistic) of per-example
  scores that are not 0/1, such as F1 or program similarity.
- :func:`cluster_bootstrap_ci` — the same for scores that come in clusters (the questions of one document are
  not independent): whole clusters are resampled, their questions kept together.
- :class:`Estimate` — a value with its interval and sample size; :func:`proportion_estimate` and
  :func:`mean_estimate` build one.

All values are fractions in [0, 1] for proportions (multiply by 100 for percent).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from statistics import NormalDist
from typing import NamedTuple

import numpy as np

__all__ = ["Estimate", "Interval", "bootstrap_ci", "cluster_bootstrap_ci", "mean_estimate", "proportion_ci",
           "proportion_estimate", "z_value"]

DEFAULT_LEVEL = 0.9
DEFAULT_RESAMPLES = 2000
_MAX_BATCH_CELLS = 4_000_000  # resamples x n drawn at once (memory bound for the vectorised mean)


class Interval(NamedTuple):
    """A confidence interval ``(low, high)``; unpacks as a 2-tuple."""

    low: float
    high: float


def _check_level(level: float) -> float:
    level = float(level)
    if not 0.0 < level < 1.0:
        raise ValueError(f"confidence level must be strictly between 0 and 1, got {level}")
    return level


def z_value(level: float = DEFAULT_LEVEL) -> float:
    """Two-sided standard normal quantile: 1.6449 for 90 %, 1.9600 for 95 %."""
    level = _check_level(level)
    return NormalDist().inv_cdf(0.5 + level / 2.0)


def proportion_ci(successes: float, n: int, level: float = DEFAULT_LEVEL) -> Interval:
    """Wilson score interval for ``successes`` out of ``n`` trials.

    ``successes`` may be fractional (a sum of 0/1 flags given as floats). ``n == 0`` gives the uninformative
    interval ``(0.0, 1.0)``. Raises ``ValueError`` for ``n < 0``, ``successes`` outside ``[0, n]`` or a level
    outside (0, 1).
    """
    z = z_value(level)
    if isinstance(n, bool) or not float(n).is_integer() or n < 0:
        raise ValueError(f"n must be a non-negative whole number, got {n!r}")
    n = int(n)
    successes = float(successes)
    if math.isnan(successes) or successes < 0 or successes > n:
        raise ValueError(f"successes must be between 0 and n={n}, got {successes}")
    if n == 0:
        return Interval(0.0, 1.0)
    p = successes / n
    z2 = z * z
    denominator = 1.0 + z2 / n
    center = (p + z2 / (2.0 * n)) / denominator
    half = (z / denominator) * math.sqrt(p * (1.0 - p) / n + z2 / (4.0 * n * n))
    low = 0.0 if successes == 0 else max(0.0, center - half)
    high = 1.0 if successes == n else min(1.0, center + half)
    return Interval(low, high)


def bootstrap_ci(values: Sequence[float], level: float = DEFAULT_LEVEL, resamples: int = DEFAULT_RESAMPLES,
                 seed: int = 0, statistic: Callable[[np.ndarray], float] | None = None) -> Interval:
    """Percentile bootstrap interval of ``statistic`` (default: the mean) over ``values``.

    Deterministic for a given ``seed``. Empty input gives ``(nan, nan)``; a single value gives a zero-width
    interval at that value. ``statistic``, when given, is called on each resample (a 1-D array); the mean is
    computed vectorised in batches.
    """
    level = _check_level(level)
    if resamples < 1:
        raise ValueError(f"resamples must be >= 1, got {resamples}")
    data = np.asarray(values, dtype=float).ravel()
    if data.size == 0:
        return Interval(math.nan, math.nan)
    if np.isnan(data).any():
        raise ValueError("bootstrap_ci: values contain NaN")
    rng = np.random.default_rng(seed)
    n = data.size
    if statistic is None:
        stats = _resampled(lambda idx: data[idx].mean(axis=1), n, resamples, rng)
    else:
        stats = np.array([float(statistic(data[rng.integers(0, n, size=n)])) for _ in range(resamples)])
    return _percentile_interval(stats, level)


def _resampled(statistic: Callable[[np.ndarray], np.ndarray], n: int, resamples: int,
               rng: np.random.Generator) -> np.ndarray:
    """``statistic`` of ``resamples`` draws of ``n`` indices with replacement (a batch of draws, one per row, at
    a time: memory stays bounded)."""
    stats = np.empty(resamples)
    batch = max(1, _MAX_BATCH_CELLS // n)
    for start in range(0, resamples, batch):
        stop = min(resamples, start + batch)
        stats[start:stop] = statistic(rng.integers(0, n, size=(stop - start, n)))
    return stats


def _percentile_interval(stats: np.ndarray, level: float) -> Interval:
    alpha = (1.0 - level) / 2.0
    low, high = np.quantile(stats, [alpha, 1.0 - alpha])
    return Interval(float(low), float(high))


def cluster_bootstrap_ci(values: Sequence[float], clusters: Sequence, level: float = DEFAULT_LEVEL,
                         resamples: int = DEFAULT_RESAMPLES, seed: int = 0) -> Interval:
    """Percentile bootstrap interval of the mean of ``values`` whose items come in clusters (``clusters[i]``:
    the cluster of ``values[i]``, e.g. the document a question is about; ``None``: a cluster of its own).

    Each resample draws as many clusters as there are, with replacement, and keeps every value of a drawn
    cluster; the statistic is the mean over all values drawn (a document with five questions weighs five times
    one with a single question). When the questions of one document tend to go the same way, this interval is
    wider than the per-question bootstrap, which treats them as independent. With one value per cluster it is
    the per-question bootstrap (the same draws for the same seed when the clusters sort as the values come;
    equal up to rounding).
    Deterministic for a given ``seed``; empty input gives ``(nan, nan)``.
    """
    level = _check_level(level)
    if resamples < 1:
        raise ValueError(f"resamples must be >= 1, got {resamples}")
    data = np.asarray(values, dtype=float).ravel()
    labels = list(clusters)
    if len(labels) != data.size:
        raise ValueError(f"cluster_bootstrap_ci: {data.size} values but {len(labels)} cluster labels")
    if data.size == 0:
        return Interval(math.nan, math.nan)
    if np.isnan(data).any():
        raise ValueError("cluster_bootstrap_ci: values contain NaN")
    # a missing label is a cluster of its own; labels compare as text (ids may mix types)
    keys = [(0, str(c)) if c is not None else (1, str(i)) for i, c in enumerate(labels)]
    index: dict[tuple, int] = {key: n for n, key in enumerate(sorted(set(keys)))}
    inverse = np.array([index[key] for key in keys])
    sums = np.bincount(inverse, weights=data)
    counts = np.bincount(inverse).astype(float)
    stats = _resampled(lambda idx: sums[idx].sum(axis=1) / counts[idx].sum(axis=1), sums.size, resamples,
                       np.random.default_rng(seed))
    return _percentile_interval(stats, level)


@dataclass(frozen=True)
class Estimate:
    """A score with its confidence interval: ``value`` in [low, high] (NaN when ``n == 0``)."""

    value: float
    low: float
    high: float
    n: int
    level: float = DEFAULT_LEVEL

    def scaled(self, factor: float) -> Estimate:
        """The same estimate in other units (``scaled(100)`` for percent)."""
        return Estimate(self.value * factor, self.low * factor, self.high * factor, self.n, self.level)

    def to_dict(self) -> dict:
        return {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in asdict(self).items()}


def proportion_estimate(successes: float, n: int, level: float = DEFAULT_LEVEL) -> Estimate:
    """``successes / n`` with its Wilson interval (value NaN when ``n == 0``)."""
    low, high = proportion_ci(successes, n, level)
    value = float(successes) / n if n else math.nan
    if not n:
        low, high = math.nan, math.nan
    return Estimate(value, low, high, int(n), level)


def mean_estimate(values: Sequence[float], level: float = DEFAULT_LEVEL, seed: int = 0,
                  resamples: int = DEFAULT_RESAMPLES) -> Estimate:
    """Mean of ``values`` with its seeded percentile-bootstrap interval (NaN when empty)."""
    data = np.asarray(values, dtype=float).ravel()
    if data.size == 0:
        return Estimate(math.nan, math.nan, math.nan, 0, level)
    low, high = bootstrap_ci(data, level=level, resamples=resamples, seed=seed)
    return Estimate(float(data.mean()), low, high, int(data.size), level)
