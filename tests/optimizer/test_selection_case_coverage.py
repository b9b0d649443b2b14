"""Case coverage: the coverage values of the knapsack (a value paid once per kind) against brute force, its greedy,
and the ``case_coverage`` selector (learned kind probabilities, the nearest-first term, the token price, the
fallback without kinds)."""

import itertools
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from knapsack_dspy.selection.config import SelectionConfig, SelectionConfigError
from knapsack_dspy.selection.exemplar_pool import ExemplarPool, SelectionRequest
from knapsack_dspy.selection.knapsack import greedy_knapsack, solve_knapsack
from knapsack_dspy.selection.selectors.case_coverage import CaseCoverageFallback, CaseCoverageSelector, kind_labels


def objective(chosen, values, costs, kinds, kind_values, groups, group_costs):
    covered = {kinds[i] for i in chosen if kinds[i] >= 0}
    return sum(values[i] for i in chosen) + sum(kind_values[k] for k in covered)


def cost(chosen, costs, groups, group_costs):
    used = {groups[i] for i in chosen if groups[i] >= 0}
    return sum(costs[i] for i in chosen) + sum(group_costs[g] for g in used)


@st.composite
def coverage_instances(draw):
    n = draw(st.integers(1, 9))
    values = draw(st.lists(st.floats(-0.3, 0.5, allow_nan=False), min_size=n, max_size=n))
    costs = draw(st.lists(st.integers(0, 60), min_size=n, max_size=n))
    kinds = draw(st.lists(st.integers(-1, 2), min_size=n, max_size=n))
    kind_values = draw(st.lists(st.floats(0, 1, allow_nan=False), min_size=3, max_size=3))
    groups = draw(st.lists(st.integers(-1, 1), min_size=n, max_size=n))
    group_costs = draw(st.lists(st.integers(0, 40), min_size=2, max_size=2))
    return values, costs, kinds, kind_values, groups, group_costs, draw(st.integers(0, 200)), draw(st.integers(0, 5))


@settings(max_examples=150, deadline=None)
@given(coverage_instances())
def test_coverage_values_are_optimised_exactly_and_the_greedy_never_beats_them(instance):
    values, costs, kinds, kind_values, groups, group_costs, capacity, max_items = instance
    args = dict(groups=np.array(groups), group_costs=np.array(group_costs, dtype=float), kinds=np.array(kinds),
                kind_values=np.array(kind_values))
    best = max(objective(c, values, costs, kinds, kind_values, groups, group_costs)
               for r in range(min(len(values), max_items) + 1) for c in itertools.combinations(range(len(values)), r)
               if cost(c, costs, groups, group_costs) <= capacity)
    exact = solve_knapsack(values, costs, capacity, max_items, **args)
    greedy = greedy_knapsack(values, costs, capacity, max_items, **args)
    for sol in (exact, greedy):
        assert cost(sol.selected, costs, groups, group_costs) <= capacity + 1e-9 and len(sol.selected) <= max_items
        assert sol.objective == pytest.approx(objective(sol.selected, values, costs, kinds, kind_values, groups,
                                                        group_costs))
    assert exact.objective == pytest.approx(best, abs=1e-6)  # HiGHS: values within its tolerance of 0
    assert greedy.objective <= exact.objective + 1e-6  # the same HiGHS tolerance


def test_a_kind_is_worth_its_value_once_and_the_greedy_can_be_beaten():
    # kind 0 (value 1) has one costly exemplar; kinds 1 and 2 (0.6 each) have cheap ones: the greedy takes kind 0
    # first and has no room left; the knapsack covers kinds 1 and 2 (1.2 > 1.0)
    values, costs = np.zeros(3), np.array([100.0, 50.0, 50.0])
    args = dict(kinds=np.array([0, 1, 2]), kind_values=np.array([1.0, 0.6, 0.6]))
    assert solve_knapsack(values, costs, 100, 3, **args).selected == (1, 2)
    assert greedy_knapsack(values, costs, 100, 3, **args).selected == (0,)
    # a second exemplar of a covered kind adds only its own value
    twice = solve_knapsack(np.array([0.1, 0.1]), np.array([10.0, 10.0]), 100, 2, kinds=np.array([0, 0]),
                           kind_values=np.array([1.0]))
    assert twice.selected == (0, 1) and twice.objective == pytest.approx(1.2)
    with pytest.raises(ValueError, match="kind_values must be finite and non-negative"):
        solve_knapsack([0.1], [1], 10, 1, kinds=[0], kind_values=[-1.0])
    with pytest.raises(ValueError, match="kinds hold ids outside"):
        solve_knapsack([0.1], [1], 10, 1, kinds=[3], kind_values=[1.0])


