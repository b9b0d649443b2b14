"""The knapsack core against brute force, plus its contract on bad and infeasible input."""

import itertools

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from knapsack_dspy.selection.knapsack import AttributeConstraint, prune_dominated, solve_knapsack


def brute_force(values, costs, capacity, max_items, constraints):
    """Best objective over all feasible subsets (None if no subset is feasible)."""
    n = len(values)
    best = None
    for r in range(min(n, max_items) + 1):
        for subset in itertools.combinations(range(n), r):
            if sum(costs[i] for i in subset) > capacity + 1e-9:
                continue
            if not all(c.is_satisfied(subset) for c in constraints):
                continue
            obj = sum(values[i] for i in subset)
            if best is None or obj > best + 1e-12:
                best = obj
    return best


@st.composite
def instances(draw, max_n=14, max_constraints=3):
    n = draw(st.integers(1, max_n))
    values = draw(st.lists(st.floats(-0.2, 1.0, allow_nan=False), min_size=n, max_size=n))
    # integer token costs, with repeats so dominance ties are exercised
    costs = draw(st.lists(st.integers(0, 60), min_size=n, max_size=n))
    capacity = draw(st.integers(0, 200))
    max_items = draw(st.integers(0, 6))
    constraints = []
    for k in range(draw(st.integers(0, max_constraints))):
        members = draw(st.lists(st.booleans(), min_size=n, max_size=n))
        kind = draw(st.sampled_from(["min", "max", "both", "min_fraction", "max_fraction"]))
        lo = draw(st.integers(0, 4))
        hi = draw(st.integers(0, 4))
        frac = draw(st.sampled_from([0.25, 0.5, 0.75, 1.0]))
        if kind == "min":
            con = AttributeConstraint(members, min_count=lo, name=f"c{k}")
        elif kind == "max":
            con = AttributeConstraint(members, max_count=hi, name=f"c{k}")
        elif kind == "both":
            con = AttributeConstraint(members, min_count=lo, max_count=hi, name=f"c{k}")
        elif kind == "min_fraction":
            con = AttributeConstraint(members, min_fraction=frac, name=f"c{k}")
        else:
            con = AttributeConstraint(members, max_fraction=frac, name=f"c{k}")
        constraints.append(con)
    return values, costs, capacity, max_items, constraints


def expected_after_relaxation(values, costs, capacity, max_items, constraints):
    """Apply the documented relaxation order (last given first) to brute force."""
    active = list(constraints)
    dropped = []
    while True:
        best = brute_force(values, costs, capacity, max_items, active)
        if best is not None:
            return best, tuple(dropped)
        dropped.append(active.pop().name)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(instances())
def test_matches_brute_force(instance):
    values, costs, capacity, max_items, constraints = instance
    sol = solve_knapsack(values, costs, capacity, max_items, constraints=constraints)
    best, dropped = expected_after_relaxation(values, costs, capacity, max_items, constraints)
    # limits are never exceeded
    assert len(sol.selected) <= max_items
    assert sum(costs[i] for i in sol.selected) <= capacity
    assert len(set(sol.selected)) == len(sol.selected)
    # same optimum as brute force, after the same relaxation
    # HiGHS stops at an absolute gap of 1e-6 (its mip_abs_gap), plus rounding in the sums
    assert sol.objective == pytest.approx(best, abs=1e-6 + 1e-12)
    assert sol.objective == pytest.approx(sum(values[i] for i in sol.selected), abs=1e-12)
    if sol.selected or not dropped:
        assert sol.relaxed == dropped
    kept = constraints[: len(constraints) - len(sol.relaxed)]
    assert all(c.is_satisfied(sol.selected) for c in kept)
    assert sol.status == ("relaxed" if sol.relaxed else "optimal")
    # highest value first
    vals = [values[i] for i in sol.selected]
    assert vals == sorted(vals, reverse=True)


