"""Bench plumbing: crash-safe results store, suite expansion, report rendering."""

import json

import pytest

from knapsack_dspy.bench.reporting.report import aggregate, write_report
from knapsack_dspy.bench.results.store import ResultsStore
from knapsack_dspy.bench.suites.suite import SuiteError, load_suite, suite_from_dict


def test_store_appends_skips_duplicates_and_repairs_torn_line(tmp_path):
    path = tmp_path / "predictions.jsonl"
    with ResultsStore(path) as store:
        assert store.append({"run": "r", "example_id": "a", "correct": True})
        assert not store.append({"run": "r", "example_id": "a", "correct": False})  # duplicate refused
        assert store.append({"run": "r", "example_id": "b", "correct": False})
    # simulate a crash mid-write: a torn trailing line
    with open(path, "a") as fh:
        fh.write('{"run": "r", "example_id": "c", "corr')
    store = ResultsStore(path)
    assert store.done("r", "a") and store.done("r", "b") and not store.done("r", "c")
    assert store.append({"run": "r", "example_id": "c", "correct": True})
    store.close()
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    assert [r["example_id"] for r in rows] == ["a", "b", "c"]


def test_store_flushes_every_row_and_syncs_at_most_once_per_interval(tmp_path, monkeypatch):
    from knapsack_dspy.bench.results import store as results_store

    clock = [100.0]
    syncs = []
    monkeypatch.setattr(results_store.time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(results_store.os, "fsync", lambda fd: syncs.append(clock[0]))
    path = tmp_path / "p.jsonl"
    store = ResultsStore(path, fsync_interval_s=1.0)
    for i in range(50):  # 50 rows within 0.5 s: each readable at once (flushed), none synced yet
        clock[0] += 0.01
        store.append({"run": "r", "example_id": str(i)})
        assert len(path.read_text().splitlines()) == i + 1
    assert syncs == []
    clock[0] += 0.6
    store.append({"run": "r", "example_id": "late"})  # a second after the last sync: synced now
    assert syncs == [clock[0]]
    clock[0] += 0.1
    store.append({"run": "r", "example_id": "last"})
    store.close()  # the unsynced tail is synced on close
    assert len(syncs) == 2
    every_row = ResultsStore(tmp_path / "q.jsonl", fsync_interval_s=0)
    for i in range(3):
        every_row.append({"run": "r", "example_id": str(i)})
    every_row.close()
    assert len(syncs) == 5


def test_example_ids_are_parsed_and_leave_existing_run_keys_alone():
    from pathlib import Path

    suite = load_suite(Path(__file__).resolve().parents[2] / "benchmarks" / "embedded_seer_kate_random.toml")
    # the committed rows of benchmarks/results/embedded_seer_kate_random are matched on this key when resuming
    assert suite.runs[0].key == "tatqa|pot|seer|b2048|m4|local/qwen2.5-coder-1.5b-instruct|b7234d21"
    named = suite_from_dict({"selector": "seer", "example_ids": ["q1", "q2"]}).runs[0]
    assert named.example_ids == ("q1", "q2") and named.key != suite_from_dict({"selector": "seer"}).runs[0].key
    assert suite_from_dict({"example_ids": "q1"}).runs[0].example_ids == ("q1",)
    with pytest.raises(SuiteError, match=r"example_ids\[0\]: input should be a valid string \(got 1\)"):
        suite_from_dict({"example_ids": [1, 2]})


@pytest.mark.parametrize("replacement", ["same rows", "older snapshot", "deleted"])
def test_store_follows_a_file_replaced_under_it_and_loses_no_row(tmp_path, replacement, caplog):
    """What `git stash` / `git checkout` of a committed results file does while a run writes it."""
    import os

    path = tmp_path / "predictions.jsonl"
    path.write_text('{"run": "r", "example_id": "old"}\n')
    store = ResultsStore(path)
    store.append({"run": "r", "example_id": "a"})
    snapshot = path.read_text()
    store.append({"run": "r", "example_id": "b"})
    if replacement == "deleted":
        path.unlink()
    else:
        other = tmp_path / "other.jsonl"
        other.write_text(path.read_text() if replacement == "same rows" else snapshot)
        os.replace(other, path)  # a new file under the old name; the store still holds the old one
    store.append({"run": "r", "example_id": "c"})
    assert not store.append({"run": "r", "example_id": "b"})  # still known as done
    store.close()
    ids = [json.loads(line)["example_id"] for line in path.read_text().splitlines()]
    expected = {"same rows": ["old", "a", "b", "c"], "older snapshot": ["old", "a", "b", "c"],
                "deleted": ["a", "b", "c"]}[replacement]
    assert ids == expected
    assert "was replaced while this run wrote it" in caplog.text


def test_store_reports_corrupt_middle_line(tmp_path):
    path = tmp_path / "p.jsonl"
    path.write_text('{"run": "r", "example_id": "a"}\nnot json\n{"run": "r", "example_id": "b"}\n')
    with pytest.raises(ValueError, match=r"p.jsonl:2: corrupt results line"):
        ResultsStore(path)


def test_suite_expands_grid_and_overrides(tmp_path):
    path = tmp_path / "s.toml"
    path.write_text('''
name = "sweep"
dataset = "tatqa"
selector = ["seer", "kate"]
budget = [1024, 2048]
max_exemplars = [2, 4]
limit = 5

[[runs]]
pipeline = "pot"
route = ""

[[runs]]
pipeline = "cot"
selector = "random"
budget = 1024
''')
    suite = load_suite(path)
    assert suite.name == "sweep"
    pot = [r for r in suite.runs if r.pipeline == "pot"]
    cot = [r for r in suite.runs if r.pipeline == "cot"]
    assert len(pot) == 2 * 2 * 2 and len(cot) == 2
    assert {r.selector for r in cot} == {"random"} and all(r.limit == 5 for r in suite.runs)
    assert len({r.key for r in suite.runs}) == len(suite.runs)


@pytest.mark.parametrize("raw,message", [
    ({"budget": "big"}, r"x.toml: 1 problem:\n  budget: input should be a valid integer \(got 'big'\)"),
    ({"selectr": "seer"}, "selectr: unknown key"),
    ({"selector": []}, "selector: an empty list"),
    ({"runs": {"a": 1}}, "array of tables"),
])
def test_suite_errors_are_clear(raw, message):
    with pytest.raises(SuiteError, match=message):
        suite_from_dict(raw, "x.toml")


def test_missing_or_invalid_suite_file(tmp_path):
    with pytest.raises(SuiteError, match="not found"):
        load_suite(tmp_path / "nope.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("name = [")
    with pytest.raises(SuiteError, match="invalid TOML"):
        load_suite(bad)


def _rows():
    rows = []
    for selector, hits in (("seer", 8), ("kate", 5)):
        for m in (2, 4):
            spec = {"dataset": "tatqa", "pipeline": "pot", "selector": selector, "budget": 1024,
                    "max_exemplars": m, "model": "local/x"}
            run = f"tatqa|pot|{selector}|b1024|m{m}"
            for i in range(10):
                rows.append({"run": run, "spec": spec, "example_id": str(i), "correct": i < hits, "em": float(i < hits),
                             "f1": 1.0 if i < hits else 0.5, "within_budget": i % 5 != 0, "exemplar_ids": ["a"] * m,
                             "prompt_tokens": 900, "selection_ms": 3.0, "latency_s": 10.0, "error": None})
    return rows


def test_aggregate_scores_and_intervals():
    metrics = aggregate(_rows())
    seer = metrics["tatqa|pot|seer|b1024|m2"]
    assert seer["n"] == 10 and seer["accuracy"] == 80.0
    lo, hi = seer["accuracy_ci"]
    assert lo < 80.0 < hi and 0 <= lo and hi <= 100
    assert seer["f1"] == pytest.approx(90.0)
    assert seer["within_budget"] == 80.0
    assert seer["mean_exemplars"] == 2


def test_write_report_renders_table_and_plots(tmp_path):
    write_report(_rows(), tmp_path, "unit")
    md = (tmp_path / "report.md").read_text()
    assert "| selector |" in md and "| seer |" in md and "| kate |" in md
    assert "80.0 [" in md  # accuracy with its interval
    assert (tmp_path / "metrics.json").exists()
    assert (tmp_path / "score_vs_M.png").stat().st_size > 1000
    assert (tmp_path / "within_budget_vs_M.png").exists()
    # seer (8 of 10 right) against kate (5 of 10) on the same ten questions, at each M
    comparisons = json.loads((tmp_path / "comparisons.json").read_text())
    assert [(c["a"], c["b"]) for c in comparisons] == [("seer", "kate")] * 2
    em = comparisons[0]["em"]
    assert (em["n"], em["wins"], em["losses"]) == (10, 3, 0) and em["difference"] == pytest.approx(30.0)
    assert em["mcnemar_p"] == pytest.approx(0.25)
    assert "Paired comparisons" in md and "| seer − kate | 10 (10) | +30.0 [" in md


def test_finqa_rows_report_program_accuracy_beside_execution_accuracy(tmp_path):
    spec = {"dataset": "finqa", "pipeline": "finqa_pot", "selector": "seer", "budget": 2048, "max_exemplars": 4,
            "model": "local/x"}
    rows = [{"run": "r", "spec": spec, "example_id": str(i), "em": float(i < 3), "correct": i < 3,
             "program_correct": i < 2, "within_budget": True, "prompt_tokens": 10, "exemplar_ids": ["a"]}
            for i in range(5)]
    m = aggregate(rows)["r"]
    assert m["em"] == 60.0 and m["program_accuracy"] == 40.0 and m["program_accuracy_ci"][0] < 40.0
    assert "program_accuracy" not in aggregate(_rows())["tatqa|pot|seer|b1024|m2"]  # TAT-QA rows: no such field
    write_report(rows, tmp_path, "unit")
    assert "| selector | EM | program accuracy |" in (tmp_path / "report.md").read_text()


def test_exact_match_intervals_are_wilson_and_never_zero_width():
    rows = [{"run": "r", "spec": {"selector": "seer"}, "example_id": str(i), "em": 0.0, "f1": 0.5,
             "correct": False, "within_budget": True, "prompt_tokens": 10, "exemplar_ids": ["a"]} for i in range(5)]
    m = aggregate(rows)["r"]
    assert m["em"] == 0.0 and m["em_ci"][0] == 0.0 and m["em_ci"][1] == pytest.approx(35.1, abs=0.1)
    assert m["f1_ci"] == [50.0, 50.0]  # partial F1 values: a bootstrap of means


def test_rows_without_a_recorded_selection_leave_budget_statistics_alone():
    base = {"spec": {"selector": "kate"}, "em": 0.0, "f1": 0.0, "correct": False}
    rows = [{**base, "run": "r", "example_id": "1", "within_budget": False, "prompt_tokens": 3000,
             "exemplar_ids": ["a", "b", "c", "d"]},
            {**base, "run": "r", "example_id": "2", "within_budget": None, "exemplar_ids": [],
             "error": "selection failed"},
            {**base, "run": "r", "example_id": "3", "within_budget": False, "exemplar_ids": [],
             "error": "LM failed (a row written by older code: no selection recorded)"}]
    m = aggregate(rows)["r"]
    assert (m["n"], m["n_selected"], m["mean_exemplars"], m["within_budget"]) == (3, 1, 4.0, 0.0)


def test_answers_the_metric_could_not_read_are_counted_and_shown(tmp_path):
    rows = [{"run": "r", "spec": {"selector": "seer", "dataset": "tatqa"}, "example_id": str(i), "em": 0.0,
             "f1": 0.0, "correct": False, "score_error": "ValueError: x" if i < 2 else None} for i in range(4)]
    metrics = write_report(rows, tmp_path, "unit")
    assert metrics["r"]["score_errors"] == 2
    assert "score errors" in (tmp_path / "report.md").read_text()


def test_runs_of_one_setting_that_share_a_selector_are_labelled_apart(tmp_path):
    def rows(seed, right):
        spec = {"dataset": "tatqa", "pipeline": "pot", "selector": "seer", "budget": 2048, "max_exemplars": 4,
                "model": "m", "seed": seed, "limit": 10}
        return [{"run": f"seer-{seed}", "spec": spec, "example_id": str(i), "em": float(i < right),
                 "f1": float(i < right), "correct": i < right} for i in range(10)]

    kate = [{**r, "run": "kate", "spec": {**r["spec"], "selector": "kate", "seed": 0}} for r in rows(0, 2)]
    write_report(rows(0, 5) + rows(1, 7) + kate, tmp_path, "unit")
    md = (tmp_path / "report.md").read_text()
    assert "| seer [seed=0] |" in md and "| seer [seed=1] |" in md and "| kate |" in md
    comparisons = json.loads((tmp_path / "comparisons.json").read_text())
    assert {(c["a"], c["b"]) for c in comparisons} == {("seer [seed=0]", "kate"), ("seer [seed=0]", "seer [seed=1]")}


def test_runs_that_differ_only_by_their_named_questions_are_labelled_apart(tmp_path):
    spec = {"dataset": "sara", "pipeline": "cot", "selector": "kate_within_budget", "budget": 4096,
            "max_exemplars": 2, "model": "m"}
    rows = [{"run": f"r{g}", "spec": {**spec, "example_ids": [f"{g}{i}" for i in range(3)]}, "example_id": f"{g}{i}",
             "em": 1.0, "correct": True} for g in ("s", "t") for i in range(3)]
    write_report(rows, tmp_path, "unit")
    md = (tmp_path / "report.md").read_text()
    assert "| kate_within_budget [3 named questions from s0] |" in md
    assert "| kate_within_budget [3 named questions from t0] |" in md
    assert json.loads((tmp_path / "comparisons.json").read_text()) == []  # no question in common: no pair
    alike = [{**r, "run": "r3", "spec": {**r["spec"], "example_ids": ["s0", "x1", "x2"]}} for r in rows[:3]]
    write_report(rows + alike, tmp_path, "unit")  # the same size and first id as run rs: a digest tells them apart
    labels = {line.split(" |")[0] for line in (tmp_path / "report.md").read_text().splitlines()
              if line.startswith("| kate_within_budget [3 named questions from s0") and " − " not in line}
    assert len(labels) == 2 and all(" #" in label for label in labels)


def test_reports_count_answered_wrong_apart_from_could_not_ask():
    spec = {"selector": "seer", "dataset": "tatqa"}
    rows = [{"run": "r", "spec": spec, "example_id": str(i), "em": 0.0, "correct": False, **extra}
            for i, extra in enumerate([
                {"correct": True, "em": 1.0},                                              # right
                {},                                                                        # answered wrong
                {"error": "NameError: x", "error_kind": "answer", "output": "ans = x"},    # a failed program
                {"error": "LM x: rate limited", "error_kind": "transient", "output": None},
                {"error": "LM x: context window", "output": None, "traceback": "..."},     # an old row
                {"error": "RuntimeError: bug", "error_kind": "internal"},
            ])]
    (m,) = aggregate(rows).values()
    counts = (m["answered_wrong"], m["could_not_ask"], m["could_not_ask_transient"], m["internal_errors"])
    assert counts == (2, 2, 1, 1)
    assert m["em"] == pytest.approx(100.0 / 6)  # every row still counts in the scores
