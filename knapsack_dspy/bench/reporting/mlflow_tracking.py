"""Experiment tracking with MLflow (the optional extra ``mlflow``): ``kdspy bench --mlflow`` / ``kdspy compile
--mlflow`` log what they did where DSPy users already look.

A bench invocation is one MLflow run (the suite: its name, source and command-line overrides as parameters; the
paired comparisons as metrics; ``report.md``, ``metrics.json``, ``comparisons.json``, ``suite.json``, the plots,
``predictions.jsonl`` and the per-question ``page.html`` as artifacts) with one nested run per run of the suite
(its ``RunSpec`` as parameters; EM / F1 / accuracy with their 90 % intervals, within-budget share, exemplars,
prompt and completion tokens, LM calls, cache hits, cost, seconds, time per question, scores per answer type and
route as metrics; its compile report and compiled program as artifacts). A compile is one run: the options as
parameters, the compile cost and choices as metrics, the program and its report as artifacts.
``mlflow.dspy.autolog`` traces every DSPy call only when asked (``--mlflow-traces``).

The store is local unless a URI says otherwise: ``--mlflow`` alone uses ``$MLFLOW_TRACKING_URI`` when set, else
``sqlite:///<dir>/mlruns/mlflow.db`` with artifacts in ``<dir>/mlruns/artifacts`` (``<dir>``: the results
directory, or the compiled program's folder). No server: ``mlflow ui --backend-store-uri sqlite:///...`` shows it.
"""

from __future__ import annotations

import math
import os
import re
import sys
import warnings
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from knapsack_dspy.errors import KnapsackDspyError

__all__ = ["STORE_DIR", "MlflowUnavailableError", "log_bench_results", "log_compile", "require_mlflow",
           "tracked_run", "tracking_uri"]

STORE_DIR = "mlruns"
_PARAM_CHARS = 500  # a parameter value is shown whole up to this length (MLflow stores at most 6,000)
_BAD_KEY = re.compile(r"[^\w\-. :/]")
# Per-run metrics logged as they are (their intervals as <name>_ci_low / _ci_high).
_RUN_METRICS = ("n", "accuracy", "em", "f1", "authors_rule", "within_budget", "gold_case_hit", "mean_exemplars",
                "mean_prompt_tokens", "prompt_tokens_used", "completion_tokens_used", "lm_calls", "cache_hits",
                "cost_usd", "seconds", "median_latency_s", "answered_wrong", "could_not_ask", "internal_errors",
                "score_errors", "program_score", "selection_ms_median")
#: and every ``attribute_match.<attribute>`` a run records (``run_metrics``)
_ATTRIBUTE_MATCH = "attribute_match."
_RESULT_FILES = ("report.md", "metrics.json", "comparisons.json", "suite.json", "predictions.jsonl", "page.html")


class MlflowUnavailableError(KnapsackDspyError, ValueError):
    """--mlflow was asked for, but MLflow is not installed."""


def require_mlflow():
    """The ``mlflow`` module (``MlflowUnavailableError`` when the extra is not installed)."""
    try:
        import mlflow  # heavy (~3 s): only when tracking is asked for
    except ImportError:
        raise MlflowUnavailableError("--mlflow needs MLflow: pip install 'knapsack-dspy[mlflow]'") from None
    return mlflow


def tracking_uri(option: str | None, default_dir: Path) -> str:
    """The store to log to: ``option`` (a URI or a path), else ``$MLFLOW_TRACKING_URI``, else a sqlite store in
    ``default_dir/mlruns``."""
    if option:
        return option if "://" in option or option.startswith("databricks") else Path(option).resolve().as_uri()
    if os.environ.get("MLFLOW_TRACKING_URI"):
        return os.environ["MLFLOW_TRACKING_URI"]
    store = Path(default_dir).resolve() / STORE_DIR
    store.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{store / 'mlflow.db'}"


def _experiment_id(mlflow, name: str, uri: str) -> str:
    experiment = mlflow.get_experiment_by_name(name)
    if experiment is not None:
        return experiment.experiment_id
    location = None
    if uri.startswith("sqlite:///"):  # artifacts beside the database, not in the current directory
        location = (Path(uri.removeprefix("sqlite:///")).parent / "artifacts").as_uri()
    return mlflow.create_experiment(name, artifact_location=location)


