"""Re-scoring stored results with the current metrics (``kdspy bench --rescore``): no LM, atomic, exact."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

import knapsack_dspy  # noqa: F401  (first: LiteLLM then loads with its bundled model map, _env.py)
from knapsack_dspy.bench.reporting.rescoring import RescoreError, rescore_results
from knapsack_dspy.bench.results.row_schema import SCHEMA_VERSION
from knapsack_dspy.bench.scoring.example_scores import score_prediction
from knapsack_dspy.cli.main import main
from knapsack_dspy.docqa.data.loader import load_examples

FIXTURE = Path(__file__).parents[1] / "fixtures" / "metrics_tatqa_gold.json"
RUN = "tatqa|pot|seer|b2048|m4|stub|0"


def _spec(**extra) -> dict:
    return {"dataset": "tatqa", "pipeline": "pot", "selector": "seer", "eval_split": "dev_tune",
            "eval_path": str(FIXTURE), "selection_only": False, **extra}


def _row(example, answer, scale, *, em=0.0, run=RUN, **extra) -> dict:
    return {"run": run, "spec": _spec(), "example_id": example.id, "output": "ans = ...", "answer": answer,
            "scale": scale, "error": None, "gold": "stale", "gold_scale": "", "em": em, "f1": em,
            "correct": em == 1.0, "latency_s": 1.5, **extra}


def _write(path: Path, rows: list[dict]) -> None:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")


def _read(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


@pytest.fixture
def examples():
    return {ex["answer_type"]: ex for ex in load_examples("tatqa", path=FIXTURE)}


def test_rescoring_recomputes_scores_and_keeps_everything_else(tmp_path, examples):
    span, arithmetic = examples["span"], examples["arithmetic"]
    rows = [_row(span, span["answer"], span["scale"], em=0.0),               # a right answer scored wrong
            _row(arithmetic, arithmetic["answer_value"] + 1, arithmetic["scale"], em=1.0),  # wrong, scored right
            {"run": "sel", "spec": _spec(selection_only=True), "example_id": span.id, "exemplar_ids": ["a"]}]
    _write(tmp_path / "predictions.jsonl", rows)
    messages: list[str] = []
    counts = rescore_results(tmp_path, log=messages.append)
    assert counts == {"rows": 3, "rescored": 2, "changed": 2, "updated": 2, "reselected": 0,
                      "gained": {RUN: 1}, "lost": {RUN: 1}}
    after = _read(tmp_path / "predictions.jsonl")
    assert (after[0]["em"], after[0]["correct"], after[0]["gold"]) == (1.0, True, span["answer"])
    assert (after[1]["em"], after[1]["correct"]) == (0.0, False)
    assert after[2] == {**rows[2], "schema_version": SCHEMA_VERSION}  # no answer to score; rewritten: migrated
    for before, now in zip(rows[:2], after[:2], strict=True):  # what the model produced is untouched
        assert {k: now[k] for k in ("answer", "scale", "output", "latency_s", "example_id", "run")} == \
               {k: before[k] for k in ("answer", "scale", "output", "latency_s", "example_id", "run")}
    assert messages[-1] == "re-scored 2 of 3 rows: 2 scores changed; 2 rows rewritten"
    # every rescored row equals a fresh score of its stored answer
    for row in after[:2]:
        example = next(ex for ex in examples.values() if ex.id == row["example_id"])
        fresh = score_prediction(example, type("P", (), {"answer": row["answer"], "scale": row["scale"]}))
        assert {k: row[k] for k in fresh} == fresh


def test_a_second_rescore_changes_nothing_and_leaves_the_file_alone(tmp_path, examples):
    span = examples["span"]
    _write(tmp_path / "predictions.jsonl", [_row(span, span["answer"], span["scale"])])
    rescore_results(tmp_path, log=lambda _: None)
    before = os.stat(tmp_path / "predictions.jsonl")
    counts = rescore_results(tmp_path, log=lambda _: None)
    after = os.stat(tmp_path / "predictions.jsonl")
    assert counts["changed"] == 0
    assert (before.st_ino, before.st_mtime_ns) == (after.st_ino, after.st_mtime_ns)


def test_rows_of_unknown_questions_stop_the_rescore_without_a_change(tmp_path, examples):
    span = examples["span"]
    rows = [_row(span, span["answer"], span["scale"]), {**_row(span, "x", ""), "example_id": "not-there"}]
    _write(tmp_path / "predictions.jsonl", rows)
    original = (tmp_path / "predictions.jsonl").read_bytes()
    with pytest.raises(RescoreError, match="not found in their eval split"):
        rescore_results(tmp_path, log=lambda _: None)
    assert (tmp_path / "predictions.jsonl").read_bytes() == original
    with pytest.raises(RescoreError, match="does not exist"):
        rescore_results(tmp_path / "nowhere", log=lambda _: None)


def test_cli_rescore_rewrites_scores_and_the_report_without_an_lm(tmp_path, examples, capsys):
    span, multi = examples["span"], examples["multi-span"]
    suite = tmp_path / "suite.toml"
    suite.write_text(f'name = "rescore"\ndataset = "tatqa"\neval_path = "{FIXTURE}"\nselector = ["seer"]\n'
                     f'model = "openai/never-called"\n', encoding="utf-8")
    out = tmp_path / "out"
    out.mkdir()
    _write(out / "predictions.jsonl", [_row(span, span["answer"], span["scale"]),
                                       _row(multi, list(multi["answer"]), multi["scale"])])
    assert main(["bench", str(suite), "--out", str(out), "--rescore"]) == 0
    printed = capsys.readouterr().out
    assert "re-scored 2 of 2 rows: 2 scores changed; 2 rows rewritten" in printed
    assert "| seer | 100.0 [" in printed  # the report is rebuilt from the new scores
    assert all(row["correct"] for row in _read(out / "predictions.jsonl"))
    assert main(["bench", str(suite), "--out", str(tmp_path / "empty"), "--rescore"]) == 2


def test_rows_that_only_gain_fields_are_written_but_not_counted_as_changed(tmp_path, examples):
    span = examples["span"]
    error_row = {k: v for k, v in _row(span, None, None).items() if k not in ("gold", "gold_scale")}
    error_row["error"] = "LM local: timeout"
    _write(tmp_path / "predictions.jsonl", [error_row])
    messages: list[str] = []
    counts = rescore_results(tmp_path, log=messages.append)
    assert (counts["changed"], counts["updated"]) == (0, 1)
    assert messages[-1] == "re-scored 1 of 1 rows: 0 scores changed; 1 rows rewritten"
    assert _read(tmp_path / "predictions.jsonl")[0]["gold"] == span["answer"]


def test_rescoring_keeps_the_file_permissions(tmp_path, examples):
    span = examples["span"]
    path = tmp_path / "predictions.jsonl"
    _write(path, [_row(span, span["answer"], span["scale"])])
    path.chmod(0o644)
    assert rescore_results(tmp_path, log=lambda _: None)["changed"] == 1
    assert path.stat().st_mode & 0o777 == 0o644


@pytest.fixture
def held_dir(tmp_path):
    """A results directory whose lock another process holds, as a running ``kdspy bench`` would."""
    import subprocess
    import sys

    out = tmp_path / "held"
    out.mkdir()
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; from knapsack_dspy.bench.results.lock import results_lock\n"
         "with results_lock(sys.argv[1]):\n    print('held', flush=True); time.sleep(60)", str(out)],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        yield out
    finally:
        holder.kill()
        holder.wait()


def test_a_results_directory_has_one_writer_at_a_time(held_dir, examples):
    from knapsack_dspy.bench.results.lock import ResultsBusyError

    span = examples["span"]
    _write(held_dir / "predictions.jsonl", [_row(span, span["answer"], span["scale"])])
    original = (held_dir / "predictions.jsonl").read_bytes()
    with pytest.raises(ResultsBusyError, match="another kdspy bench is writing"):
        rescore_results(held_dir, log=lambda _: None)
    assert (held_dir / "predictions.jsonl").read_bytes() == original


def test_the_lock_dies_with_its_holder(tmp_path, examples):
    import subprocess
    import sys

    code = "import sys, os; from knapsack_dspy.bench.results.lock import results_lock\n" \
           "with results_lock(sys.argv[1]):\n    os._exit(9)"  # killed while holding it
    assert subprocess.run([sys.executable, "-c", code, str(tmp_path)]).returncode == 9
    span = examples["span"]
    _write(tmp_path / "predictions.jsonl", [_row(span, span["answer"], span["scale"])])
    assert rescore_results(tmp_path, log=lambda _: None)["changed"] == 1


def test_cli_bench_on_a_busy_directory_is_a_one_line_error(held_dir, capsys):
    suite = held_dir.parent / "suite.toml"
    suite.write_text(f'name = "busy"\ndataset = "tatqa"\neval_path = "{FIXTURE}"\npool_path = "{FIXTURE}"\n'
                     'selector = ["kate"]\nselection_only = true\n', encoding="utf-8")
    assert main(["bench", str(suite), "--out", str(held_dir), "--quiet"]) == 2
    assert "another kdspy bench is writing" in capsys.readouterr().err
    assert not (held_dir / "predictions.jsonl").exists()  # nothing was written
    assert main(["bench", str(suite), "--out", str(held_dir), "--rescore"]) == 2


class _Select:
    """What selection quality reads of a compiled program's SelectExemplars."""

    def __init__(self, programs):
        self.pool_ids = list(programs)
        self.programs = list(programs.values())
        self.pool_attributes = {"modality": ["table"] * len(programs), "answer_type": ["arithmetic"] * len(programs)}


