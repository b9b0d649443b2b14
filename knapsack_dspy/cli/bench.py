"""``kdspy bench``: run a benchmark suite (TOML) or a grid given by flags; resumable."""

from __future__ import annotations

import argparse
from contextlib import contextmanager
from pathlib import Path

from knapsack_dspy.cli.common import (
    SettingDefault,
    ShownWhenAsked,
    add_data_options,
    add_mlflow_options,
    given,
    mlflow_session,
    parse_list,
    registered_tasks,
    resolve_data_dir,
    setup_caches,
)
from knapsack_dspy.cli.main import UserError

EPILOG = """examples:
  kdspy bench benchmarks/seer_table1.toml --limit 100
  kdspy bench benchmarks/finqa_cases.toml --selection-only
  kdspy bench --dataset tatqa --selectors seer,kate,random --budgets 1024,2048 --max-exemplars 2,4 \\
              --lm local/qwen2.5-coder-0.5b-instruct --limit 20 --out results/quick
  kdspy bench benchmarks/seer_table1.toml --lm openai/gpt-4o-mini --workers 8      # 8 requests at once
  kdspy bench benchmarks/seer_table1.toml --lm openai/gpt-4o-mini --workers 8 --ray  # on a local Ray cluster
  kdspy bench benchmarks/seer_table1.toml --workers 16 --ray=auto                   # on a running cluster
  kdspy bench benchmarks/gsm8k_cot.toml --lm openai/qwen2.5-coder-1.5b-instruct \\
              --api-base http://127.0.0.1:8080/v1 --workers 2     # 2 workers, one served model (kdspy serve-model)

Writes OUT/predictions.jsonl (one line per example, flushed as it finishes), OUT/metrics.json,
OUT/report.md (rows = selectors, columns = metrics with 90% CIs) and PNG plots. Interrupted runs
resume: the same command skips what is already in predictions.jsonl and asks again the questions whose
LM call failed transiently (rate limit, 5xx, timeout, connection); --retry-errors asks again every row
with an error. When some questions could not be asked, the command ends with one line saying so, exit 2.
Every row records what produced it (code, packages, model weights, adapter, seed); rows of another origin
are refused unless --allow-mixed. --selection-only runs no LM (selection-quality metrics only: gold-case
hit rate, budget coverage, attribute match, latency). --rescore recomputes the scores of the stored
answers with the current metrics (no LM call). kdspy report OUT writes the per-question page (OUT/page.html).
Committed results keep their rows compressed, as OUT/predictions.jsonl.xz (older ones: .gz): --rescore and
kdspy report read it as it is (--rescore rewrites it in its form); a run continuing there reads it, and when it
writes its first row decompresses it to OUT/predictions.jsonl, which it appends to (the compressed file is left;
benchmarks/commit_rows.sh compresses and commits the rows again).
--mlflow logs the suite as an MLflow run (a nested run per run of the suite: settings, metrics with intervals,
compile report, program; report, plots, predictions and page as artifacts) to a local store (OUT/mlruns) or URI.

--workers N answers N questions at once (default: the suite's num_threads, else 1): threads of this process
for API models and served ones (openai/NAME with --api-base: many workers, one model); for an embedded local/
model, N llama.cpp slots in this process (the default stays 1 worker: see docs/scale_out.md). --ray runs the
workers as Ray actors (a local cluster, or ADDRESS). Either way this process alone writes predictions.jsonl
(each question once; rows arrive in the order they finish).
"""


