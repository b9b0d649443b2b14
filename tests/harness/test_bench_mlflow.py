"""MLflow round trip: ``kdspy bench --mlflow`` and ``kdspy compile --mlflow`` write a real local store (sqlite),
read back with MLflow's own client. Skipped only without the ``mlflow`` extra (CI installs it)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from knapsack_dspy.bench.reporting.mlflow_tracking import (
    comparison_metrics,
    run_metrics_to_log,
    tracked_run,
    tracking_uri,
)
from knapsack_dspy.cli.main import main
from knapsack_dspy.testing.openai_stub_server import StubOpenAIServer, chat_adapter_reply

DATA = Path(os.environ.get("KDSPY_DATA_DIR", Path(__file__).resolve().parents[3] / "shared" / "data"))


def test_metrics_and_store_locations_without_mlflow(tmp_path, monkeypatch):
    m = {"n": 10, "em": 30.0, "em_ci": [20.0, 41.0], "f1": None, "within_budget": 100.0, "lm_calls": 12,
         "time_per_question": {"total": 3.0, "lm": None, "selection": 0.01, "other": 1.0, "n": 9},
         "by_answer_type": {"multi-span": {"n": 3, "em": 33.3}}, "spec": {"selector": "seer"}}
    logged = run_metrics_to_log(m)
    assert logged == {"n": 10.0, "em": 30.0, "em_ci_low": 20.0, "em_ci_high": 41.0, "within_budget": 100.0,
                      "lm_calls": 12.0, "seconds_per_question.total": 3.0, "seconds_per_question.selection": 0.01,
                      "seconds_per_question.other": 1.0, "by_answer_type.multi-span.n": 3.0,
                      "by_answer_type.multi-span.em": 33.3}
    pair = {"a": "seer [seed=0]", "b": "kate", "setting": ["tatqa", "pot", 2048, 4, "m", ""],
            "em": {"difference": 5.0, "low": -3.0, "high": 13.0, "cluster_low": -2.0, "cluster_high": 12.0,
                   "mcnemar_p": 0.38}}
    prefix = "seer _seed_0_ - kate.em_"  # characters MLflow does not take in a key become "_"
    assert comparison_metrics([pair]) == {prefix + "difference": 5.0, prefix + "low": -3.0, prefix + "high": 13.0,
                                          prefix + "doc_low": -2.0, prefix + "doc_high": 12.0,
                                          prefix + "mcnemar_p": 0.38}
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    assert tracking_uri(None, tmp_path) == f"sqlite:///{tmp_path.resolve()}/mlruns/mlflow.db"
    assert tracking_uri("sqlite:///x.db", tmp_path) == "sqlite:///x.db"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://127.0.0.1:5000")
    assert tracking_uri(None, tmp_path) == "http://127.0.0.1:5000"


def test_traces_need_a_store(env, capsys):
    assert main(["bench", "--selection-only", "--out", str(env / "r"), "--mlflow-traces"]) == 2
    assert "--mlflow-traces traces into MLflow: give --mlflow too" in capsys.readouterr().err


@pytest.mark.slow  # MLflow's import and its store's first migrations take seconds
def test_a_tracked_run_puts_back_what_mlflow_changed_in_the_process(tmp_path, monkeypatch, mlflow_state_restored):
    mlflow = pytest.importorskip("mlflow", reason="the mlflow extra is not installed")
    import dspy
    from mlflow.tracking import MlflowClient

    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    before, track_usage = mlflow.get_tracking_uri(), dspy.settings.track_usage
    uri = tracking_uri(None, tmp_path)
    with tracked_run(uri, "kdspy-test", "one", traces=True) as run:
        assert os.environ["MLFLOW_TRACKING_URI"] == uri and mlflow.get_tracking_uri() == uri
        assert dspy.settings.track_usage  # autolog turns DSPy's usage tracking on
    assert "MLFLOW_TRACKING_URI" not in os.environ
    assert mlflow.get_tracking_uri() == before
    assert dspy.settings.track_usage == track_usage
    assert MlflowClient(uri).get_run(run.info.run_id).info.run_name == "one"  # logged where it was asked to
    # a URI the caller gave only in the environment keeps coming from there (the run does not pin it)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'caller.db'}")
    with tracked_run(f"sqlite:///{tmp_path / 'other.db'}", "kdspy-test", "two"):
        pass
    assert os.environ["MLFLOW_TRACKING_URI"] == f"sqlite:///{tmp_path / 'caller.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'later.db'}")
    assert mlflow.get_tracking_uri() == f"sqlite:///{tmp_path / 'later.db'}"


@pytest.mark.slow  # MLflow's import and its store's first migrations take seconds
@pytest.mark.skipif(not (DATA / "tatqa" / "dev_pool.json.gz").exists(), reason="TAT-QA data not found")
def test_bench_and_compile_round_trip_through_a_local_mlflow_store(env, capsys, monkeypatch, mlflow_state_restored):
    pytest.importorskip("mlflow", reason="the mlflow extra is not installed")
    from mlflow.tracking import MlflowClient

    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    out = env / "results"
    with StubOpenAIServer(reply=chat_adapter_reply(program='ans = 1\nscale = ""')) as server:
        (env / "suite.toml").write_text(f'''
name = "tracked"
dataset = "tatqa"
pipeline = "pot"
route = ""
selector = ["seer", "kate"]
budget = 3000
max_exemplars = 2
model = "openai/stub-model"
api_base = "{server.base_url}"
limit = 3
''')
        assert main(["bench", str(env / "suite.toml"), "--out", str(out), "--quiet", "--mlflow"]) == 0
        assert main(["bench", str(env / "suite.toml"), "--out", str(out), "--rescore", "--mlflow"]) == 0
        store = f"sqlite:///{env}/compile-store/mlflow.db"
        (env / "compile-store").mkdir()
        assert main(["compile", "--dataset", "tatqa", "--selector", "kate", "--budget", "3000", "-M", "2",
                     "--lm", "openai/stub-model", "-o", str(env / "prog.json"), "--quiet", "--mlflow", store]) == 0
        traced = f"sqlite:///{env}/compile-store/traced.db"
        assert main(["bench", str(env / "suite.toml"), "--out", str(env / "traced"), "--quiet", "--limit", "1",
                     "--mlflow", traced, "--mlflow-experiment", "with traces", "--mlflow-traces"]) == 0
    assert "logged to MLflow: experiment tracked" in capsys.readouterr().out

    client = MlflowClient(tracking_uri=f"sqlite:///{out}/mlruns/mlflow.db")
    experiment = client.get_experiment_by_name("tracked")
    runs = client.search_runs([experiment.experiment_id])
    parents = {r.data.tags["kdspy.command"]: r for r in runs if "mlflow.parentRunId" not in r.data.tags}
    assert sorted(parents) == ["bench", "bench --rescore"]  # one MLflow run per bench, the re-score's too
    rescored = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == parents["bench --rescore"].info.run_id]
    assert len(rescored) == 2 and parents["bench --rescore"].data.params["rescore"] == "True"
    parent = parents["bench"]
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id]
    assert parent.info.status == "FINISHED" and parent.data.params["suite"] == "tracked"
    assert any(k.startswith("seer - kate.em_") for k in parent.data.metrics)
    artifacts = {a.path for a in client.list_artifacts(parent.info.run_id)}
    assert {"report.md", "metrics.json", "comparisons.json", "predictions.jsonl", "page.html", "plots"} <= artifacts
    plots = {a.path for a in client.list_artifacts(parent.info.run_id, "plots")}
    assert "plots/accuracy_vs_prompt_tokens.png" in plots

    metrics = json.loads((out / "metrics.json").read_text())
    assert sorted(c.data.params["selector"] for c in children) == ["kate", "seer"]
    for child in children:
        m = metrics[child.data.tags["kdspy.run"]]
        assert child.data.params["budget"] == "3000" and child.data.params["model"] == "openai/stub-model"
        assert child.data.metrics["n"] == 3 and child.data.metrics["em"] == pytest.approx(m["em"])
        assert child.data.metrics["em_ci_low"] == pytest.approx(m["em_ci"][0])
        assert child.data.metrics["lm_calls"] == m["lm_calls"] and "within_budget" in child.data.metrics
        assert "compile.lm_calls" in child.data.metrics
        names = {a.path for a in client.list_artifacts(child.info.run_id)}
        assert {"compile_report.json", "program"} <= names
        (program,) = client.list_artifacts(child.info.run_id, "program")
        assert program.path.endswith(".json")

    compile_client = MlflowClient(tracking_uri=store)
    (run,) = compile_client.search_runs([compile_client.get_experiment_by_name("kdspy compile").experiment_id])
    assert run.data.params["selector"] == "kate" and run.data.params["budget"] == "3000"
    assert run.data.metrics["compile.lm_calls"] == 0 and run.data.metrics["solve.write.pool_size"] > 0
    assert {a.path for a in compile_client.list_artifacts(run.info.run_id)} == {"compile_report.json", "program"}

    # --mlflow-traces: mlflow.dspy.autolog traced each question's program (2 runs x 1 question), in the bench's run
    traces_client = MlflowClient(tracking_uri=traced)
    experiment = traces_client.get_experiment_by_name("with traces")
    (parent,) = [r for r in traces_client.search_runs([experiment.experiment_id])
                 if "mlflow.parentRunId" not in r.data.tags]
    traces = traces_client.search_traces(locations=[experiment.experiment_id], run_id=parent.info.run_id, flush=True)
    assert len(traces) >= 2
