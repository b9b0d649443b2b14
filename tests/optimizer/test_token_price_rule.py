"""The token price read from the pool (``token_price="auto"``, ``selection/token_price.py``): the rule on synthetic
pools (halves, cross-fitted hits, the share it keeps, the fallbacks), case coverage with it (state, select before
fit), and a compile that reads it, reports it and saves it."""

import warnings

import dspy
import numpy as np
import pytest
from dspy.utils import DummyLM
from helpers import HashingEmbedder, WordCounter

from knapsack_dspy import KnapsackFewShot
from knapsack_dspy.selection.exemplar_pool import ExemplarPool, SelectionRequest
from knapsack_dspy.selection.selectors.base import NotFittedError
from knapsack_dspy.selection.selectors.case_coverage import CaseCoverageSelector
from knapsack_dspy.selection.token_price import (
    FALLBACK_PRICE,
    MIN_HALF,
    RELATIVE_PRICES,
    SHARE,
    PriceFit,
    fit_token_price,
    half_of,
    sub_pool,
)


def clustered_pool(n=240, kinds=6, dim=16, seed=0, cost=100.0, spread=0.35):
    """Exemplars around ``kinds`` centres: an exemplar's kind is its centre (the case that teaches it), its cost
    ``cost`` tokens give or take 50 %, one document per exemplar."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(kinds, dim))
    labels = rng.integers(0, kinds, size=n)
    x = centres[labels] + spread * rng.normal(size=(n, dim))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    costs = cost * rng.uniform(0.5, 1.5, size=n)
    return ExemplarPool(ids=[f"e{i}" for i in range(n)], embeddings=x, costs=costs,
                        attributes={"kind": np.asarray([f"k{k}" for k in labels])},
                        doc_ids=np.asarray([f"d{i}" for i in range(n)]))


def at_price(price):
    return CaseCoverageSelector(max_exemplars=4, token_price=price, knn_k=None)


def test_the_price_keeps_the_share_of_the_unpriced_hit_rate_and_the_next_price_does_not():
    pool = clustered_pool()
    fit = fit_token_price(pool, at_price, capacity=1000.0)
    assert fit.rule == "cross-fitted" and fit.price > 0
    grid = {point["price"]: point for point in fit.grid}
    unpriced = grid[0.0]
    assert grid[fit.price]["hit"] >= SHARE * unpriced["hit"]
    assert grid[fit.price]["exemplars"] < unpriced["exemplars"]  # the price costs exemplars, ...
    assert grid[fit.price]["tokens"] < unpriced["tokens"]
    higher = [point for point in fit.grid if point["price"] > fit.price]  # ... and the price above it costs hits
    last = RELATIVE_PRICES[-1] / fit.median_cost
    assert all(point["hit"] < SHARE * unpriced["hit"] for point in higher) or fit.price == pytest.approx(last)
    assert fit.median_cost == pytest.approx(float(np.median(pool.costs)))
    assert fit.queries == sum(min(int((half_of(pool) == h).sum()), 150) for h in (0, 1))


def test_a_stricter_share_never_gives_a_higher_price():
    pool = clustered_pool(seed=3)
    prices = [fit_token_price(pool, at_price, capacity=1000.0, share=share).price for share in (0.7, 0.85, 0.99)]
    assert prices == sorted(prices, reverse=True) and prices[0] > prices[-1]


def test_the_price_is_read_per_token_of_the_pool():
    """The same exemplars at twice the tokens: half the price (the grid is in units of the median exemplar)."""
    short, long = clustered_pool(cost=100.0), clustered_pool(cost=200.0)
    assert fit_token_price(long, at_price, capacity=2000.0).price == pytest.approx(
        fit_token_price(short, at_price, capacity=1000.0).price / 2)


def test_the_rule_is_deterministic_and_cuts_by_document():
    pool = clustered_pool()
    assert fit_token_price(pool, at_price, 1000.0) == fit_token_price(pool, at_price, 1000.0)
    one_doc = ExemplarPool(ids=pool.ids, embeddings=pool.embeddings, costs=pool.costs, attributes=pool.attributes,
                           doc_ids=np.asarray([f"doc{i // 4}" for i in range(len(pool))]))
    halves = half_of(one_doc)
    for doc in {f"doc{i // 4}" for i in range(len(pool))}:
        assert len({int(h) for h, d in zip(halves, one_doc.doc_ids, strict=True) if d == doc}) == 1
    part = sub_pool(pool, np.flatnonzero(halves == 0))
    assert len(part) == int((halves == 0).sum()) and set(part.ids) <= set(pool.ids)


def test_a_pool_too_small_or_without_kinds_gets_the_fallback_and_says_why():
    small = clustered_pool(n=8)
    fit = fit_token_price(small, at_price, 1000.0)
    assert (fit.rule, fit.price) == ("fallback", FALLBACK_PRICE) and f"needs {MIN_HALF} each" in fit.reason
    unlabelled = ExemplarPool(ids=small.ids, embeddings=small.embeddings, costs=small.costs)
    assert fit_token_price(unlabelled, at_price, 1000.0).reason == "the pool has no kinds"
    assert "fallback" in fit.describe() and PriceFit.from_dict(fit.as_dict()) == fit


def test_case_coverage_reads_its_price_at_fit_and_keeps_it_in_its_state():
    pool = clustered_pool()
    selector = CaseCoverageSelector(max_exemplars=4, token_price="auto", knn_k=None)
    request = SelectionRequest(embedding=pool.embeddings[0], capacity=1000.0)
    with pytest.raises(NotFittedError):
        selector.select(pool, request)
    selector.fit(pool, capacity=1000.0)
    assert selector.price == selector.price_fit_.price > 0
    priced = CaseCoverageSelector(max_exemplars=4, token_price=selector.price, knn_k=None).fit(pool)
    assert selector.select(pool, request).indices == priced.select(pool, request).indices
    again = CaseCoverageSelector(max_exemplars=4, token_price="auto", knn_k=None).set_state(selector.get_state())
    assert again.price == selector.price and again.select(pool, request).indices == selector.select(pool,
                                                                                                   request).indices
    state = dict(selector.get_state())
    del state["price_fit"]
    with pytest.raises(ValueError, match="no price read from the pool"):
        CaseCoverageSelector(token_price="auto").set_state(state)
    with pytest.raises(ValueError, match="or 'auto'"):
        CaseCoverageSelector(token_price="cheap").validate_params()


def test_select_at_prices_is_select_at_each_price():
    pool = clustered_pool()
    selector = CaseCoverageSelector(max_exemplars=4, knn_k=50).fit(pool)
    request = SelectionRequest(embedding=pool.embeddings[5], capacity=400.0, exclude_ids=frozenset({"e5"}))
    prices = (0.0, 0.002, 0.01)
    together = selector.select_at_prices(pool, request, prices)
    for price, selection in zip(prices, together, strict=True):
        alone = CaseCoverageSelector(max_exemplars=4, knn_k=50, token_price=price).fit(pool).select(pool, request)
        assert selection.indices == alone.indices and selection.total_cost == alone.total_cost


# -- compile -----------------------------------------------------------------------------------------------------
TOPICS = ["revenue growth in the year", "number of employees counted", "interest rate on the loan",
          "percentage of the total assets"]


def trainset(n):
    return [dspy.Example(question=f"What is the {TOPICS[i % 4]} of company {i}?", answer=str(i),
                         kind=f"topic{i % 4}", doc_id=f"d{i}", id=f"q{i}").with_inputs("question")
            for i in range(n)]


def compile_with(train, **settings):
    dspy.configure(lm=DummyLM([{"answer": "1"}] * 50))
    tele = KnapsackFewShot(selector="case_coverage", max_exemplars=3, budget=1024, token_counter=WordCounter(),
                           embedder=HashingEmbedder(), progress=False, **settings)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return tele.compile(dspy.Predict("question -> answer"), trainset=train)


def test_a_compile_reads_the_price_reports_it_and_saves_it(tmp_path):
    program = compile_with(trainset(200), selector_params={"token_price": "auto"})
    report = program.compile_report["predictors"]["self"]
    price = report["token_price"]
    assert price["rule"] == "cross-fitted" and price["price"] > 0 and "read from the pool" in price["summary"]
    assert price["capacity"] > 0  # measured on the pool's queries: the budget less a typical prompt
    path = tmp_path / "p.json"
    program.save(str(path))
    loaded = KnapsackFewShot.load(dspy.Predict("question -> answer"), path, embedder=HashingEmbedder(),
                                  token_counter=WordCounter())
    question = {"question": "What is the interest rate on the loan of company 999?"}
    from knapsack_dspy import selection_log

    picks = []
    for prog in (program, loaded):
        with selection_log() as log:
            prog(**question)
        picks.append(log[0].info["ids"])
    assert picks[0] == picks[1]


def test_a_number_overrides_the_rule_and_a_small_pool_falls_back_in_the_report():
    fixed = compile_with(trainset(200), selector_params={"token_price": 0.01})
    assert "token_price" not in fixed.compile_report["predictors"]["self"]
    small = compile_with(trainset(8), selector_params={"token_price": "auto"})
    price = small.compile_report["predictors"]["self"]["token_price"]
    assert price["rule"] == "fallback" and price["price"] == FALLBACK_PRICE and "fallback" in price["summary"]