def make_pool(templates, doc_ids=None, costs=None, dim=16, seed=0):
    """Exemplars whose embeddings cluster by template (so a classifier can learn it)."""
    rng = np.random.default_rng(seed)
    centres = {t: rng.normal(size=dim) for t in sorted(set(templates))}
    emb = np.stack([centres[t] + 0.3 * rng.normal(size=dim) for t in templates]).astype(np.float32)
    emb /= np.linalg.norm(emb, axis=1, keepdims=True)
    n = len(templates)
    return ExemplarPool(ids=[f"p{i}" for i in range(n)], embeddings=emb,
                        costs=np.full(n, 100.0) if costs is None else np.asarray(costs, dtype=float),
                        attributes={"kind": np.array([t or "answer_type:span" for t in templates]),
                                    "answer_type": np.array(["arithmetic" if t else "span" for t in templates])},
                        doc_ids=[f"d{i}" for i in range(n)] if doc_ids is None else doc_ids), centres


def request_near(pool_centres, template, capacity=1000.0, dim=16):
    embedding = pool_centres[template] / np.linalg.norm(pool_centres[template])
    return SelectionRequest(embedding=embedding.astype(np.float32), capacity=capacity)


def test_the_selector_covers_the_likely_kinds_before_repeating_one():
    templates = ["add"] * 12 + ["divide"] * 12 + ["subtract"] * 12
    pool, centres = make_pool(templates)
    selector = CaseCoverageSelector(max_exemplars=3, similarity_weight=0.05).fit(pool)
    probabilities = selector.kind_probabilities(request_near(centres, "divide").embedding)
    assert max(probabilities, key=probabilities.get) == "divide" and probabilities["divide"] > 0.9
    # a query between two kinds: one exemplar of each, not the nearest kind twice
    between = centres["divide"] / np.linalg.norm(centres["divide"]) + centres["subtract"] / np.linalg.norm(
        centres["subtract"])
    query = SelectionRequest(embedding=(between / np.linalg.norm(between)).astype(np.float32), capacity=250.0)
    chosen = selector.select(pool, query)
    assert sorted(templates[i] for i in chosen.indices) == ["divide", "subtract"]
    again = CaseCoverageSelector(max_exemplars=3, similarity_weight=0.05).set_state(selector.get_state())
    assert again.select(pool, query).indices == chosen.indices


def pool_at(similarities, costs, dim=8):
    """One kind; exemplar i at cosine ``similarities[i]`` from the query (the first axis)."""
    rng = np.random.default_rng(1)
    query = np.zeros(dim)
    query[0] = 1.0
    rows = []
    for s in similarities:
        u = rng.normal(size=dim)
        u[0] = 0.0
        u /= np.linalg.norm(u)
        rows.append(s * query + np.sqrt(1 - s * s) * u)
    n = len(similarities)
    pool = ExemplarPool(ids=[f"p{i}" for i in range(n)], embeddings=np.array(rows), costs=np.asarray(costs, float),
                        attributes={"kind": np.array(["a"] * n)}, doc_ids=[f"d{i}" for i in range(n)])
    return pool, query.astype(np.float32)


def test_the_nearest_term_makes_one_close_exemplar_worth_more_than_several_far_ones():
    pool, query = pool_at([0.9, 0.8, 0.8, 0.8, 0.8], [300, 100, 100, 100, 100])
    selector = CaseCoverageSelector(max_exemplars=4, similarity_weight=1.0, temperature=0.05).fit(pool)
    assert selector.select(pool, SelectionRequest(embedding=query, capacity=300.0)).indices == (0,)
    # SEER's sum of similarities takes the three cheaper ones instead
    seer = SelectionConfig(selector="seer", max_exemplars=4, attributes=()).build_selector()
    assert len(seer.select(pool, SelectionRequest(embedding=query, capacity=300.0)).indices) == 3


