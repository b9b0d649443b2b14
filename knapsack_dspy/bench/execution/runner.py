"""Run a suite: compile each run's program once, answer each example once, append results as they come.

Resumable: every finished example is one flushed line in ``predictions.jsonl``; a re-run skips the
(run, example) pairs already there, and compiled programs are saved under ``programs/`` and reloaded.
One failing example (LM error, unparsable output, execution error) is recorded and counted wrong; the
run goes on. Rows whose LM call failed transiently (rate limit, 5xx, timeout, connection) are asked again by
the next run of the same command, and every error row with ``retry_errors``; the new row replaces the old one.
With the LM cache, a finished run re-run makes zero LM calls.

Every row records its provenance (``bench.results.provenance``); rows of a different origin than those already in
the directory are refused (``ProvenanceMismatchError``) unless ``allow_mixed``.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Iterator
from dataclasses import asdict
from pathlib import Path

import dspy
from tqdm.auto import tqdm

from knapsack_dspy.bench.execution.dispatch import write_rows
from knapsack_dspy.bench.execution.local_workers import InlineWorkers, ThreadWorkers
from knapsack_dspy.bench.execution.question_order import cache_friendly_order
from knapsack_dspy.bench.execution.ray_workers import RayWorkers, WorkerSetup
from knapsack_dspy.bench.execution.run_job import RunJob, Task, default_lm, spec_provenance
from knapsack_dspy.bench.programs import run_program
from knapsack_dspy.bench.programs.baseline_runs import check_baseline_runs
from knapsack_dspy.bench.reporting.report import write_report
from knapsack_dspy.bench.results.lock import results_lock
from knapsack_dspy.bench.results.provenance import ProvenanceMismatchError, provenance_conflict, provenance_difference
from knapsack_dspy.bench.results.question_facts import facts_of
from knapsack_dspy.bench.results.row_outcomes import redo_on_resume
from knapsack_dspy.bench.results.row_schema import ResultRow
from knapsack_dspy.bench.results.store import ResultsStore, results_write_error
from knapsack_dspy.bench.suites.chosen_questions import chosen_examples
from knapsack_dspy.bench.suites.suite import RunSpec, Suite, SuiteError
from knapsack_dspy.llm.local_models import is_local_model
from knapsack_dspy.llm.local_server import request_slots
from knapsack_dspy.llm.recorded_replies import REPLAY_CHECK_FILE, active_check, replaying_now
from knapsack_dspy.llm.served_models import note_served_model
from knapsack_dspy.modules.compile_hooks import PrefetchesEmbeddings
from knapsack_dspy.paths import portable_path


def _progress(total: int, desc: str, enabled: bool):
    return tqdm(total=total, desc=desc, unit="ex", dynamic_ncols=True) if enabled else None


def run_suite(suite: Suite, out_dir: str | Path, *, data_dir=None, limit: int | None = None,
              seed: int | None = None, selection_only: bool | None = None, progress: bool = True,
              embedder=None, token_counter_factory: Callable | None = None, lm_factory: Callable | None = None,
              log: Callable[[str], None] = print, retry_errors: bool = False,
              allow_mixed: bool = False, workers: int | None = None, ray: str | None = None) -> dict:
    """Run every run of the suite into ``out_dir``; returns the aggregated metrics. Holds ``out_dir``'s lock
    (``results_lock``): a second process on the same directory fails at once with ``ResultsBusyError``.
    ``retry_errors``: answer again every example whose row has an error (transient failures always are).
    ``allow_mixed``: add rows even when their provenance differs from the rows already there.
    ``workers``: examples answered at once (None: the suite's ``num_threads``, the largest of its runs): threads
    of this process, or with ``ray`` actors on a Ray cluster (``ray``: ``""`` a local cluster started for the
    run, ``"auto"`` / ``"ray://host:10001"`` / ``"host:6379"`` an existing one; None: no Ray). Either way this
    process is the only writer of ``predictions.jsonl``, the work is sharded by (run, example) and each run's
    program is compiled once, here."""
    out_dir = Path(out_dir)
    count = _worker_count(suite, workers)
    check_baseline_runs(suite.runs, selection_only, ray)
    redo = functools.partial(redo_on_resume, retry_errors=retry_errors)
    with results_lock(out_dir), ResultsStore(out_dir / "predictions.jsonl", redo=redo) as store:
        suite_file = out_dir / "suite.json"
        try:
            runs = [asdict(r) for r in suite.runs]
            source = portable_path(suite.source) if suite.source else suite.source  # no path of this machine
            suite_file.write_text(json.dumps({"name": suite.name, "source": source, "runs": runs},
                                             indent=2, default=str))
        except OSError as exc:
            raise results_write_error(suite_file, exc) from None
        overrides = {key: value for key, value in (("limit", limit), ("seed", seed),
                                                   ("selection_only", selection_only)) if value is not None}
        specs = [RunSpec(**{**asdict(spec), **overrides}) if overrides else spec for spec in suite.runs]
        facts: dict = {}  # the questions' text and gold attributes, for the report (rows do not hold them)
        plan = _plan(specs, store, data_dir, retry_errors, log, facts)
        provenances = {}
        for spec, _, todo in plan:
            if not todo:
                continue
            provenance = spec_provenance(spec)
            conflict = None if allow_mixed else provenance_conflict(store.rows(), spec.key, provenance)
            if conflict:
                raise ProvenanceMismatchError(f"{store.path}: {conflict}; write this run elsewhere with "
                                              "--out, or pass --allow-mixed to add its rows anyway")
            provenances[spec.key] = provenance
        total = sum(len(todo) for _, _, todo in plan)
        if total:
            pool = _workers(count, ray, plan, embedder, token_counter_factory, lm_factory, log)
            tasks = _tasks(plan, provenances, out_dir, data_dir, embedder, token_counter_factory, lm_factory,
                           progress, log)
            bar = _progress(total, "questions", progress)
            try:
                write_rows(tasks, pool, store, check=None if allow_mixed else _same_origin(store.path),
                           on_row=None if bar is None else lambda task, row: bar.update(1))
            finally:
                if bar is not None:
                    bar.close()
        try:
            _write_replay_check(out_dir)
            return write_report(list(store.rows()), out_dir, suite.name, facts=facts)
        except OSError as exc:
            raise results_write_error(Path(exc.filename or out_dir), exc) from None


def _write_replay_check(out_dir: Path) -> None:
    """``--reuse --verify N``: the agreement of the re-asked recorded replies, beside the rows (the report reads
    it). A run that replayed without re-asking anything removes an earlier run's file: it no longer describes
    every replayed row."""
    check = active_check()
    path = out_dir / REPLAY_CHECK_FILE
    if check is not None and check.asked:
        path.write_text(json.dumps(check.to_dict(), indent=1, ensure_ascii=False) + "\n")
    elif replaying_now() and path.exists():
        path.unlink()


def _worker_count(suite: Suite, workers: int | None) -> int:
    """``workers``, else the suite's ``num_threads`` (the largest of its runs); at least 1."""
    count = workers if workers is not None else max((spec.num_threads for spec in suite.runs), default=1)
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        source = "workers" if workers is not None else f"{suite.source}: num_threads"
        raise SuiteError(f"{source} must be a whole number of at least 1, got {count!r}")
    return count


def _plan(specs: list[RunSpec], store, data_dir, retry_errors: bool, log, facts: dict) -> list[tuple]:
    """(spec, its eval split, examples still to answer) of every run, in order; one log line per run. Adds the
    facts of every chosen question (answered or not) to ``facts``."""
    plan, evalsets = [], {}
    what = "errors" if retry_errors else "transient failures"
    for number, spec in enumerate(specs, 1):
        key = (spec.dataset, spec.eval_split, spec.eval_path)
        if key not in evalsets:
            evalsets[key] = run_program.load_split(spec, "eval", data_dir)
        examples = chosen_examples(evalsets[key], spec)
        facts.update(facts_of(examples, spec.dataset))
        todo = [ex for ex in examples if not store.done(spec.key, ex.id)]
        again = sum(store.to_redo(spec.key, ex.id) for ex in todo)
        log(f"[{number}/{len(specs)}] {spec.key}: {len(examples) - len(todo)} done, {len(todo)} to go"
            + (f" ({again} asked again: {what} last time)" if again else ""))
        plan.append((spec, evalsets[key], todo))
    return plan


def _tasks(plan, provenances: dict, out_dir: Path, data_dir, embedder, token_counter_factory, lm_factory,
           progress: bool, log) -> Iterator[Task]:
    """Every (run, example) to answer, run by run (within a run in ``cache_friendly_order``); a run's program is
    compiled (or reloaded) when the first of its examples is asked for, while the workers answer the run
    before."""
    pools: dict = {}
    for spec, evalset, todo in plan:
        if not todo:
            continue
        key = (spec.dataset, spec.pool_dataset, spec.pool_split, spec.pool_path, spec.eval_split, spec.eval_path)
        if key not in pools:
            pool = run_program.load_split(spec, "pool", data_dir)
            if spec.pool_dataset and spec.pool_dataset != spec.dataset:
                kept = run_program.without_eval_questions(pool, evalset)
                log(f"pool {spec.pool_dataset}: {len(pool) - len(kept)} examples ask an eval question "
                    f"and are left out")
                pool = kept
            pools = {key: pool}
        pool = pools[key]
        note_served_model(spec.model, spec.api_base)  # its server counts its tokens, selection-only runs included
        counter = token_counter_factory(spec.model) if token_counter_factory else None
        lm = None if spec.selection_only else (lm_factory(spec) if lm_factory else default_lm(spec))
        program, _ = run_program.compile_program(spec, pool, run_program.validation_slice(pool, spec), out_dir,
                                                 embedder=embedder, token_counter=counter, progress=progress,
                                                 lm=lm)
        if isinstance(program, PrefetchesEmbeddings):
            program.prefetch_embeddings(todo, progress=progress)
        if not spec.selection_only:
            todo = cache_friendly_order(program, todo)
        job = RunJob.for_run(spec, program, lm, provenances[spec.key])
        for example in todo:
            yield Task(job, example)


def _workers(count: int, ray: str | None, plan, embedder, token_counter_factory, lm_factory, log):
    """The workers that answer the tasks: this process (1), threads (``count``), or Ray actors."""
    local = any(is_local_model(spec.model) and not spec.selection_only for spec, _, todo in plan if todo)
    if ray is None:
        if count == 1:
            return InlineWorkers()
        if local:  # one embedded model in this process, decoding the workers' calls as one batch
            request_slots(count)
        return ThreadWorkers(count)
    cache = dspy.cache
    setup = WorkerSetup(embedder=embedder, token_counter_factory=token_counter_factory, lm_factory=lm_factory,
                        lm_cache=bool(getattr(cache, "enable_disk_cache", False)
                                      or getattr(cache, "enable_memory_cache", False)),
                        adapter=dspy.settings.adapter)
    workers = RayWorkers(count, address=ray or None, setup=setup, local_model=local, log=log)
    log(f"Ray: {workers.capacity} workers ready in {workers.startup_s:.1f} s")
    return workers


def _same_origin(path: Path) -> Callable:
    """A row check: a worker's row must come from the same code, packages and model as the driver's."""
    def check(task: Task, row: ResultRow) -> None:
        expected = task.job.fields["provenance"]
        found = row.provenance
        if found != expected:
            difference = provenance_difference(expected, found)
            hint = "install the same code and packages on every node"
            if isinstance(found, dict) and {**found, "code": expected["code"]} == expected and (
                    found["code"].get("commit") == expected["code"].get("commit")):
                hint = "the working tree changed after this run started (a worker imported it later)"
            raise ProvenanceMismatchError(f"{path}: a worker's rows come from another origin than this run's "
                                          f"({difference}); {hint}, or pass --allow-mixed to add its rows anyway")
    return check