@settings(max_examples=200, deadline=None)
@given(instances(max_n=12, max_constraints=2))
def test_pruning_keeps_an_optimal_solution(instance):
    values, costs, capacity, max_items, constraints = instance
    v, c = np.asarray(values), np.asarray(costs, dtype=float)
    profiles = (np.column_stack([con.members for con in constraints]) if constraints
                else np.zeros((len(v), 0), dtype=bool))
    keep = prune_dominated(v, c, profiles, max_items, capacity)
    full = brute_force(values, costs, capacity, max_items, constraints)
    sub_constraints = [AttributeConstraint(con.members[keep], con.min_count, con.max_count, con.name,
                                           con.min_fraction, con.max_fraction) for con in constraints]
    reduced = brute_force(v[keep].tolist(), c[keep].tolist(), capacity, max_items, sub_constraints)
    if full is None:
        assert reduced is None
    else:
        assert reduced == pytest.approx(full, abs=1e-9)


def test_simple_known_answer():
    # capacity 10: {0, 2} (value 9, cost 10) beats {1} (value 8, cost 9) and {0} alone.
    sol = solve_knapsack([5, 8, 4], [6, 9, 4], capacity=10, max_items=3)
    assert sol.selected == (0, 2)
    assert sol.objective == 9
    assert sol.status == "optimal"
    assert sol.relaxed == ()


def test_max_items_binds():
    sol = solve_knapsack([1, 2, 3, 4], [1, 1, 1, 1], capacity=100, max_items=2)
    assert sol.selected == (3, 2)


def test_min_count_constraint_changes_choice():
    members = [True, False, False, True]
    sol = solve_knapsack([1, 5, 4, 0.5], [1, 1, 1, 1], capacity=10, max_items=2,
                         constraints=[AttributeConstraint(members, min_count=2, name="table")])
    assert set(sol.selected) == {0, 3}


def test_infeasible_constraints_dropped_last_first():
    members_a = [True, True, False, False]
    members_b = [False, False, False, False]  # min_count 1 is impossible
    cons = [AttributeConstraint(members_a, min_count=1, name="a"),
            AttributeConstraint(members_b, min_count=1, name="impossible")]
    sol = solve_knapsack([1, 2, 3, 4], [1, 1, 1, 1], capacity=10, max_items=2, constraints=cons)
    assert sol.status == "relaxed"
    assert sol.relaxed == ("impossible",)
    assert "impossible" in sol.reason
    assert set(sol.selected) == {3, 1}  # "a" still holds


def test_every_item_too_costly_gives_empty_with_reason():
    sol = solve_knapsack([1, 2], [50, 60], capacity=10, max_items=3)
    assert sol.selected == ()
    assert sol.objective == 0
    assert "costs more than the capacity" in sol.reason


def test_negative_capacity_selects_nothing():
    sol = solve_knapsack([1, 2], [1, 1], capacity=-5, max_items=3)
    assert sol.selected == ()
    assert "exceeds the budget" in sol.reason


@pytest.mark.parametrize("values,costs,capacity,max_items,message", [
    ([1, float("nan")], [1, 1], 5, 2, "values must be finite"),
    ([1, float("inf")], [1, 1], 5, 2, "values must be finite"),
    ([1, 2], [1, -1], 5, 2, "non-negative"),
    ([1, 2], [1, float("nan")], 5, 2, "costs must be finite"),
    ([1, 2], [1], 5, 2, "differ in length"),
    ([1, 2], [1, 1], float("nan"), 2, "capacity"),
    ([1, 2], [1, 1], 5, -1, "max_items"),
    ([1, 2], [1, 1], 5, 1.5, "max_items"),
])
def test_bad_input_raises_value_error(values, costs, capacity, max_items, message):
    with pytest.raises(ValueError, match=message):
        solve_knapsack(values, costs, capacity, max_items)


def test_bad_constraint_raises():
    with pytest.raises(ValueError, match="members has 3 entries"):
        solve_knapsack([1, 2], [1, 1], 5, 2, constraints=[AttributeConstraint([1, 0, 1], min_count=1)])
    with pytest.raises(ValueError, match="0/1"):
        AttributeConstraint([0, 2, 1])
    with pytest.raises(ValueError, match="fraction"):
        AttributeConstraint([0, 1], min_fraction=1.5)


