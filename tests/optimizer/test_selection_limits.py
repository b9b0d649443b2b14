"""A knapsack search a limit ends never returns less than its greedy, and says so.

The limit that decides is counted work (branch-and-bound nodes, one HiGHS thread): the same instance gets the same
set at any load. When a limit (work, or the wall-clock safety net) ends a search, the better of the solver's best
and the constrained greedy is kept (``outcome``: ``"incumbent"`` / ``"greedy"``; ``limit``: ``"work"`` /
``"time"``). Bench rows say ``selection_status`` / ``selection_limit``, ``metrics.json`` counts them per run
(``limited``, ``limited_greedy``) and ``report.md`` shows the counts when a run has any."""

import numpy as np
import pytest
from helpers import WordCounter, bench_on_tatqa_slice
from hypothesis import given, settings
from hypothesis import strategies as st
from test_knapsack import instances

from knapsack_dspy.bench.suites.suite import suite_from_dict
from knapsack_dspy.selection import exact_search, knapsack
from knapsack_dspy.selection.constraints import attribute_constraint
from knapsack_dspy.selection.exemplar_pool import ExemplarPool, SelectionRequest
from knapsack_dspy.selection.knapsack import constrained_greedy, greedy_knapsack, solve_knapsack
from knapsack_dspy.selection.selectors.seer import KnapsackSelector


def hard_instance(seed=0, n=60):
    """Subset-sum-like: values nearly proportional to costs, a quarter of the total cost allowed. HiGHS does not
    prove these optimal at its root node; the greedy is below the optimum."""
    rng = np.random.default_rng(seed)
    costs = rng.integers(100, 1000, n).astype(float)
    values = costs / 1000 + rng.uniform(0, 0.01, n)
    return values, costs, float(np.floor(costs.sum() / 4)) + 0.5, 30


def objective(values, chosen):
    return float(np.sum(np.asarray(values)[list(chosen)]))


def test_a_time_limit_with_no_incumbent_returns_the_greedy_marked():
    values, costs, capacity, m = hard_instance()
    sol = solve_knapsack(values, costs, capacity, m, time_limit=1e-9)  # HiGHS stops before any solution
    greedy = greedy_knapsack(values, costs, capacity, m)
    assert sol.selected and sol.objective >= greedy.objective - 1e-12
    assert (sol.outcome, sol.limit, sol.proven_optimal) == ("greedy", "time", False)
    assert "time limit" in sol.reason and "found none" in sol.reason
    assert sum(costs[list(sol.selected)]) <= capacity and len(sol.selected) <= m


def test_a_constrained_time_limit_keeps_the_constraints_through_the_greedy():
    values, costs, capacity, m = hard_instance()
    thirds = attribute_constraint(np.arange(values.size) % 3 == 0, min_count=5, name="thirds")
    sol = solve_knapsack(values, costs, capacity, m, [thirds], time_limit=1e-9)
    assert sol.status == "optimal" and not sol.relaxed  # no constraint dropped for want of time
    assert (sol.outcome, sol.limit) == ("greedy", "time") and thirds.is_satisfied(sol.selected)


def test_a_work_limit_keeps_the_better_of_incumbent_and_greedy_the_same_every_time():
    values, costs, capacity, m = hard_instance()
    full = solve_knapsack(values, costs, capacity, m)
    assert full.outcome == "optimal" and not full.limit
    first = solve_knapsack(values, costs, capacity, m, work_limit=1)
    assert first.limit == "work" and first.outcome in ("incumbent", "greedy") and not first.proven_optimal
    assert greedy_knapsack(values, costs, capacity, m).objective - 1e-12 <= first.objective <= full.objective + 1e-9
    assert "work limit (1 nodes)" in first.reason
    # counted work, one thread: the same set again (a wall-clock limit would vary with the machine's load)
    assert all(solve_knapsack(values, costs, capacity, m, work_limit=1).selected == first.selected
               for _ in range(3))


