"""The exact search decides most selections (M <= 8): it must reach milp's proven optimum on every instance --
random ones with kinds, shared group costs and attribute constraints, against a plain milp formulation with no
pruning, no cutoff and no limit -- and brute force on small ones."""

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_knapsack import instances

from knapsack_dspy.selection import exact_search
from knapsack_dspy.selection.constraints import attribute_constraint
from knapsack_dspy.selection.knapsack import constrained_greedy, solve_knapsack
from knapsack_dspy.testing.knapsack_reference import reference_optimum


def reference(values, costs, capacity, m, constraints=(), **options):
    """milp on every item (no pruning, no cutoff, no node limit): the best objective, None when infeasible."""
    return reference_optimum(values, costs, capacity, m, constraints, **options)[0]


def random_instance(seed, constrained=False):
    """Shaped as the product's: <= 200 candidates, M <= 8, similarity-like values, token costs, a document's shared
    table cost, kind probabilities, SEER-like templates."""
    rng = np.random.default_rng(seed)
    n, m = int(rng.integers(2, 201)), int(rng.integers(1, 9))
    values = np.sort(rng.uniform(0, 0.9, n))[::-1] if rng.random() < 0.5 else 0.5 * np.exp(-rng.exponential(3, n))
    costs = np.clip(rng.lognormal(np.log(250), 0.5, n), 40, 2000).round()
    groups = rng.integers(-1, max(1, n // 5), n)
    group_costs = rng.integers(0, 400, max(1, n // 5)).astype(float)
    k = int(rng.integers(1, 12))
    kinds = rng.integers(-1, k, n)
    kind_values = rng.dirichlet(np.ones(k) * 0.5)
    capacity = float(rng.integers(300, 4000))
    constraints = []
    if constrained:
        labels = rng.choice(["table", "text", "hybrid"], n)
        constraints.append(attribute_constraint(labels == "table", min_count=int(rng.integers(0, m + 1)),
                                                name="table"))
        constraints.append(attribute_constraint(labels == "text", max_count=int(rng.integers(0, m + 1)),
                                                name="text"))
    return values, costs, capacity, m, constraints, dict(groups=groups, group_costs=group_costs, kinds=kinds,
                                                         kind_values=kind_values)


@pytest.mark.parametrize("seed", range(40))
def test_the_search_reaches_milps_proven_optimum_on_product_shaped_instances(seed):
    values, costs, capacity, m, constraints, options = random_instance(seed, constrained=seed % 2 == 1)
    sol = solve_knapsack(values, costs, capacity, m, constraints, **options)
    best = reference(values, costs, capacity, m, constraints if not sol.relaxed else (), **options)
    assert sol.outcome == "optimal" and not sol.limit
    if not sol.relaxed:
        assert sol.objective == pytest.approx(best, abs=1e-6)
        assert all(c.is_satisfied(sol.selected) for c in constraints)
    used = {int(options["groups"][i]) for i in sol.selected if options["groups"][i] >= 0}
    assert costs[list(sol.selected)].sum() + sum(options["group_costs"][g] for g in used) <= capacity + 1e-9


def _brute(values, costs, capacity, m, groups, shared, kinds, kind_values, constraints):
    best = None
    for r in range(m + 1):
        for subset in itertools.combinations(range(len(values)), r):
            paid = {groups[i] for i in subset if groups[i] >= 0}
            if sum(costs[i] for i in subset) + sum(shared[g] for g in paid) > capacity + 1e-9:
                continue
            if not all(c.is_satisfied(subset) for c in constraints):
                continue
            covered = {kinds[i] for i in subset if kinds[i] >= 0}
            value = sum(values[i] for i in subset) + sum(kind_values[k] for k in covered)
            best = value if best is None else max(best, value)
    return best


@settings(max_examples=150, deadline=None)
@given(instances(max_n=9, max_constraints=2), st.data())
def test_the_search_alone_matches_brute_force(instance, data):
    """``exact_search`` itself (no pruning before it, no floor): the best set over every constraint, or None."""
    values, costs, capacity, m, constraints = instance
    n = len(values)
    groups = np.asarray(data.draw(st.lists(st.integers(-1, 2), min_size=n, max_size=n)))
    kinds = np.asarray(data.draw(st.lists(st.integers(-1, 2), min_size=n, max_size=n)))
    shared = np.asarray(data.draw(st.lists(st.integers(0, 50), min_size=3, max_size=3)), dtype=float)
    kind_values = np.asarray(data.draw(st.lists(st.floats(0, 1), min_size=3, max_size=3)))
    found = exact_search.exact_search(np.asarray(values, float), np.asarray(costs, float), capacity, m, constraints,
                                      groups, shared, kinds, kind_values)
    best = _brute(values, costs, capacity, m, groups, shared, kinds, kind_values, constraints)
    assert found.proven
    if best is None:
        assert found.selected is None
    else:
        # a set must beat the best by more than exact_search.IMPROVEMENT (1e-9; HiGHS: 1e-6) to replace it
        assert found.selected is not None and found.objective == pytest.approx(best, abs=2 * exact_search.IMPROVEMENT)
        assert len(found.selected) <= m and all(c.is_satisfied(found.selected) for c in constraints)


def test_a_floor_nothing_beats_returns_none_and_a_node_limit_stops_early():
    for seed in range(100):  # an instance whose search considers more than one set
        values, costs, capacity, m, _, options = random_instance(seed)
        args = (values, costs, capacity, m, [], options["groups"], options["group_costs"], options["kinds"],
                options["kind_values"])
        best = exact_search.exact_search(*args)
        if best.nodes > 10:
            break
    assert best.proven and best.selected is not None
    assert exact_search.exact_search(*args, floor=best.objective).selected is None  # proven: nothing better
    stopped = exact_search.exact_search(*args, node_limit=1)
    assert not stopped.proven and stopped.nodes == 1


def test_a_search_stopped_early_hands_over_to_milp_and_is_still_optimal():
    values, costs, capacity, m, _, options = random_instance(7)
    exact = solve_knapsack(values, costs, capacity, m, **options)
    handed = solve_knapsack(values, costs, capacity, m, search_limit=1, **options)
    assert handed.objective == pytest.approx(exact.objective, abs=1e-6) and handed.outcome == "optimal"
    greedy = constrained_greedy(values, costs, capacity, m, **options)
    assert greedy is not None


def test_lower_bounds_nobody_can_meet_are_proven_infeasible_at_once():
    values, costs = np.array([0.9, 0.8, 0.7]), np.array([10.0, 10.0, 10.0])
    too_many = attribute_constraint([True, True, False], min_count=3, name="three of two")
    found = exact_search.exact_search(values, costs, 100.0, 3, [too_many], np.full(3, -1), np.zeros(0),
                                      np.full(3, -1), np.zeros(0))
    assert found.proven and found.selected is None and found.nodes == 0
    sol = solve_knapsack(values, costs, 100.0, 3, [too_many])
    assert sol.relaxed == ("three of two",) and sorted(sol.selected) == [0, 1, 2]
