"""Pure ranking helpers: score ordering, BM25, table header detection."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from knapsack_dspy.docqa.retrieval.bm25 import BM25, tokenize
from knapsack_dspy.docqa.retrieval.evidence_recall import gold_indices, recall_at_n
from knapsack_dspy.docqa.retrieval.ranking import rank_indices, top_n_in_order
from knapsack_dspy.docqa.retrieval.table_rows import row_text
from knapsack_dspy.docqa.table_layout import header_row_count


def test_rank_indices_breaks_ties_by_position_and_puts_nan_last():
    assert rank_indices([0.1, 0.5, 0.5, float("nan"), 0.9]) == [4, 1, 2, 0, 3]
    assert rank_indices([]) == []


@given(st.lists(st.floats(-1, 1, allow_nan=False), max_size=30), st.one_of(st.none(), st.integers(0, 40)))
def test_top_n_in_order_keeps_the_best_in_document_order(scores, n):
    kept = top_n_in_order(scores, n)
    assert kept == sorted(kept)
    assert len(kept) == (len(scores) if n is None else min(n, len(scores)))
    dropped = set(range(len(scores))) - set(kept)
    if kept and dropped:
        assert min(scores[i] for i in kept) >= max(scores[i] for i in dropped)


def test_top_n_rejects_negative_n():
    with pytest.raises(ValueError, match="top-n must be >= 0"):
        top_n_in_order([1.0], -1)


def test_tokenize_keeps_numbers_and_drops_stop_words():
    assert tokenize("What was the Revenue in 2019 (in $1,234.5 million)?") == [
        "revenue", "2019", "1234", "5", "million"]


def test_bm25_prefers_rare_matching_terms():
    docs = ["revenue grew in 2019", "revenue and costs", "the dividend policy of the board", ""]
    scores = BM25().scores("dividend policy 2019", docs)
    assert scores.shape == (4,)
    assert scores[2] > scores[0] > scores[1] == 0.0 and scores[3] == 0.0
    # A term in every document contributes less than one in a single document.
    common = BM25().scores("revenue", ["revenue x", "revenue y"])
    rare = BM25().scores("x", ["revenue x", "revenue y"])
    assert rare[0] > common[0] > 0


def test_bm25_length_normalisation_and_edge_cases():
    short, long = BM25(b=0.75).scores("cash", ["cash flow", "cash " + "other words here " * 10])
    assert short > long
    flat = BM25(b=0.0).scores("cash", ["cash flow", "cash " + "other words here " * 10])
    assert flat[0] == pytest.approx(flat[1])
    assert BM25().scores("anything", []).shape == (0,)
    assert not np.any(BM25().scores("", ["a b", "c"]))
    with pytest.raises(ValueError, match="k1 >= 0"):
        BM25(b=2)


def test_header_rows():
    assert header_row_count([]) == 0
    assert header_row_count([["", "2019", "2018"], ["", "€m", "€m"], ["Revenue", "1", "2"]]) == 2
    assert header_row_count([["Item", "2019"], ["", "x"], ["Revenue", "1"]]) == 2
    assert header_row_count([["", "2019"], ["Revenue", "1"], ["", "2"]]) == 1
    # Never the whole table: at least one data row is left.
    assert header_row_count([["", "a"], ["", "b"], ["", "c"]]) == 2
    assert header_row_count([["", "a"], ["", "b"], ["", "c"], ["", "d"], ["", "e"], ["", "f"], ["x", "1"]]) == 4
    assert row_text(["Revenue", " 1,234 ", "", "(5)"]) == "Revenue | 1,234 | (5)"


def test_gold_indices_and_recall():
    gold = ["text_0", "text_12", "table", "table_3", "paragraph_1"]
    assert gold_indices(gold, "text") == {0, 12}
    assert gold_indices(gold, "table") == {3}
    with pytest.raises(ValueError, match="evidence kind"):
        gold_indices(gold, "row")
    ranking = [12, 4, 0, 7]
    assert recall_at_n(ranking, {0, 12}, 1) == 0.5
    assert recall_at_n(ranking, {0, 12}, 3) == 1.0
    assert recall_at_n(ranking, {0, 12}, None) == 1.0
    assert recall_at_n(ranking, {0, 9}, None) == 0.5
    assert recall_at_n([5, 6], {0, 6}, 1, always_kept=[0]) == 0.5
    with pytest.raises(ValueError, match="undefined"):
        recall_at_n(ranking, set(), 1)