def test_limits_are_validated():
    with pytest.raises(ValueError, match="work_limit must be a positive integer"):
        solve_knapsack([1.0], [1.0], 1, 1, work_limit=0)
    with pytest.raises(ValueError, match="time_limit must be a number of seconds > 0"):
        solve_knapsack([1.0], [1.0], 1, 1, time_limit=0)


@settings(max_examples=200, deadline=None)
@given(instances(max_n=10, max_constraints=3))
def test_the_constrained_greedy_is_feasible_and_never_beats_the_optimum(instance):
    values, costs, capacity, max_items, constraints = instance
    chosen = constrained_greedy(values, costs, capacity, max_items, constraints)
    sol = solve_knapsack(values, costs, capacity, max_items, constraints)
    if chosen is None:
        return
    assert len(chosen) <= max_items and sum(costs[i] for i in chosen) <= capacity + 1e-9
    assert all(c.is_satisfied(chosen) for c in constraints)
    assert not sol.relaxed  # the greedy is feasible, so no constraint needed dropping
    assert objective(values, chosen) <= sol.objective + 1e-6


@settings(max_examples=100, deadline=None)
@given(st.integers(0, 10_000), st.integers(1, 3))
def test_any_limit_returns_at_least_the_greedy_with_kinds_and_groups(seed, nodes):
    """Coverage values and shared costs too: whatever the limit, the objective is never below the greedy's."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(5, 40))
    values = rng.uniform(0, 0.3, n)
    costs = rng.integers(50, 400, n).astype(float)
    kinds, groups = rng.integers(-1, 6, n), rng.integers(-1, 8, n)
    kind_values, group_costs = rng.uniform(0, 1, 6), rng.integers(0, 300, 8).astype(float)
    capacity, m = float(rng.integers(200, 1500)), int(rng.integers(1, 9))
    options = dict(kinds=kinds, kind_values=kind_values, groups=groups, group_costs=group_costs)
    greedy = greedy_knapsack(values, costs, capacity, m, **options)
    limited = solve_knapsack(values, costs, capacity, m, work_limit=nodes, **options)
    timed_out = solve_knapsack(values, costs, capacity, m, time_limit=1e-9, **options)
    exact = solve_knapsack(values, costs, capacity, m, **options)
    for sol in (limited, timed_out, exact):
        assert greedy.objective - 1e-9 <= sol.objective <= exact.objective + 1e-9
    assert exact.outcome == "optimal" and exact.proven_optimal


def test_limited_selections_are_marked_counted_and_reported(tmp_path, monkeypatch):
    suite = suite_from_dict({"name": "t", "selector": ["kate", "seer"], "budget": 4000, "max_exemplars": 2,
                             "model": "openai/gpt-4o-mini", "attributes": [], "selection_only": True})

    def bench(out):
        metrics, rows, report = bench_on_tatqa_slice(suite, out, monkeypatch, WordCounter())
        return {m["spec"]["selector"]: m for m in metrics.values()}, rows, report

    metrics, rows, report = bench(tmp_path / "solved")
    assert all("selection_status" not in r and "selection_limit" not in r for r in rows) and len(rows) == 6
    assert metrics["seer"]["limited"] == metrics["kate"]["limited"] == 0
    assert "ended by a limit" not in report

    solve = knapsack._milp

    def out_of_work(*args, **kwargs):  # the same set, as HiGHS returns it when its node limit ends the search
        x, status, _ = solve(*args, **kwargs)
        return (x, "limit", "work") if status == "optimal" else (x, status, "")

    monkeypatch.setattr(knapsack, "_milp", out_of_work)
    monkeypatch.setattr(exact_search, "MAX_ITEMS", 0)  # milp decides (the exact search would prove it first)
    metrics, rows, report = bench(tmp_path / "cut")
    assert {r["spec"]["selector"]: (r.get("selection_status"), r.get("selection_limit")) for r in rows} == {
        "seer": ("incumbent", "work"), "kate": (None, None)}
    assert metrics["seer"]["limited"] == 3 and metrics["kate"]["limited"] == 0
    assert metrics["seer"]["limited_greedy"] == 0
    lines = report.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| selector"))
    header = [c.strip() for c in lines[start].strip("|").split("|")]
    table = [[c.strip() for c in line.strip("|").split("|")] for line in lines[start + 2:start + 4]]
    column = header.index("ended by a limit")
    assert {row[0]: row[column] for row in table} == {"kate": "0", "seer": "3"}


def _pool():
    rng = np.random.default_rng(0)
    vectors = rng.normal(size=(6, 8)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors, ExemplarPool([f"e{i}" for i in range(6)], vectors, np.full(6, 10.0),
                                 {"modality": np.array(["table", "text"] * 3)})


def test_a_search_a_limit_ended_is_marked_even_when_a_constraint_was_then_dropped(monkeypatch):
    """A first solve that finds nothing within its limit, with no greedy that keeps its constraint, drops the
    constraint (status "relaxed"); the selection still says a limit ended a search, and SEER's Selection and its
    row carry it."""
    solve, calls = knapsack._milp, []

    def first_finds_nothing(*args, **kwargs):
        calls.append(1)
        return (None, "limit_no_solution", "work") if len(calls) == 1 else solve(*args, **kwargs)

    monkeypatch.setattr(knapsack, "_milp", first_finds_nothing)
    monkeypatch.setattr(exact_search, "MAX_ITEMS", 0)
    monkeypatch.setattr(knapsack, "_greedy", lambda *a, **k: None if len(calls) == 0 else (0, 1))
    values, costs = np.array([0.9, 0.8, 0.7]), np.array([10.0, 10.0, 10.0])
    sol = solve_knapsack(values, costs, 25.0, 2, [attribute_constraint([True, False, False], min_count=1,
                                                                        name="first")])
    assert sol.status == "relaxed" and sol.relaxed == ("first",) and sol.limit == "work"
    assert len(sol.selected) == 2

    vectors, pool = _pool()
    calls.clear()
    selection = KnapsackSelector(max_exemplars=2, attributes=("modality",)).select(
        pool, SelectionRequest(vectors[0], capacity=25.0, target_attributes={"modality": "table"}))
    assert selection.status == "relaxed" and selection.limit == "work"
    assert selection.as_dict(pool)["limit"] == "work"


def test_an_optimal_selection_carries_no_limit():
    vectors, pool = _pool()
    solved = KnapsackSelector(max_exemplars=2, attributes=("modality",)).select(
        pool, SelectionRequest(vectors[0], capacity=25.0, target_attributes={"modality": "table"}))
    assert not solved.limit and "limit" not in solved.as_dict(pool) and "outcome" not in solved.as_dict(pool)


def test_the_search_limit_is_validated_and_costs_within_the_tolerance_are_kept():
    with pytest.raises(ValueError, match="search_limit must be a positive integer"):
        solve_knapsack([1.0], [1.0], 1, 1, search_limit=0)
    # float costs summing to capacity + 1 ulp: the set the search proved best is not cut afterwards
    v = [0.898, 0.451, 0.081, 0.342, 0.138, 0.185, 0.963, 0.792, 0.687, 0.959, 0.976]
    c = [1.17, 1.58, 4.26, 3.6, 4.17, 3.09, 3.39, 0.64, 1.76, 3.22, 4.45]
    sol = solve_knapsack(v, c, 8.54, 7, kinds=[0, 1, 1, 0, 1, -1, 0, -1, -1, 0, 0], kind_values=[1.084, 0.854])
    assert sol.objective == pytest.approx(5.729, abs=1e-3) and sorted(sol.selected) == [0, 1, 6, 7, 8]
