"""The knapsack with covers (an item covering several elements, each element's value once) and cost limits (a budget
over part of the items), as the joint choice of demos and evidence pieces poses it: exact against brute force, the
greedy never above the exact, dominance pruning still exact, and the old problems unchanged."""

import itertools

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from knapsack_dspy.selection.knapsack import (
    AttributeConstraint,
    CostLimit,
    constrained_greedy,
    greedy_knapsack,
    solve_knapsack,
)


def _objective(subset, values, kinds, kind_values, covers, cover_values):
    total = sum(values[i] for i in subset)
    total += sum(kind_values[k] for k in {kinds[i] for i in subset if kinds[i] >= 0})
    total += sum(v for items, v in zip(covers, cover_values, strict=True) if set(items) & set(subset))
    return total


def _cost(subset, costs, groups, group_costs):
    return sum(costs[i] for i in subset) + sum(group_costs[g] for g in {groups[i] for i in subset if groups[i] >= 0})


def brute_force(case, constraints):
    """Best objective over all feasible subsets (None: none is feasible)."""
    n = len(case["values"])
    best = None
    for r in range(min(n, case["max_items"]) + 1):
        for subset in itertools.combinations(range(n), r):
            if _cost(subset, case["costs"], case["groups"], case["group_costs"]) > case["capacity"] + 1e-9:
                continue
            if any(_cost([i for i in subset if limit.members[i]], case["costs"], case["groups"],
                         case["group_costs"]) > limit.capacity + 1e-9 for limit in case["limits"]):
                continue
            if not all(c.is_satisfied(subset) for c in constraints):
                continue
            value = _objective(subset, case["values"], case["kinds"], case["kind_values"], case["covers"],
                               case["cover_values"])
            if best is None or value > best + 1e-12:
                best = value
    return best


@st.composite
def joint_instances(draw, max_demos=6, max_pieces=6):
    """Demos (kinds, document groups) beside pieces (covering terms, fixed-part groups): at most M demos, at least
    one piece, a cost limit on the demos and another on the pieces."""
    demos = draw(st.integers(0, max_demos))
    pieces = draw(st.integers(1, max_pieces))
    n = demos + pieces
    values = draw(st.lists(st.floats(-0.3, 1.0, allow_nan=False), min_size=n, max_size=n))
    costs = draw(st.lists(st.integers(0, 40), min_size=n, max_size=n))
    kind_count = draw(st.integers(0, 3))
    kinds = [draw(st.integers(-1, kind_count - 1)) if kind_count else -1 for _ in range(demos)] + [-1] * pieces
    kind_values = draw(st.lists(st.floats(0, 1), min_size=kind_count, max_size=kind_count))
    # groups: documents among the demos, fixed parts among the pieces (never mixed: a cost limit holds each whole)
    doc_count, part_count = draw(st.integers(0, 2)), draw(st.integers(0, 2))
    parts = [draw(st.integers(-1, part_count - 1)) if part_count else -1 for _ in range(pieces)]
    groups = ([draw(st.integers(-1, doc_count - 1)) if doc_count else -1 for _ in range(demos)]
              + [part + doc_count if part >= 0 else -1 for part in parts])
    group_costs = draw(st.lists(st.integers(0, 30), min_size=doc_count + part_count,
                                max_size=doc_count + part_count))
    terms = draw(st.integers(0, 4))
    covers = [sorted(draw(st.sets(st.integers(demos, n - 1), max_size=pieces))) for _ in range(terms)]
    cover_values = draw(st.lists(st.floats(0, 0.6), min_size=terms, max_size=terms))
    is_demo = np.arange(n) < demos
    limits = []
    if draw(st.booleans()):
        limits.append(CostLimit(is_demo, draw(st.integers(0, 120)), name="demos"))
    if draw(st.booleans()):
        limits.append(CostLimit(~is_demo, draw(st.integers(0, 120)), name="evidence"))
    constraints = [AttributeConstraint(is_demo, max_count=draw(st.integers(0, 3)), name="demos at most M"),
                   AttributeConstraint(~is_demo, min_count=1, name="at least one piece")]
    return {"values": values, "costs": costs, "capacity": draw(st.integers(0, 200)), "max_items": n,
            "groups": groups, "group_costs": group_costs, "kinds": kinds, "kind_values": kind_values,
            "covers": covers, "cover_values": cover_values, "limits": limits}, constraints


def _solve(case, constraints, solver=solve_knapsack):
    return solver(case["values"], case["costs"], case["capacity"], case["max_items"], constraints=constraints,
                  groups=np.asarray(case["groups"]), group_costs=case["group_costs"],
                  kinds=np.asarray(case["kinds"]), kind_values=case["kind_values"], covers=case["covers"],
                  cover_values=case["cover_values"], cost_limits=case["limits"])


