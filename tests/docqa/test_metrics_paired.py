"""Paired comparison of two systems on shared questions: bootstrap CI of the difference, exact McNemar."""

import math

import numpy as np
import pytest

from knapsack_dspy.docqa.metrics.intervals import bootstrap_ci
from knapsack_dspy.docqa.metrics.paired import mcnemar_exact_p, paired_comparison


def test_a_clear_difference_is_detected():
    a = {f"q{i}": float(i < 30) for i in range(40)}
    b = {f"q{i}": float(i < 10) for i in range(40)}
    pc = paired_comparison(a, b)
    assert (pc.n, pc.mean_a, pc.mean_b, pc.difference) == (40, 0.75, 0.25, 0.5)
    assert (pc.wins, pc.losses) == (20, 0)
    assert 0 < pc.low <= 0.5 <= pc.high
    assert pc.mcnemar_p == pytest.approx(2 * 0.5 ** 20)


def test_identical_systems_differ_by_nothing():
    a = {f"q{i}": float(i % 3 == 0) for i in range(30)}
    pc = paired_comparison(a, dict(a))
    assert (pc.difference, pc.low, pc.high, pc.wins, pc.losses, pc.mcnemar_p) == (0.0, 0.0, 0.0, 0, 0, 1.0)


def test_only_shared_questions_count_and_scores_may_be_fractional():
    a = {"x": 1.0, "y": 0.5, "only-a": 1.0}
    b = {"x": 0.0, "y": 0.25, "only-b": 0.0}
    pc = paired_comparison(a, b)
    assert pc.n == 2 and pc.difference == pytest.approx((1.0 + 0.25) / 2)
    assert pc.mcnemar_p is None  # F1-like scores: no McNemar
    empty = paired_comparison({"a": 1.0}, {"b": 1.0})
    assert empty.n == 0 and math.isnan(empty.difference) and empty.to_dict()["difference"] is None


def test_mcnemar_matches_the_binomial_by_hand():
    assert mcnemar_exact_p(6, 1) == pytest.approx(16 / 128)  # P(X<=1) + P(X>=6), X ~ Bin(7, 1/2)
    assert mcnemar_exact_p(0, 0) == 1.0
    with pytest.raises(ValueError):
        mcnemar_exact_p(-1, 2)


def test_pairing_narrows_the_interval_when_questions_vary_in_difficulty():
    rng = np.random.default_rng(0)
    easy = rng.random(200) < 0.5  # most of the variance is between questions
    a = {f"q{i}": float(e) for i, e in enumerate(easy)}
    b = {f"q{i}": float(e if i % 20 else not e) for i, e in enumerate(easy)}  # differs on 10 questions
    pc = paired_comparison(a, b)
    low_a, high_a = bootstrap_ci(list(a.values()))
    assert (pc.high - pc.low) < 0.5 * (high_a - low_a)


def test_grouped_questions_get_an_interval_bootstrapped_by_document():
    # 12 documents of 5 questions: a wins every question of the even documents and loses those of the odd ones
    # but one, so the per-question bootstrap sees 60 independent differences and the documents are only 12
    a, b, groups = {}, {}, {}
    for doc in range(12):
        for q in range(5):
            qid = f"d{doc}q{q}"
            groups[qid] = f"d{doc}"
            a[qid], b[qid] = (1.0, 0.0) if doc % 2 == 0 or doc == 11 else (0.0, 1.0)
    pc = paired_comparison(a, b, groups=groups)
    assert pc.clusters == 12 and pc.n == 60
    assert pc.cluster_low <= pc.difference <= pc.cluster_high
    assert (pc.cluster_high - pc.cluster_low) > 1.8 * (pc.high - pc.low)
    assert set(pc.to_dict()) >= {"clusters", "cluster_low", "cluster_high"}
    # without groups nothing is bootstrapped by document; a question without a group is a group of its own
    plain = paired_comparison(a, b)
    assert (plain.clusters, plain.cluster_low, plain.cluster_high) == (None, None, None)
    assert (plain.low, plain.high) == (pc.low, pc.high)
    assert paired_comparison(a, b, groups={}).clusters == 60
    empty = paired_comparison({"x": 1.0}, {"y": 1.0}, groups={})
    assert empty.clusters == 0 and empty.to_dict()["cluster_low"] is None
