"""The choice of one call's demos and evidence pieces, without DSPy (``selection/evidence_knapsack.py``): the joint
knapsack against the demos-first orders, the evidence budget, the query's terms, what the repair drops."""

import numpy as np
import pytest

from knapsack_dspy.selection.demo_knapsack import DemoKnapsack
from knapsack_dspy.selection.evidence_knapsack import (
    AT_LEAST_ONE_PIECE,
    EvidencePieces,
    choose_jointly,
    choose_sequentially,
    least_worth_per_token,
    without_demo,
)
from knapsack_dspy.selection.exemplar_pool import ExemplarPool, SelectionRequest
from knapsack_dspy.selection.query_terms import cover_matrix, query_terms, text_terms
from knapsack_dspy.selection.selectors.case_coverage import CaseCoverageSelector
from knapsack_dspy.selection.selectors.kate_within_budget import KATEWithinBudgetSelector


def _pool(costs=(40.0, 40.0, 40.0, 40.0)):
    vectors = np.eye(4, 8, dtype=np.float32)
    kinds = {"kind": np.array(["a", "b", "a", "b"])}
    return ExemplarPool([f"e{i}" for i in range(4)], vectors, np.asarray(costs), kinds)


def _query(pool, i=0):
    v = pool.embeddings[i] + 0.1 * pool.embeddings[(i + 1) % 4]
    return SelectionRequest(v / np.linalg.norm(v), capacity=1e9)


def _pieces(costs, relevance, covers=None, fixed=None, fixed_costs=(), weight=1.0, price=0.0):
    n = len(costs)
    return EvidencePieces(np.asarray(costs, dtype=float), np.asarray(relevance, dtype=float),
                          np.asarray(fixed if fixed is not None else [-1] * n), np.asarray(fixed_costs, dtype=float),
                          np.zeros((n, 0), bool) if covers is None else np.asarray(covers, bool), weight, price)


def _selector(pool, **params):
    return CaseCoverageSelector(max_exemplars=2, knn_k=None, **params).fit(pool)


def test_the_query_terms_are_words_of_three_letters_and_numbers_without_stopwords():
    assert query_terms("What was the Revenue in 2019 and in 1,234.5 of the revenue?") == ("revenue", "2019", "1234.5")
    assert text_terms("Net margins, 2019: 12.5%") == {"net", "margins", "2019", "12.5"}
    covers = cover_matrix(("revenue", "2019"), ["Revenue rose.", "In 2019 revenue fell.", "Costs"])
    assert covers.tolist() == [[True, False], [True, True], [False, False]]


def test_a_piece_is_worth_its_relevance_and_each_term_once():
    pieces = _pieces([10, 10, 10], [0.5, 0.2, 0.0], covers=[[1, 0], [1, 1], [0, 0]], weight=2.0, price=0.01)
    assert pieces.values.tolist() == pytest.approx([2 * 0.5 - 0.1, 2 * 0.2 - 0.1, -0.1])
    assert pieces.value([0, 1]) == pytest.approx(0.9 + 0.3 + 2.0)  # both terms, each once: weight / 2 each
    assert pieces.value([0]) == pytest.approx(0.9 + 1.0)


def test_a_fixed_part_is_paid_once_for_the_pieces_that_need_it():
    pieces = _pieces([10, 10, 10], [0.5, 0.4, 0.3], fixed=[0, 0, -1], fixed_costs=[25])
    assert pieces.tokens([0]) == 35 and pieces.tokens([0, 1]) == 45 and pieces.tokens([2]) == 10


def test_joint_trades_a_demo_for_pieces_where_the_demos_first_cannot():
    """Room for one demo or for the pieces: the demos-first orders take the demo (the selector fills its capacity
    after the most relevant piece), the joint knapsack the pieces when they are worth more."""
    pool = _pool()
    selector = _selector(pool)
    request = _query(pool)
    pieces = _pieces([20, 20, 20], [0.9, 0.8, 0.7], covers=[[1, 0, 0], [0, 1, 0], [0, 0, 1]], weight=1.0)
    problem = selector.knapsack_problem(pool, request)
    joint = choose_jointly(pool, request, problem, pieces, capacity=60)
    sequential = choose_sequentially(pool, request, selector, pieces, capacity=60, problem=problem)
    assert joint.pieces == (0, 1, 2) and joint.selection.indices == ()
    assert sequential.selection.indices and sequential.pieces == (0,)
    objective = lambda choice: (choice.demo_value or 0.0) + choice.evidence_value  # noqa: E731
    assert objective(joint) > objective(sequential)
    assert joint.mode == "joint" and sequential.mode == "sequential"