def _feasible(case, selected, constraints):
    cost = _cost(selected, case["costs"], case["groups"], case["group_costs"])
    return (cost <= case["capacity"] + 1e-9 and len(selected) <= case["max_items"]
            and all(c.is_satisfied(selected) for c in constraints)
            and all(_cost([i for i in selected if limit.members[i]], case["costs"], case["groups"],
                          case["group_costs"]) <= limit.capacity + 1e-9 for limit in case["limits"]))


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(joint_instances())
def test_the_joint_exact_solver_matches_brute_force_and_its_greedy_never_beats_it(instance):
    case, constraints = instance
    solution = _solve(case, constraints)
    kept = constraints[: len(constraints) - len(solution.relaxed)]
    best = brute_force(case, kept)
    assert best is not None  # the relaxation ends at a feasible problem
    if solution.relaxed:  # nothing more could have been kept
        assert brute_force(case, constraints[: len(kept) + 1]) is None
    assert _feasible(case, solution.selected, kept)
    assert solution.objective == pytest.approx(best, abs=1e-6)
    assert solution.objective == pytest.approx(_objective(solution.selected, case["values"], case["kinds"],
                                                          case["kind_values"], case["covers"],
                                                          case["cover_values"]), abs=1e-9)
    greedy = _solve(case, constraints, solver=greedy_knapsack)
    greedy_kept = constraints[: len(constraints) - len(greedy.relaxed)]
    assert _feasible(case, greedy.selected, greedy_kept)
    if greedy.relaxed == solution.relaxed:
        assert greedy.objective <= solution.objective + 1e-6


def test_an_element_is_worth_its_value_once_however_many_items_cover_it():
    # items 0 and 1 both cover element 0 (worth 1.0); item 2 covers element 1 (worth 0.6); room for two items:
    # the pair covering both elements, not the two most valuable items
    values = [0.12, 0.15, 0.1]
    solution = solve_knapsack(values, [10, 10, 10], 20, 3, covers=[[0, 1], [2]], cover_values=[1.0, 0.6])
    assert set(solution.selected) == {1, 2} and solution.objective == pytest.approx(0.25 + 1.0 + 0.6)
    greedy = greedy_knapsack(values, [10, 10, 10], 20, 3, covers=[[0, 1], [2]], cover_values=[1.0, 0.6])
    assert set(greedy.selected) == {1, 2}
    alone = solve_knapsack(values, [10, 10, 10], 20, 3)
    assert set(alone.selected) == {0, 1}  # without covers: the two most valuable


def test_covers_as_a_matrix_and_as_lists_are_the_same_problem():
    rng = np.random.default_rng(3)
    values, costs = rng.uniform(-0.1, 1, 12), rng.integers(1, 30, 12).astype(float)
    matrix = rng.random((12, 5)) < 0.3
    lists = [np.flatnonzero(matrix[:, e]).tolist() for e in range(5)]
    weights = rng.uniform(0, 1, 5)
    a = solve_knapsack(values, costs, 60, 12, covers=matrix, cover_values=weights)
    b = solve_knapsack(values, costs, 60, 12, covers=lists, cover_values=weights)
    assert a.selected == b.selected and a.objective == pytest.approx(b.objective)


def test_a_cost_limit_binds_its_members_only():
    demos = np.array([True, True, False, False])
    solution = solve_knapsack([1.0, 0.9, 0.5, 0.4], [10, 10, 10, 10], 40, 4,
                              cost_limits=[CostLimit(demos, 10, name="demos")])
    assert sorted(solution.selected) == [0, 2, 3]


def test_a_group_straddling_a_cost_limit_is_rejected():
    with pytest.raises(ValueError, match="inside and outside"):
        solve_knapsack([1, 1], [1, 1], 10, 2, groups=np.array([0, 0]), group_costs=[3],
                       cost_limits=[CostLimit([True, False], 5)])
    with pytest.raises(ValueError, match="cover_values given without covers"):
        solve_knapsack([1], [1], 10, 1, cover_values=[1.0])
    with pytest.raises(ValueError, match="covers lists 2 elements"):
        solve_knapsack([1], [1], 10, 1, covers=[[0], [0]], cover_values=[1.0])
    with pytest.raises(ValueError, match=r"covers\[0\] names items outside"):
        solve_knapsack([1], [1], 10, 1, covers=[[3]], cover_values=[1.0])


def test_the_greedy_with_constraints_relaxes_them_last_given_first():
    impossible = AttributeConstraint([False, False], min_count=1, name="impossible")
    solution = greedy_knapsack([1.0, 0.5], [5, 5], 10, 2, constraints=[impossible])
    assert solution.relaxed == ("impossible",) and solution.status == "relaxed" and solution.selected == (0, 1)
    assert constrained_greedy([1.0, 0.5], [5, 5], 10, 2, [impossible]) is None


def test_dominated_demos_are_pruned_to_m_per_profile_when_the_evidence_makes_max_items_large():
    """Demos capped at M = 2 by a constraint among 40 pieces: the pruning keeps at most what can matter."""
    rng = np.random.default_rng(0)
    demos, pieces = 150, 40
    n = demos + pieces
    values, costs = rng.uniform(0, 1, n), rng.integers(5, 60, n).astype(float)
    is_demo = np.arange(n) < demos
    constraints = [AttributeConstraint(is_demo, max_count=2, name="M"),
                   AttributeConstraint(~is_demo, min_count=1, name="a piece")]
    covers = [np.flatnonzero(~is_demo & (rng.random(n) < 0.2)).tolist() for _ in range(6)]
    solution = solve_knapsack(values, costs, 400, n, constraints, covers=covers, cover_values=np.full(6, 0.2),
                              cost_limits=[CostLimit(is_demo, 400)])
    assert solution.status == "optimal" and solution.candidates < demos
    assert sum(is_demo[list(solution.selected)]) <= 2 and sum(~is_demo[list(solution.selected)]) >= 1