def register(subparsers) -> None:
    p = subparsers.add_parser("bench", help="run a benchmark suite; resumable; writes a report",
                              description=__doc__, epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("suite", nargs="?", help="suite TOML (benchmarks/*.toml); omit to describe one by flags")
    p.add_argument("--out", help="results directory (default results/<suite name>)")
    p.add_argument("--limit", type=int, help="evaluate the first N questions of each run")
    p.add_argument("--seed", type=int, help="seed for randomised selectors and subsets")
    p.add_argument("--selection-only", action="store_true", help="no LM: selection-quality metrics only")
    p.add_argument("--lm", help="override the model of every run (LiteLLM model string)")
    p.add_argument("--api-base", help="server address for OpenAI-compatible models")
    p.add_argument("--no-cache", action="store_true", help="bypass DSPy's LM response cache")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.add_argument("--rescore", action="store_true",
                   help="re-score the stored answers with the current metrics (no LM call, no compile), "
                        "rewrite predictions.jsonl and the report; use after a metric fix")
    p.add_argument("--retry-errors", action="store_true",
                   help="ask again every question whose row has an error (transient LM failures are always "
                        "asked again); the new row replaces the old one")
    p.add_argument("--allow-mixed", action="store_true",
                   help="add rows to a results directory whose rows came from other code, packages or model "
                        "weights (refused by default)")
    p.add_argument("--workers", type=int, metavar="N",
                   help="questions answered at once (default: the suite's num_threads, else 1): threads for API "
                        "models, llama.cpp slots for an embedded local/ model, Ray actors with --ray")
    p.add_argument("--ray", nargs="?", const="", metavar="ADDRESS",
                   help="answer on a Ray cluster (pip install 'knapsack-dspy[ray]'): no ADDRESS starts a local one "
                        "for the run; 'auto', ray://HOST:10001 or HOST:6379 joins a running cluster (put SUITE "
                        "first, or write --ray=ADDRESS)")
    p.add_argument("--reuse", nargs="+", metavar="DIR", default=[],
                   help="answer every prompt an earlier run recorded (its rows' prompt fingerprints and replies; "
                        "older rows' single program or extraction reply rebuilt) from that reply, without the "
                        "model; other prompts are asked (today's code does everything after the LM)")
    p.add_argument("--replay-only", action="store_true",
                   help="with --reuse: never ask the model; a prompt no row recorded gets an error row")
    p.add_argument("--verify", type=int, metavar="N", default=0,
                   help="with --reuse: ask the model too for the first N prompts that have a recorded reply (their "
                        "live reply is kept) and report how many replies were identical (replay_check.json in the "
                        "results directory); replayed rows stand in for live ones only when all N are")
    p.add_argument("--timeout", type=float, metavar="SECONDS",
                   help="seconds per LM attempt, for every run (default: the suite's 'timeout', else 120; "
                        "local/ models: 600 of generation)")
    p.add_argument("--num-retries", type=int, metavar="N",
                   help="LM retries on transient failures, for every run (default: the suite's "
                        "'num_retries', else 3; local/ models: 0)")
    flags = p.add_argument_group("a suite by flags (when no SUITE file is given)")
    dataset = flags.add_argument("--dataset", default="tatqa",
                                 help="a registered task: %(registered)s (default %(default)s)")
    dataset.registered = ShownWhenAsked(registered_tasks)  # the tasks found, read when help is shown
    flags.add_argument("--pipelines", default="pot", help="comma-separated: pot, cot, few_shot, zero_shot")
    flags.add_argument("--selectors", default="seer,kate,random",
                       help="comma-separated: seer, seer_gold, kate, diverse_kate, random, fixed, csp, static, hybrid")
    flags.add_argument("--budgets", default=_run_default("budget"),
                       help="comma-separated prompt token budgets (default %(default)s)")
    flags.add_argument("--max-exemplars", default=_run_default("max_exemplars"),
                       help="comma-separated values of M (default %(default)s)")
    flags.add_argument("--name", default="adhoc", help="suite name (results/<name> by default)")
    add_mlflow_options(p, "the results directory")
    add_data_options(p)
    p.set_defaults(func=run)


def _run_default(name: str) -> SettingDefault:
    """A suite run's default of ``name`` (``RunSpec``: the selection settings' are ``SelectionConfig``'s)."""
    def read():
        from knapsack_dspy.bench.suites.suite import RunSpec

        return getattr(RunSpec(), name)

    return SettingDefault(read)


def run(args) -> int:
    from knapsack_dspy.bench.suites.suite import SuiteError, load_suite, suite_from_dict

    data_dir = resolve_data_dir(args)
    if args.workers is not None and args.workers < 1:
        raise UserError(f"--workers must be 1 or more, got {args.workers}")
    if args.ray and not args.suite and Path(args.ray).is_file():  # "--ray suite.toml": the file is the suite
        args.suite, args.ray = args.ray, ""
    try:
        if args.suite:
            suite = load_suite(args.suite)
        else:
            chosen = given(args, ["budgets", "max_exemplars"])  # the others: the runs' defaults
            grid = {key: parse_list(chosen[option], int) for key, option in (("budget", "budgets"),
                                                                            ("max_exemplars", "max_exemplars"))
                    if option in chosen}
            suite = suite_from_dict({
                "name": args.name, "dataset": args.dataset, "pipeline": parse_list(args.pipelines),
                "selector": parse_list(args.selectors), **grid, **({"model": args.lm} if args.lm else {})})
    except SuiteError as exc:
        raise UserError(str(exc)) from None
    overrides = {key: value for key, value in (("model", args.lm), ("api_base", args.api_base),
                                               ("timeout", args.timeout), ("num_retries", args.num_retries))
                 if value is not None and value != ""}
    if args.timeout is not None and not args.timeout > 0:
        raise UserError(f"--timeout must be a positive number of seconds, got {args.timeout}")
    if args.num_retries is not None and args.num_retries < 0:
        raise UserError(f"--num-retries must be 0 or more, got {args.num_retries}")
    if overrides:
        from dataclasses import replace

        suite.runs = [replace(r, **overrides) for r in suite.runs]
    out = Path(args.out or suite.output or Path("results") / suite.name)
    if args.mlflow and args.mlflow.endswith(".toml") and not args.suite:
        raise UserError(f"--mlflow took {args.mlflow!r} as its store; put the suite first: "
                        f"kdspy bench {args.mlflow} --mlflow")
    _check_reuse_options(args)
    if not args.rescore:
        _check_lm_setup(args, suite)
    tags = {"kdspy.command": "bench" + (" --rescore" if args.rescore else ""), "kdspy.results": str(out.resolve())}
    with mlflow_session(args, out, experiment=suite.name, run_name=suite.name, tags=tags) as tracking:
        return _run_and_report(args, suite, out, data_dir, tracking)


def _check_reuse_options(args) -> None:
    """``--reuse`` / ``--replay-only`` / ``--verify`` together, checked before anything runs."""
    if args.verify < 0:
        raise UserError(f"--verify takes a number of prompts >= 0, got {args.verify}")
    if not args.reuse:
        if args.replay_only:
            raise UserError("--replay-only needs --reuse DIR (the results whose replies answer the prompts)")
        if args.verify:
            raise UserError("--verify needs --reuse DIR (the results whose replies it checks)")
        return
    if args.verify and args.replay_only:
        raise UserError("--verify asks the model: it cannot be combined with --replay-only")
    if args.ray is not None:
        raise UserError("--reuse answers in this process: it cannot be combined with --ray")


def _reusing(args):
    """``--reuse DIR ...``: the recorded replies of those results answer the prompts they recorded (a context
    manager; a no-op without ``--reuse``)."""
    from contextlib import nullcontext

    if not args.reuse:  # the options were checked before anything ran (_check_reuse_options)
        return nullcontext()
    from knapsack_dspy.bench.results.recorded_rows import recorded_replies
    from knapsack_dspy.bench.results.store import ResultsFileError
    from knapsack_dspy.llm.recorded_replies import replaying

    try:
        recorded = recorded_replies(args.reuse)
    except ResultsFileError as exc:
        raise UserError(f"--reuse: {exc}") from None
    print(f"--reuse: {recorded.summary()}")
    if not args.replay_only:
        return replaying(recorded.replies, keyed=recorded.keyed, verify=args.verify)
    return _replaying_only(recorded)


@contextmanager
def _replaying_only(recorded):
    """``--replay-only``: recorded replies answer, and nothing contacts a model's server -- its token counts
    included: a served model is counted as without one (an estimate; docs/llm.md, "Serving a model")."""
    from knapsack_dspy.llm.recorded_replies import replaying
    from knapsack_dspy.llm.served_models import without_servers

    with without_servers(), replaying(recorded.replies, keyed=recorded.keyed, only=True) as check:
        yield check


def _check_lm_setup(args, suite) -> None:
    """Point the caches, and check every run's model configuration (a one-line error before any work)."""
    needs_lm = not args.selection_only and any(not r.selection_only for r in suite.runs)
    setup_caches(args, lm=needs_lm)
    if needs_lm and not args.replay_only:  # a replay never asks the model: nothing to check
        from knapsack_dspy.llm import LLMConfigError, check_lm_config

        for model, api_base in sorted({(r.model, r.api_base) for r in suite.runs if not r.selection_only}):
            try:
                check_lm_config(model, api_base=api_base or None)
            except LLMConfigError as exc:
                raise UserError(str(exc)) from None


def _run_and_report(args, suite, out: Path, data_dir, tracking) -> int:
    from knapsack_dspy.bench.execution.runner import run_suite

    if args.rescore:
        code = _rescore(out, suite.name, data_dir)
        if tracking is not None:
            _log_to_mlflow(args, suite, out, data_dir)
        return code
    with _reusing(args) as check:
        metrics = run_suite(suite, out, data_dir=data_dir, limit=args.limit, seed=args.seed,
                            selection_only=True if args.selection_only else None, progress=not args.quiet,
                            retry_errors=args.retry_errors, allow_mixed=args.allow_mixed, workers=args.workers,
                            ray=args.ray)
    code = _print_results(out, len(metrics))
    if check is not None and check.wanted:  # run_suite kept it beside the rows (replay_check.json)
        print(check.summary())
    if tracking is not None:
        _log_to_mlflow(args, suite, out, data_dir)
    not_asked = sum(m.get("could_not_ask", 0) for m in metrics.values())
    if not_asked:
        transient = sum(m.get("could_not_ask_transient", 0) for m in metrics.values())
        rows = sum(m["n"] for m in metrics.values())
        raise UserError(f"{not_asked} of {rows} questions could not be asked ({transient} transient "
                        "failures: run the same command again to retry them; the others need --retry-errors "
                        f"after a fix); see 'could not ask' in {out / 'report.md'} and 'error' in "
                        f"{out / 'predictions.jsonl'}")
    return code


def _rescore(out: Path, suite_name: str, data_dir) -> int:
    from knapsack_dspy.bench.reporting.rescoring import RescoreError, rescore_results

    try:
        counts = rescore_results(out, data_dir=data_dir, suite_name=suite_name)
    except RescoreError as exc:
        raise UserError(str(exc)) from None
    return _print_results(out, counts["runs"])


def _log_to_mlflow(args, suite, out: Path, data_dir) -> None:
    """Write the per-question page, then log the suite, its runs and the results into the active MLflow run."""
    import json

    from knapsack_dspy.bench.programs.run_program import saved_program_path
    from knapsack_dspy.bench.reporting.mlflow_tracking import log_bench_results
    from knapsack_dspy.bench.reporting.results_page import write_results_page

    outcome = write_results_page(out, data_dir=data_dir, log=lambda message: None)
    programs, reports = {}, {}
    for run, m in outcome.report.metrics.items():
        path = saved_program_path(out, run, m["spec"])
        programs[run] = path
        report_file = path.with_suffix(".report.json")
        if report_file.is_file():
            reports[run] = json.loads(report_file.read_text())
    params = {"suite": suite.name, "suite_source": suite.source or "(flags)", "runs": len(suite.runs),
              "results": str(out), **{k: getattr(args, k) for k in ("limit", "seed", "lm", "selection_only", "rescore",
                                                                  "retry_errors", "allow_mixed")
                                      if getattr(args, k) not in (None, False)}}
    log_bench_results(out, outcome.report.metrics, outcome.report.comparisons, params, programs, reports)
    print(f"logged to MLflow: experiment {args.mlflow_experiment or suite.name}; page {outcome.page}")


def _print_results(out: Path, runs: int) -> int:
    from knapsack_dspy.bench.results.store import rows_file

    print((out / "report.md").read_text())
    print(f"results: {out}/ ({rows_file(out).name}, metrics.json, report.md, plots); {runs} runs")
    return 0
