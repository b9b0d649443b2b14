"""A knapsack whose time limit ended its search is marked: its set is the best found by then, perhaps not the best,
and on a loaded machine it varies from run to run. Bench rows say ``selection_status``, ``metrics.json`` counts
them per run (``time_limited``) and ``report.md`` shows the count when a run has any."""

from helpers import WordCounter, bench_on_tatqa_slice

from knapsack_dspy.bench.suites.suite import suite_from_dict
from knapsack_dspy.selection import knapsack


def test_time_limited_selections_are_marked_counted_and_reported(tmp_path, monkeypatch):
    suite = suite_from_dict({"name": "t", "selector": ["kate", "seer"], "budget": 4000, "max_exemplars": 2,
                             "model": "openai/gpt-4o-mini", "attributes": [], "selection_only": True})

    def bench(out):
        metrics, rows, report = bench_on_tatqa_slice(suite, out, monkeypatch, WordCounter())
        return {m["spec"]["selector"]: m for m in metrics.values()}, rows, report

    metrics, rows, report = bench(tmp_path / "solved")
    assert all("selection_status" not in r for r in rows) and len(rows) == 6
    assert metrics["seer"]["time_limited"] == metrics["kate"]["time_limited"] == 0
    assert "cut by the time limit" not in report

    solve = knapsack._milp

    def out_of_time(*args, **kwargs):  # the same set, as HiGHS returns it when its time limit ends the search
        x, status = solve(*args, **kwargs)
        return x, "time_limit" if status == "optimal" else status

    monkeypatch.setattr(knapsack, "_milp", out_of_time)
    metrics, rows, report = bench(tmp_path / "cut")
    assert {r["spec"]["selector"]: r.get("selection_status") for r in rows} == {"seer": "time_limit", "kate": None}
    assert metrics["seer"]["time_limited"] == 3 and metrics["kate"]["time_limited"] == 0
    lines = report.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| selector"))
    header = [c.strip() for c in lines[start].strip("|").split("|")]
    table = [[c.strip() for c in line.strip("|").split("|")] for line in lines[start + 2:start + 4]]
    column = header.index("cut by the time limit")
    assert {row[0]: row[column] for row in table} == {"kate": "0", "seer": "3"}


def test_a_search_the_time_limit_ended_is_marked_even_when_a_constraint_was_then_dropped(monkeypatch):
    """A first solve that finds nothing within its time limit drops a constraint (status "relaxed"); the selection
    still says its search was cut (``time_limited``), and SEER's Selection and its row carry it."""
    import numpy as np

    from knapsack_dspy.selection.constraints import attribute_constraint
    from knapsack_dspy.selection.exemplar_pool import ExemplarPool, SelectionRequest
    from knapsack_dspy.selection.selectors.seer import KnapsackSelector

    solve, calls = knapsack._milp, []

    def first_finds_nothing(*args, **kwargs):
        calls.append(1)
        return (None, "time_limit_no_solution") if len(calls) == 1 else solve(*args, **kwargs)

    monkeypatch.setattr(knapsack, "_milp", first_finds_nothing)
    values, costs = np.array([0.9, 0.8, 0.7]), np.array([10.0, 10.0, 10.0])
    sol = knapsack.solve_knapsack(values, costs, 25.0, 2, [attribute_constraint([True, False, False], min_count=1,
                                                                                 name="first")])
    assert sol.status == "relaxed" and sol.relaxed == ("first",) and sol.time_limited
    assert len(sol.selected) == 2

    rng = np.random.default_rng(0)
    vectors = rng.normal(size=(6, 8)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    pool = ExemplarPool([f"e{i}" for i in range(6)], vectors, np.full(6, 10.0),
                        {"modality": np.array(["table", "text"] * 3)})
    calls.clear()
    selection = KnapsackSelector(max_exemplars=2).select(
        pool, SelectionRequest(vectors[0], capacity=25.0, target_attributes={"modality": "table"}))
    assert selection.status == "relaxed" and selection.time_limited
    assert selection.as_dict(pool)["time_limited"] is True
    monkeypatch.setattr(knapsack, "_milp", solve)
    solved = KnapsackSelector(max_exemplars=2).select(
        pool, SelectionRequest(vectors[0], capacity=25.0, target_attributes={"modality": "table"}))
    assert not solved.time_limited and "time_limited" not in solved.as_dict(pool)