def test_a_token_price_drops_exemplars_worth_less_than_their_tokens():
    pool, query = pool_at([0.9, 0.85, 0.8, 0.75], [100, 100, 100, 100])
    request = SelectionRequest(embedding=query, capacity=1000.0)
    free = CaseCoverageSelector(max_exemplars=4).fit(pool).select(pool, request)
    # the price of 100 tokens (0.2) exceeds the similarity term of all but the nearest two (0.5, 0.18, 0.07, 0.02)
    priced = CaseCoverageSelector(max_exemplars=4, token_price=0.0015).fit(pool).select(pool, request)
    assert len(free.indices) == 4 and sorted(priced.indices) == [0, 1]


def test_greedy_is_a_parameter_of_the_one_selector():
    config = SelectionConfig(selector="case_coverage", selector_params={"solver": "greedy"})
    assert isinstance(config.build_selector(), CaseCoverageSelector) and config.build_selector().solver == "greedy"
    with pytest.raises(SelectionConfigError, match="solver must be one of"):
        SelectionConfig(selector="case_coverage", selector_params={"solver": "beam"})
    with pytest.raises(SelectionConfigError, match="token_price must be a number >= 0"):
        SelectionConfig(selector="case_coverage", selector_params={"token_price": -1})


def test_without_kinds_it_falls_back_to_the_nearest_first_and_says_so():
    pool, centres = make_pool(["a"] * 12)
    pool.attributes = {}  # no program templates, no answer types: an arbitrary DSPy program's pool
    assert set(kind_labels(pool)) == {""}
    with pytest.warns(CaseCoverageFallback, match="selecting by similarity alone"):
        selector = CaseCoverageSelector(max_exemplars=2).fit(pool)
    assert selector.get_state()["fallback"] is True
    query = request_near(centres, "a")
    chosen = selector.select(pool, query)
    nearest = tuple(int(i) for i in np.argsort(-pool.similarities(query.embedding))[:2])
    assert set(chosen.indices) == set(nearest)
    with warnings.catch_warnings():
        warnings.simplefilter("error", CaseCoverageFallback)
        CaseCoverageSelector(max_exemplars=2).fit(make_pool(["a", "b"] * 5)[0])  # kinds: no warning


def test_the_priced_selector_is_case_coverage_at_the_default_price_and_the_package_default():
    from knapsack_dspy.selection.selectors.priced_case_coverage import DEFAULT_TOKEN_PRICE

    templates = ["add"] * 8 + ["divide"] * 8 + ["subtract"] * 8
    pool, centres = make_pool(templates, costs=[60 + 25 * (i % 7) for i in range(len(templates))])
    priced = SelectionConfig(max_exemplars=4, attributes=())  # the default selector
    named = SelectionConfig(selector="case_coverage", max_exemplars=4, attributes=(),
                            selector_params={"token_price": DEFAULT_TOKEN_PRICE})
    free = SelectionConfig(selector="case_coverage", max_exemplars=4, attributes=())
    assert priced.selector == "priced_case_coverage" and priced.build_selector().token_price == DEFAULT_TOKEN_PRICE
    selectors = [config.build_selector().fit(pool) for config in (priced, named, free)]
    differs = 0
    for template in ("add", "divide", "subtract"):
        for capacity in (150.0, 400.0, 1000.0):
            request = request_near(centres, template, capacity=capacity)
            chosen = [selector.select(pool, request).indices for selector in selectors]
            assert chosen[0] == chosen[1]  # the same value, the same exact knapsack
            differs += chosen[0] != chosen[2]
            assert sum(pool.costs[list(chosen[0])]) <= sum(pool.costs[list(chosen[2])])  # never more tokens
    assert differs  # the price changes some selections: the test can tell the two apart
    # its parameters are case coverage's, the price among them
    lower = SelectionConfig(selector_params={"token_price": 0.001}).build_selector()
    assert lower.token_price == 0.001
    with pytest.raises(SelectionConfigError, match="token_price must be a number >= 0"):
        SelectionConfig(selector="priced_case_coverage", selector_params={"token_price": -0.5})
