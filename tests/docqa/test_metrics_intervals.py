"""Wilson and bootstrap confidence intervals: textbook values, closed forms, properties."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from knapsack_dspy.docqa.metrics.intervals import (
    Estimate,
    bootstrap_ci,
    cluster_bootstrap_ci,
    mean_estimate,
    proportion_ci,
    proportion_estimate,
    z_value,
)


def test_z_values():
    assert z_value(0.9) == pytest.approx(1.644854, abs=1e-6)
    assert z_value(0.95) == pytest.approx(1.959964, abs=1e-6)


def test_wilson_textbook_value():
    # 45 successes out of 100 at 95 %: (0.3561, 0.5475) in the standard tables
    low, high = proportion_ci(45, 100, level=0.95)
    assert low == pytest.approx(0.35614, abs=1e-4)
    assert high == pytest.approx(0.54755, abs=1e-4)


def test_wilson_closed_form_at_zero_and_n():
    z2 = z_value(0.9) ** 2
    low, high = proportion_ci(0, 10)
    assert low == 0.0 and high == pytest.approx(z2 / (10 + z2))
    low, high = proportion_ci(10, 10)
    assert high == 1.0 and low == pytest.approx(10 / (10 + z2))


def test_wilson_is_symmetric_around_one_half():
    low, high = proportion_ci(50, 100)
    assert low + high == pytest.approx(1.0)


def test_unpacks_and_slices_as_two_numbers():
    interval = proportion_ci(3, 7)
    low, high = interval
    assert interval[:2] == (low, high) and interval.low == low


def test_empty_sample_is_uninformative():
    assert proportion_ci(0, 0) == (0.0, 1.0)
    estimate = proportion_estimate(0, 0)
    assert math.isnan(estimate.value) and estimate.n == 0
    assert estimate.to_dict()["value"] is None


@pytest.mark.parametrize("successes, n, level", [(-1, 5, 0.9), (6, 5, 0.9), (1, -1, 0.9), (1, 5, 1.0),
                                                 (1, 5, 0.0), (1, 2.5, 0.9)])
def test_bad_arguments(successes, n, level):
    with pytest.raises(ValueError):
        proportion_ci(successes, n, level)


@settings(max_examples=200, deadline=None)
@given(n=st.integers(1, 5000), data=st.data())
def test_wilson_properties(n, data):
    k = data.draw(st.integers(0, n))
    low90, high90 = proportion_ci(k, n, 0.9)
    low95, high95 = proportion_ci(k, n, 0.95)
    p = k / n
    assert 0.0 <= low90 <= p <= high90 <= 1.0
    assert low95 <= low90 + 1e-12 and high90 <= high95 + 1e-12  # wider at a higher level
    if 0 < k < n:
        assert low90 < p < high90


def test_wilson_shrinks_with_n():
    widths = [np.subtract(*proportion_ci(n // 2, n)[::-1]) for n in (10, 100, 1000)]
    assert widths[0] > widths[1] > widths[2] > 0


def test_bootstrap_is_seeded_and_brackets_the_mean():
    rng = np.random.default_rng(0)
    values = rng.uniform(0, 1, size=300)
    a = bootstrap_ci(values, seed=1)
    b = bootstrap_ci(values, seed=1)
    c = bootstrap_ci(values, seed=2)
    assert a == b and a != c
    assert a.low < values.mean() < a.high
    # close to the normal approximation for a mean of uniform values
    se = values.std(ddof=1) / math.sqrt(values.size)
    assert (a.high - a.low) == pytest.approx(2 * z_value(0.9) * se, rel=0.15)


def test_bootstrap_edge_cases():
    assert all(math.isnan(x) for x in bootstrap_ci([]))
    assert bootstrap_ci([0.7]) == (0.7, 0.7)
    assert bootstrap_ci([0.5] * 20) == (0.5, 0.5)
    with pytest.raises(ValueError):
        bootstrap_ci([1.0, float("nan")])
    with pytest.raises(ValueError):
        bootstrap_ci([1.0], resamples=0)


def test_bootstrap_custom_statistic_and_batching():
    values = np.arange(101, dtype=float)
    median = bootstrap_ci(values, statistic=np.median, resamples=300, seed=0)
    assert median.low < 50 < median.high
    big = bootstrap_ci(np.r_[np.zeros(5000), np.ones(5000)], resamples=1000, seed=0)  # several batches
    assert big.low < 0.5 < big.high and big.high - big.low < 0.03


def test_estimates():
    e = mean_estimate([0.0, 1.0, 1.0, 1.0])
    assert e.value == 0.75 and e.n == 4 and e.low <= e.value <= e.high
    p = proportion_estimate(3, 4).scaled(100)
    assert isinstance(p, Estimate) and p.value == 75.0 and 0 < p.low < 75 < p.high <= 100


def test_cluster_bootstrap_with_one_value_per_cluster_is_the_per_question_bootstrap():
    values = np.random.default_rng(3).random(40)
    labels = [f"doc{i:03d}" for i in range(40)]  # sorted as the values come: the same draws
    low, high = cluster_bootstrap_ci(values, labels, seed=5)
    expected = bootstrap_ci(values, seed=5)
    assert (low, high) == pytest.approx(tuple(expected), abs=1e-12)
    # a missing label is a cluster of its own
    assert cluster_bootstrap_ci(values, [None] * 40, seed=5) != (math.nan, math.nan)


def test_cluster_bootstrap_keeps_a_documents_questions_together():
    # 20 documents of 5 questions each; every question of a document goes the same way
    doc_effect = np.where(np.arange(20) % 2 == 0, 1.0, -1.0)
    values = np.repeat(doc_effect, 5)
    labels = np.repeat([f"d{i}" for i in range(20)], 5).tolist()
    by_question = bootstrap_ci(values)
    by_document = cluster_bootstrap_ci(values, labels)
    assert by_document.high - by_document.low > 1.8 * (by_question.high - by_question.low)
    # one document: every resample is that document, a zero-width interval at its mean
    assert cluster_bootstrap_ci([0.0, 1.0, 1.0, 1.0], ["x"] * 4) == (0.75, 0.75)
    # the statistic is the mean over questions: a big document weighs more than a small one
    # (draws of two documents: big+big 1.0, big+small 0.9, small+small 0.0; a mean of document means would
    # give 0.5 for big+small)
    middle = cluster_bootstrap_ci([1.0] * 9 + [0.0], ["big"] * 9 + ["small"], level=0.4, resamples=4000)
    assert middle == pytest.approx((0.9, 0.9))


def test_cluster_bootstrap_rejects_bad_input():
    with pytest.raises(ValueError, match="3 values but 2 cluster labels"):
        cluster_bootstrap_ci([1.0, 2.0, 3.0], ["a", "b"])
    with pytest.raises(ValueError, match="NaN"):
        cluster_bootstrap_ci([1.0, math.nan], ["a", "b"])
    assert all(math.isnan(x) for x in cluster_bootstrap_ci([], []))