def test_selection_quality_is_recomputed_from_the_saved_program(tmp_path, examples, monkeypatch):
    from knapsack_dspy.bench.reporting import rescoring

    arithmetic = examples["arithmetic"]
    gold = arithmetic["derivation"] or arithmetic["program"]
    select = _Select({"same": gold, "other": "2019"})   # "2019": a lone number, no program
    row = {**_row(arithmetic, arithmetic["answer_value"], arithmetic["scale"], em=1.0),
           "exemplar_ids": ["other"], "gold_case_hit": True, "program_score": 1.0}  # stale: scored by old code
    selection_row = {"run": "sel", "spec": _spec(selection_only=True), "example_id": arithmetic.id,
                     "exemplar_ids": ["same"], "gold_case_hit": False, "program_score": 0.0}
    _write(tmp_path / "predictions.jsonl", [row, selection_row])
    monkeypatch.setattr(rescoring, "_selection_of", lambda out_dir, r, loaded: select)
    counts = rescore_results(tmp_path, log=lambda _: None)
    assert counts["reselected"] == 2 and counts["changed"] == 0
    after = _read(tmp_path / "predictions.jsonl")
    assert (after[0]["gold_case_hit"], after[0]["program_score"]) == (False, 0.0)
    assert (after[1]["gold_case_hit"], after[1]["program_score"]) == (True, 1.0)
    assert after[1]["attribute_match"]["modality"] == (1.0 if arithmetic["modality"] == "table" else 0.0)