def test_larger_instance_is_optimal_and_fast_enough_to_be_useful():
    rng = np.random.default_rng(7)
    n = 200
    values = rng.uniform(0.2, 0.9, n)
    costs = rng.integers(150, 900, n)
    modality = rng.integers(0, 3, n)
    cons = [AttributeConstraint(modality == 0, min_count=6, name="same"),
            AttributeConstraint(modality != 0, min_count=1, name="other")]
    sol = solve_knapsack(values, costs, 4000, 8, constraints=cons)
    assert sol.status == "optimal"
    assert sol.candidates < n  # pruning did something
    assert costs[list(sol.selected)].sum() <= 4000
    assert (modality[list(sol.selected)] == 0).sum() >= 6


# -- shared group costs ("no table shown twice": demos of one document pay its table once) -------------------
def _brute_force_groups(values, costs, capacity, max_items, groups, shared, constraints=()):
    import itertools

    best, best_set = 0.0, ()
    n = len(values)
    for k in range(0, max_items + 1):
        for subset in itertools.combinations(range(n), k):
            used = {groups[i] for i in subset if groups[i] >= 0}
            cost = sum(costs[i] for i in subset) + sum(shared[g] for g in used)
            if cost > capacity + 1e-9 or not all(c.is_satisfied(subset) for c in constraints):
                continue
            value = sum(values[i] for i in subset)
            if value > best + 1e-9:
                best, best_set = value, subset
    return best, best_set


def test_a_shared_cost_is_paid_once_per_group():
    # two items of group 0 share a 500-token table: together 100 + 100 + 500 = 700, they beat item 2 (600)
    sol = solve_knapsack([0.9, 0.8, 1.0], [100, 100, 600], 700, 3, groups=[0, 0, -1], group_costs=[500])
    assert sorted(sol.selected) == [0, 1] and sol.objective == pytest.approx(1.7)
    # counted per item (no groups), the same pair would cost 1,200 and not fit
    assert sorted(solve_knapsack([0.9, 0.8, 1.0], [600, 600, 600], 700, 3).selected) == [2]


@settings(max_examples=60, deadline=None)
@given(st.integers(min_value=2, max_value=9).flatmap(lambda n: st.tuples(
    st.lists(st.floats(0, 1), min_size=n, max_size=n),
    st.lists(st.integers(0, 400), min_size=n, max_size=n),
    st.lists(st.integers(-1, 2), min_size=n, max_size=n),
    st.lists(st.integers(0, 600), min_size=3, max_size=3),
    st.integers(0, 1500), st.integers(0, 4))))
def test_shared_costs_match_brute_force(case):
    values, costs, groups, shared, capacity, max_items = case
    sol = solve_knapsack(values, costs, capacity, max_items, groups=groups, group_costs=shared)
    best, _ = _brute_force_groups(values, costs, capacity, max_items, groups, shared)
    assert sol.objective == pytest.approx(best, abs=1e-6)
    used = {groups[i] for i in sol.selected if groups[i] >= 0}
    assert sum(costs[i] for i in sol.selected) + sum(shared[g] for g in used) <= capacity + 1e-9
    assert len(sol.selected) <= max_items


def test_bad_groups_are_rejected():
    with pytest.raises(ValueError, match="groups hold ids outside"):
        solve_knapsack([1.0], [1.0], 10, 1, groups=[3], group_costs=[1.0])
    with pytest.raises(ValueError, match="group_costs given without groups"):
        solve_knapsack([1.0], [1.0], 10, 1, group_costs=[1.0])
    with pytest.raises(ValueError, match="non-negative"):
        solve_knapsack([1.0], [1.0], 10, 1, groups=[0], group_costs=[-1.0])


def test_scipy_option_warnings_stay_silenced_after_a_callers_catch_warnings_block():
    """The first solve inside a caller's ``warnings.catch_warnings()`` block: the filter silencing scipy's
    "Unrecognized options detected" for HiGHS's known options must survive the block (a fresh interpreter: the
    options are probed once per process)."""
    import subprocess
    import sys

    code = """
import warnings
import numpy as np
from knapsack_dspy.selection.knapsack import solve_knapsack
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    solve_knapsack(np.linspace(0.1, 1, 20), np.linspace(1, 10, 20), 30, 9)
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("default")
    solve_knapsack(np.linspace(0.1, 1, 20), np.linspace(1, 10, 20), 30, 9)
print(sum("Unrecognized options" in str(w.message) for w in caught))
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert done.stdout.strip() == "0", done.stdout + done.stderr
