"""``solve_knapsack`` against the reference optimum (``knapsack_dspy.testing.knapsack_reference``: ``milp`` on the
plain formulation, no pruning, no cutoff, no node limit) with everything at once: attribute constraints, shared group
costs, kind values, M on both sides of the exact search's ``MAX_ITEMS`` (exact search and ``milp``), and constraints
nothing can meet (dropped last given first)."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_knapsack import instances

from knapsack_dspy.selection import exact_search
from knapsack_dspy.selection.knapsack import solve_knapsack
from knapsack_dspy.testing.knapsack_reference import reference_optimum


@st.composite
def full_instances(draw):
    values, costs, capacity, _, constraints = draw(instances(max_n=12, max_constraints=3))
    n = len(values)
    max_items = draw(st.integers(0, exact_search.MAX_ITEMS + 4))
    options = {}
    if draw(st.booleans()):
        options["groups"] = np.asarray(draw(st.lists(st.integers(-1, 2), min_size=n, max_size=n)))
        options["group_costs"] = np.asarray(draw(st.lists(st.integers(0, 50), min_size=3, max_size=3)), float)
    if draw(st.booleans()):
        options["kinds"] = np.asarray(draw(st.lists(st.integers(-1, 2), min_size=n, max_size=n)))
        options["kind_values"] = np.asarray(draw(st.lists(st.floats(0, 1), min_size=3, max_size=3)))
    return values, costs, capacity, max_items, constraints, options


def cost_of(selected, costs, options) -> float:
    groups, shared = options.get("groups"), options.get("group_costs")
    used = {int(groups[i]) for i in selected if groups[i] >= 0} if groups is not None else set()
    return float(sum(costs[i] for i in selected)) + float(sum(shared[g] for g in used))


def marginal_values(values, options) -> np.ndarray:
    """Each item's value as the first of its kind (the order ``selected`` is given in)."""
    values = np.asarray(values, float)
    kinds, kind_values = options.get("kinds"), options.get("kind_values")
    if kinds is None:
        return values
    return values + np.where(kinds >= 0, kind_values[np.maximum(kinds, 0)], 0.0)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(full_instances())
def test_the_solution_is_the_reference_optimum_after_the_documented_relaxation(instance):
    values, costs, capacity, max_items, constraints, options = instance
    sol = solve_knapsack(values, costs, capacity, max_items, constraints, **options)
    # the constraints kept are the longest prefix the reference can satisfy (the last given dropped first)
    kept = len(constraints)
    while reference_optimum(values, costs, capacity, max_items, constraints[:kept], **options)[0] is None:
        kept -= 1
    assert sol.relaxed == tuple(c.name for c in reversed(constraints[kept:]))
    assert sol.status == ("relaxed" if sol.relaxed else "optimal")
    best, proven = reference_optimum(values, costs, capacity, max_items, constraints[:kept], **options)
    assert proven
    assert sol.objective == pytest.approx(best, abs=1e-6)  # HiGHS's absolute gap
    assert (sol.outcome, sol.limit, sol.proven_optimal) == ("optimal", "", True)
    # a selection within every limit and every kept constraint, highest marginal value first
    selected = list(sol.selected)
    assert len(set(selected)) == len(selected) <= max_items
    assert cost_of(selected, costs, options) <= capacity + 1e-9
    assert all(c.is_satisfied(selected) for c in constraints[:kept])
    marginal = marginal_values(values, options)
    assert [marginal[i] for i in selected] == sorted((marginal[i] for i in selected), reverse=True)


@pytest.mark.parametrize("max_items", [exact_search.MAX_ITEMS, exact_search.MAX_ITEMS + 1, 30])
@pytest.mark.parametrize("options", [{}, {"kinds": [0, -1, 0], "kind_values": [0.1]}])
def test_candidates_all_worth_nothing_give_the_empty_selection_whatever_m(max_items, options):
    """Nothing of positive worth fits: pruning against the (empty) greedy leaves no candidate. ``milp`` (M above the
    exact search's) used to be handed zero variables and raise; the empty greedy is optimal whatever M."""
    sol = solve_knapsack([-0.5, -0.2, -0.3], [1.0, 1.0, 2.0], 10.0, max_items, **options)
    assert (sol.selected, sol.objective, sol.status, sol.outcome, sol.candidates) == ((), 0.0, "optimal", "optimal", 0)
    assert sol.reason.startswith("empty selection: every candidate's value is <= 0")