@contextmanager
def tracked_run(uri: str, experiment: str, run_name: str, *, traces: bool = False, compile_traces: bool = False,
                tags: Mapping[str, str] | None = None) -> Iterator[Any]:
    """An active MLflow run in ``experiment`` (created when missing) at ``uri``; with ``traces``,
    ``mlflow.dspy.autolog`` traces the DSPy calls made inside (``compile_traces``: a compile's too).

    What the run changes in the process is put back when it ends: the tracking URI (``mlflow.set_tracking_uri``
    also writes it into ``os.environ``, where later runs and child processes would read it) and DSPy's process-wide
    ``track_usage`` (which autolog turns on). A library caller's own MLflow settings (its autolog, its active
    experiment) are not touched."""
    mlflow = require_mlflow()
    saved = _ProcessState.save()
    mlflow.set_tracking_uri(uri)
    try:
        experiment_id = _experiment_id(mlflow, experiment, uri)
        if traces:
            import mlflow.dspy  # the flavor registers DSPy's callback

            mlflow.dspy.autolog(log_traces=True, log_traces_from_compile=compile_traces, silent=True)
        try:
            with mlflow.start_run(experiment_id=experiment_id, run_name=run_name, tags=dict(tags or {})) as run:
                yield run
        finally:
            if traces:
                mlflow.dspy.autolog(disable=True, silent=True)
                mlflow.flush_trace_async_logging()  # traces are exported in the background: all in the store
    finally:
        saved.restore(mlflow)


class _ProcessState:
    """The process state a tracked run changes: MLflow's tracking URI (in the process and in ``os.environ``) and
    DSPy's process-wide ``track_usage`` (which ``mlflow.dspy.autolog`` turns on)."""

    def __init__(self, uri_in_process: str | None, uri_in_environment: str | None, track_usage: bool | None) -> None:
        self.uri_in_process, self.uri_in_environment, self.track_usage = uri_in_process, uri_in_environment, track_usage

    @classmethod
    def save(cls) -> _ProcessState:
        # MLflow's own record of a set_tracking_uri call (None: none was made; the URI then comes from the
        # environment or MLflow's default, and must keep coming from there)
        service = sys.modules.get("mlflow.tracking._tracking_service.utils")
        in_environment = os.environ.get("MLFLOW_TRACKING_URI")
        return cls(getattr(service, "_tracking_uri", in_environment), in_environment, _dspy_track_usage())

    def restore(self, mlflow) -> None:
        mlflow.set_tracking_uri(self.uri_in_process)  # None: also unsets the environment variable, put back below
        if self.uri_in_environment is None:
            os.environ.pop("MLFLOW_TRACKING_URI", None)
        else:
            os.environ["MLFLOW_TRACKING_URI"] = self.uri_in_environment
        now = _dspy_track_usage()
        if now is not None and now != bool(self.track_usage):  # before DSPy was imported: its default, off
            import dspy

            try:
                dspy.configure(track_usage=bool(self.track_usage))
            except RuntimeError as error:  # DSPy lets only the thread that configured it first change its settings
                warnings.warn(f"DSPy's track_usage stays {now} after the MLflow run: {error}", stacklevel=3)


def _dspy_track_usage() -> bool | None:
    """DSPy's process-wide ``track_usage`` (not a ``dspy.context`` override of the calling thread); None while DSPy
    is not imported."""
    settings = sys.modules.get("dspy.dsp.utils.settings")
    config = getattr(settings, "main_thread_config", None)
    return None if config is None else bool(config.get("track_usage"))


def _key(name: str) -> str:
    return _BAD_KEY.sub("_", name)


def _params(values: Mapping[str, Any]) -> dict[str, str]:
    out = {}
    for name, value in values.items():
        text = ",".join(map(str, value)) if isinstance(value, (list, tuple)) else str(value)
        out[_key(name)] = text if len(text) <= _PARAM_CHARS else text[:_PARAM_CHARS] + "..."
    return out


def _number(value) -> float | None:
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)) and math.isfinite(value):
        return float(value)
    return None


def run_metrics_to_log(m: Mapping[str, Any]) -> dict[str, float]:
    """The MLflow metrics of one run's entry of ``metrics.json``."""
    out: dict[str, float] = {}
    for name in (*_RUN_METRICS, *(key for key in m if key.startswith(_ATTRIBUTE_MATCH))):
        value = _number(m.get(name))
        if value is None:
            continue
        out[_key(name)] = value
        ci = m.get(f"{name}_ci")
        if ci:
            out[_key(f"{name}_ci_low")], out[_key(f"{name}_ci_high")] = float(ci[0]), float(ci[1])
    for part, value in (m.get("time_per_question") or {}).items():
        if part in ("total", "lm", "selection", "other") and _number(value) is not None:
            out[f"seconds_per_question.{part}"] = float(value)
    for group in ("by_answer_type", "by_route"):
        for value_name, scores in (m.get(group) or {}).items():
            for score in ("em", "f1", "n"):
                if _number(scores.get(score)) is not None:
                    out[_key(f"{group}.{value_name}.{score}")] = float(scores[score])
    return out