def test_the_relevance_order_takes_a_prefix_while_it_fits():
    pool = _pool()
    selector = _selector(pool)
    request = _query(pool)
    pieces = _pieces([10, 30, 10, 10], [0.9, 0.8, 0.7, 0.1])
    choice = choose_sequentially(pool, request, selector, pieces, capacity=100, by_relevance=True)
    assert choice.mode == "relevance"
    assert choice.selection.total_cost == 80  # two demos in the 90 tokens the most relevant piece leaves them
    # 20 tokens left: the second most relevant (30 tokens) does not fit, and the order stops there (the third,
    # 10 tokens, would have fitted): a prefix of the relevance order
    assert choice.pieces == (0,)
    roomy = choose_sequentially(pool, request, selector, pieces, capacity=200, by_relevance=True)
    assert roomy.pieces == (0, 1, 2, 3)


def test_the_evidence_budget_caps_the_pieces_in_every_mode():
    pool = _pool()
    selector = _selector(pool)
    request = _query(pool)
    pieces = _pieces([10, 10, 10, 10], [0.9, 0.8, 0.7, 0.6], covers=np.eye(4, dtype=bool))
    problem = selector.knapsack_problem(pool, request)
    for choice in (choose_jointly(pool, request, problem, pieces, capacity=500, evidence_budget=25),
                   choose_sequentially(pool, request, selector, pieces, capacity=500, evidence_budget=25),
                   choose_sequentially(pool, request, selector, pieces, capacity=500, evidence_budget=25,
                                       by_relevance=True)):
        assert pieces.tokens(choice.pieces) <= 25 and len(choice.pieces) == 2
    free = choose_jointly(pool, request, problem, pieces, capacity=500)
    assert free.pieces == (0, 1, 2, 3)


def test_at_least_one_piece_unless_none_fits_then_the_constraint_is_relaxed():
    pool = _pool()
    selector = _selector(pool, token_price=0.05)  # every piece of negative value on its own
    request = _query(pool)
    problem = selector.knapsack_problem(pool, request)
    pieces = _pieces([30, 30], [0.2, 0.1], price=0.05)
    choice = choose_jointly(pool, request, problem, pieces, capacity=100)
    assert choice.pieces == (0,)  # the most valuable one, though worth less than nothing
    none_fits = choose_jointly(pool, request, problem, _pieces([300, 300], [0.2, 0.1]), capacity=100)
    assert none_fits.pieces == () and AT_LEAST_ONE_PIECE in none_fits.relaxed


def test_the_greedy_solves_the_same_objective_and_never_beats_the_exact():
    rng = np.random.default_rng(1)
    for _ in range(10):
        costs = rng.integers(20, 80, 6).astype(float)
        pool = _pool(costs[:4])
        selector = _selector(pool, token_price=0.002)
        request = _query(pool, int(rng.integers(0, 4)))
        pieces = _pieces(rng.integers(5, 60, 8), rng.uniform(0, 1, 8), covers=rng.random((8, 4)) < 0.3,
                         fixed=rng.integers(-1, 2, 8), fixed_costs=[15, 25], price=0.002)
        problem = selector.knapsack_problem(pool, request)
        capacity = float(rng.integers(60, 250))
        exact = choose_jointly(pool, request, problem, pieces, capacity=capacity)
        greedy = choose_jointly(pool, request, problem, pieces, capacity=capacity, solver="greedy")
        total = lambda c: c.demo_value + c.evidence_value  # noqa: E731
        assert total(greedy) <= total(exact) + 1e-6
        for choice in (exact, greedy):
            assert choice.selection.total_cost + pieces.tokens(choice.pieces) <= capacity + 1e-9


def test_a_selector_without_a_knapsack_exposes_none():
    pool = _pool()
    assert KATEWithinBudgetSelector(max_exemplars=2).fit(pool).knapsack_problem(pool, _query(pool)) is None
    problem = _selector(pool).knapsack_problem(pool, _query(pool))
    assert isinstance(problem, DemoKnapsack) and len(problem) == 4 and problem.max_items == 2


def test_the_repair_drops_the_least_value_per_token_and_keeps_a_piece():
    pool = _pool()
    selector = _selector(pool)
    request = _query(pool)
    problem = selector.knapsack_problem(pool, request)
    pieces = _pieces([10, 40], [0.9, 0.05])
    assert least_worth_per_token(pool, request, problem, pieces, [0], [0, 1]) == ("piece", 1)
    assert least_worth_per_token(pool, request, problem, pieces, [0], [0]) == ("demo", 0)  # the last piece stays
    assert least_worth_per_token(pool, request, problem, pieces, [], [0]) == ("piece", 0)
    assert least_worth_per_token(pool, request, problem, pieces, [], []) is None
    selection = choose_jointly(pool, request, problem, pieces, capacity=1000).selection
    assert selection.indices
    dropped = without_demo(pool, selection, selection.indices[0])
    assert dropped.indices == selection.indices[1:] and dropped.total_cost == pool.cost_of(dropped.indices)