def comparison_metrics(comparisons: list[Mapping]) -> dict[str, float]:
    """The paired comparisons as metrics: ``<a> - <b>.em_difference`` and its two intervals, McNemar p, ..."""
    out: dict[str, float] = {}
    several = len({tuple(map(str, c["setting"])) for c in comparisons}) > 1
    for c in comparisons:
        setting = " ".join(str(part) for part in c["setting"] if part not in (None, ""))
        prefix = _key(f"{c['a']} - {c['b']}" + (f" ({setting})" if several else ""))
        for score in ("em", "f1"):
            d = c.get(score) or {}
            for field, name in (("difference", "difference"), ("low", "low"), ("high", "high"),
                                ("cluster_low", "doc_low"), ("cluster_high", "doc_high"), ("mcnemar_p", "mcnemar_p")):
                value = _number(d.get(field))
                if value is not None:
                    out[f"{prefix}.{score}_{name}"] = value
    return out


def log_bench_results(out_dir: Path, metrics: Mapping[str, dict], comparisons: list[Mapping],
                      suite_params: Mapping[str, Any], program_paths: Mapping[str, Path],
                      compile_reports: Mapping[str, Mapping]) -> None:
    """Log a finished bench into the active run (see the module docstring); ``program_paths`` / ``compile_reports``:
    per run key, the compiled program's file and its compile report (when there is one)."""
    mlflow = require_mlflow()
    out_dir = Path(out_dir)
    mlflow.log_params(_params(suite_params))
    if comparisons:
        mlflow.log_metrics(comparison_metrics(comparisons))
    for name in _RESULT_FILES:
        if (out_dir / name).is_file():
            mlflow.log_artifact(str(out_dir / name))
    for png in sorted(out_dir.glob("*.png")):
        mlflow.log_artifact(str(png), artifact_path="plots")
    experiment_id = mlflow.active_run().info.experiment_id  # nested runs go where the parent is
    for run, m in sorted(metrics.items(), key=lambda kv: str(kv[1].get("label"))):
        setting = " · ".join(str(m["spec"].get(k)) for k in ("dataset", "pipeline", "budget", "max_exemplars"))
        with mlflow.start_run(run_name=f"{m.get('label')} · {setting}", nested=True, experiment_id=experiment_id,
                              tags={"kdspy.run": run, "kdspy.selector": str(m["spec"].get("selector"))}):
            mlflow.log_params(_params(m["spec"]))
            mlflow.log_metrics(run_metrics_to_log(m))
            report = compile_reports.get(run)
            if report:
                mlflow.log_dict(dict(report), "compile_report.json")
                mlflow.log_metrics({_key(f"compile.{k}"): v for k, v in (report.get("cost") or {}).items()
                                    if _number(v) is not None})
            path = program_paths.get(run)
            if path is not None and Path(path).is_file():
                mlflow.log_artifact(str(path), artifact_path="program")


def log_compile(program_path: Path, report: Mapping, options: Mapping[str, Any]) -> None:
    """Log a compile into the active run: the options, the compile cost and each predictor's choices and
    attribute accuracy as metrics, the program JSON and its report as artifacts."""
    mlflow = require_mlflow()
    mlflow.log_params(_params(options))
    values = {_key(f"compile.{k}"): v for k, v in (report.get("cost") or {}).items() if _number(v) is not None}
    for name, part in (report.get("predictors") or {}).items():
        for setting, value in (part.get("chosen") or {}).items():
            if _number(value) is not None:
                values[_key(f"{name}.chosen.{setting}")] = float(value)
        for attr, acc in (part.get("attribute_accuracy") or {}).items():
            if _number(acc.get("accuracy")) is not None:
                values[_key(f"{name}.attribute_accuracy.{attr}")] = float(acc["accuracy"])
        if _number(part.get("pool_size")) is not None:
            values[_key(f"{name}.pool_size")] = float(part["pool_size"])
    mlflow.log_metrics(values)
    mlflow.log_dict(dict(report), "compile_report.json")
    mlflow.log_artifact(str(program_path), artifact_path="program")
