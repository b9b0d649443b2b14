"""Run a suite: compile each run's program once, answer each example once, append results as they come.

Resumable: every finished example is one flushed line in ``predictions.jsonl``; a re-run skips the
(run, example) pairs already there, and compiled programs are saved under ``programs/`` and reloaded.
One failing example (LM error, unparsable output, execution error) is recorded and counted wrong; the
run goes on. Rows whose LM call failed transiently (rate limit, 5xx, timeout, connection) are asked again by
the next run of the same command, and every error row with ``retry_errors``; the new row replaces the old one.
With the LM cache, a finished run re-run makes zero LM calls.

Every row records its provenance (``bench.provenance``); rows of a different origin than those already in
the directory are refused (``ProvenanceMismatchError``) unless ``allow_mixed``.
"""

from __future__ import annotations

import functools
import hashlib
import json
import random
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from types import SimpleNamespace

import dspy
from tqdm.auto import tqdm

from knapsack_dspy.bench.dspy_baselines import (
    DSPY_BASELINES,
    BaselineProgram,
    compile_baseline,
    is_dspy_baseline,
    needs_lm,
    pool_view,
)
from knapsack_dspy.bench.example_runner import run_example
from knapsack_dspy.bench.provenance import ProvenanceMismatchError, provenance_conflict, run_provenance
from knapsack_dspy.bench.question_facts import facts_of
from knapsack_dspy.bench.report import write_report
from knapsack_dspy.bench.results_lock import results_lock
from knapsack_dspy.bench.results_store import ResultsStore, results_write_error
from knapsack_dspy.bench.row_outcomes import redo_on_resume
from knapsack_dspy.bench.scoring import correctness_metric
from knapsack_dspy.bench.suite import RunSpec, Suite, SuiteError
from knapsack_dspy.data import load_examples
from knapsack_dspy.llm import make_lm
from knapsack_dspy.llm.call_counter import call_counts
from knapsack_dspy.modules.pipeline import build_pipeline, load_program, save_program
from knapsack_dspy.teleprompt.knapsack_few_shot import KnapsackFewShot


def _progress(total: int, desc: str, enabled: bool):
    return tqdm(total=total, desc=desc, unit="ex", dynamic_ncols=True) if enabled else None


def load_split(spec: RunSpec, which: str, data_dir):
    path = spec.pool_path if which == "pool" else spec.eval_path
    split = spec.pool_split if which == "pool" else spec.eval_split
    dataset = (spec.pool_dataset or spec.dataset) if which == "pool" else spec.dataset
    if path:
        return load_examples(dataset, path=path, data_dir=data_dir)
    return load_examples(dataset, split=split, data_dir=data_dir)


def _question_text(question) -> str:
    return " ".join(str(question or "").casefold().split())


def without_eval_questions(pool, evalset) -> list:
    """The pool without the examples that ask one of the eval questions (same text, case and spacing aside): a
    pool from another data set (FinQA cases for FinQA documents) may hold the very questions asked, under other
    ids and document ids, so selection's own-id / own-document exclusion would not catch them."""
    asked = {_question_text(example.get("question")) for example in evalset}
    return [example for example in pool if _question_text(example.get("question")) not in asked]


def program_path(out_dir: Path, spec: RunSpec) -> Path:
    digest = hashlib.sha1(spec.key.encode()).hexdigest()[:12]
    return out_dir / "programs" / f"{spec.selector}-b{spec.budget}-m{spec.max_exemplars}-{digest}.json"


def _student(spec: RunSpec, embedder=None, token_counter=None):
    routing = {"route": spec.route} if spec.route else {}
    sampling = {"samples": spec.samples, "temperature": spec.temperature} if spec.samples != 1 else {}
    return build_pipeline(dataset=spec.dataset, pipeline=spec.pipeline, selection=spec.selection_config(),
                          top_n_paragraphs=spec.top_n_paragraphs, retrieval=spec.retrieval or None,
                          embedder=embedder, token_counter=token_counter, model=spec.model, **routing, **sampling)


def saved_program_path(out_dir: Path, run: str, spec: dict) -> Path:
    """``program_path`` of a stored row's run (its ``run`` key and ``spec``)."""
    return program_path(Path(out_dir), SimpleNamespace(key=run, selector=spec.get("selector"),
                                                       budget=spec.get("budget"),
                                                       max_exemplars=spec.get("max_exemplars")))


def compile_program(spec: RunSpec, pool, valset, out_dir: Path, embedder=None, token_counter=None,
                    progress: bool = True, lm=None):
    """Compile (or reload) the run's program. Returns (program, compile report). ``lm``: the run's LM, for the DSPy
    baselines that need one to compile."""
    if is_dspy_baseline(spec.selector):
        return _compile_baseline(spec, pool, valset, out_dir, embedder, token_counter, lm)
    path = program_path(out_dir, spec)
    if path.exists():
        program = load_program(path, embedder=embedder, token_counter=token_counter)
        return program, json.loads(path.with_suffix(".report.json").read_text()) if path.with_suffix(
            ".report.json").exists() else {}
    student = _student(spec, embedder, token_counter)
    tele = KnapsackFewShot(token_counter=student.token_counter, lm_model=spec.model, progress=progress)
    program = tele.compile(student, trainset=pool, valset=valset)
    save_program(program, path)
    return program, program.compile_report


def _compile_baseline(spec: RunSpec, pool, valset, out_dir: Path, embedder, token_counter, lm):
    """A run of one of DSPy's optimizers (``bench/dspy_baselines.py``): the LM-free ones are rebuilt (cheap and
    deterministic); the others are compiled once with the run's LM, saved, and reloaded into a fresh student."""
    student = _student(spec, embedder, token_counter)
    counter = student.token_counter
    path = program_path(out_dir, spec)
    report_path = path.with_suffix(".report.json")
    if needs_lm(spec.selector) and path.exists():
        program = _student(spec, embedder, token_counter)
        program.load(str(path))
        report = json.loads(report_path.read_text()) if report_path.exists() else {}
    else:
        started, before = time.perf_counter(), call_counts()
        with dspy.context(**({"lm": lm} if lm is not None else {})):
            program = compile_baseline(spec.selector, student, pool, valset, max_exemplars=spec.max_exemplars,
                                       embedder=student.embedder, metric=correctness_metric, seed=spec.seed,
                                       num_threads=spec.num_threads)
        spent = call_counts() - before
        report = {"baseline": spec.selector, "optimizer": DSPY_BASELINES[spec.selector][1],
                  "pool_size": len(pool), "valset_size": len(valset or []),
                  "cost": {"lm_calls": spent.calls, "lm_cache_hits": spent.cache_hits,
                           "seconds": round(time.perf_counter() - started, 2)}}
        if needs_lm(spec.selector):
            path.parent.mkdir(parents=True, exist_ok=True)
            program.save(str(path))
            report_path.write_text(json.dumps(report, indent=2, default=str))
    wrapped = BaselineProgram(program, pool=pool_view(pool, spec.attributes), counter=counter, budget=spec.budget,
                              reserve_output_tokens=spec.reserve_output_tokens, report=report)
    return wrapped, report


def run_suite(suite: Suite, out_dir: str | Path, *, data_dir=None, limit: int | None = None,
              seed: int | None = None, selection_only: bool | None = None, progress: bool = True,
              embedder=None, token_counter_factory: Callable | None = None, lm_factory: Callable | None = None,
              log: Callable[[str], None] = print, retry_errors: bool = False,
              allow_mixed: bool = False) -> dict:
    """Run every run of the suite into ``out_dir``; returns the aggregated metrics. Holds ``out_dir``'s lock
    (``results_lock``): a second process on the same directory fails at once with ``ResultsBusyError``.
    ``retry_errors``: answer again every example whose row has an error (transient failures always are).
    ``allow_mixed``: add rows even when their provenance differs from the rows already there."""
    out_dir = Path(out_dir)
    _check_lm_needs(suite, selection_only)
    redo = functools.partial(redo_on_resume, retry_errors=retry_errors)
    with results_lock(out_dir), ResultsStore(out_dir / "predictions.jsonl", redo=redo) as store:
        suite_file = out_dir / "suite.json"
        try:
            runs = [asdict(r) for r in suite.runs]
            suite_file.write_text(json.dumps({"name": suite.name, "source": suite.source, "runs": runs},
                                             indent=2, default=str))
        except OSError as exc:
            raise results_write_error(suite_file, exc) from None
        cache: dict = {}
        facts: dict = {}  # the questions' text and gold attributes, for the report (rows do not hold them)
        for number, spec in enumerate(suite.runs, 1):
            overrides = {}
            if limit is not None:
                overrides["limit"] = limit
            if seed is not None:
                overrides["seed"] = seed
            if selection_only is not None:
                overrides["selection_only"] = selection_only
            if overrides:
                spec = RunSpec(**{**asdict(spec), **overrides})
            key = (spec.dataset, spec.pool_dataset, spec.pool_split, spec.pool_path, spec.eval_split, spec.eval_path)
            if key not in cache:
                pool = load_split(spec, "pool", data_dir)
                evalset = load_split(spec, "eval", data_dir)
                if spec.pool_dataset and spec.pool_dataset != spec.dataset:
                    kept = without_eval_questions(pool, evalset)
                    log(f"pool {spec.pool_dataset}: {len(pool) - len(kept)} examples ask an eval question "
                        f"and are left out")
                    pool = kept
                cache = {key: (pool, evalset)}
            pool, evalset = cache[key]
            examples = _chosen_examples(evalset, spec)
            facts.update(facts_of(examples, spec.dataset))
            todo = [ex for ex in examples if not store.done(spec.key, ex.id)]
            again = sum(store.to_redo(spec.key, ex.id) for ex in todo)
            what = "errors" if retry_errors else "transient failures"
            done = len(examples) - len(todo)
            log(f"[{number}/{len(suite.runs)}] {spec.key}: {done} done, {len(todo)} to go"
                + (f" ({again} asked again: {what} last time)" if again else ""))
            if not todo:
                continue
            provenance = run_provenance(None if spec.selection_only else spec.model, adapter=_adapter_name(),
                                        seed=spec.seed)
            conflict = None if allow_mixed else provenance_conflict(store.rows(), spec.key, provenance)
            if conflict:
                raise ProvenanceMismatchError(f"{store.path}: {conflict}; write this run elsewhere with "
                                              "--out, or pass --allow-mixed to add its rows anyway")
            counter = token_counter_factory(spec.model) if token_counter_factory else None
            valset = validation_slice(pool, spec)
            lm = None if spec.selection_only else (lm_factory(spec) if lm_factory else _default_lm(spec))
            program, _ = compile_program(spec, pool, valset, out_dir, embedder=embedder, token_counter=counter,
                                         progress=progress, lm=lm)
            prefetch = getattr(program, "prefetch_embeddings", None)
            if callable(prefetch):
                prefetch(todo, progress=progress)
            if not spec.selection_only:
                todo = cache_friendly_order(program, todo)
            bar = _progress(len(todo), spec.selector, progress)
            spec_fields = {"run": spec.key, "spec": asdict(spec), "provenance": provenance}
            for example in todo:
                run_example(program, example, lm, spec_fields, store, selection_only=spec.selection_only)
                if bar is not None:
                    bar.update(1)
            if bar is not None:
                bar.close()
        try:
            return write_report(list(store.rows()), out_dir, suite.name, facts=facts)
        except OSError as exc:
            raise results_write_error(Path(exc.filename or out_dir), exc) from None


def cache_friendly_order(program, examples: list) -> list:
    """The examples in an order whose consecutive prompts share long prefixes (a server's prompt cache -- the
    embedded model's llama.cpp slot, a provider's automatic prefix caching -- reuses them): grouped by the
    program's ``prompt_group(example)`` (a routed pipeline: the route, whose instructions open the prompt),
    the eval split's order kept within a group (questions of one document are adjacent there and select
    similar demos). Rows are still written and reported per question; only the time changes. Programs without
    ``prompt_group``: the order as given."""
    group = getattr(program, "prompt_group", None)
    if not callable(group):
        return list(examples)
    keys = {id(ex): group(ex) for ex in examples}
    return sorted(examples, key=lambda ex: keys[id(ex)])  # stable: the split's order within a group


def _adapter_name() -> str:
    """The DSPy adapter that formats the prompts (ChatAdapter unless one is configured)."""
    return type(dspy.settings.adapter or dspy.ChatAdapter()).__name__


def _chosen_examples(evalset, spec: RunSpec) -> list:
    """The eval split's questions this run answers: ``example_ids`` (if given, in the split's order), then the
    first ``limit``."""
    examples = list(evalset)
    if spec.example_ids:
        wanted = set(spec.example_ids)
        examples = [ex for ex in examples if ex.id in wanted]
        missing = wanted - {ex.id for ex in examples}
        if missing:
            where = spec.eval_path or spec.eval_split
            raise SuiteError(f"{len(missing)} example_ids are not in {spec.dataset} {where}: "
                             f"{', '.join(sorted(missing)[:5])}{' ...' if len(missing) > 5 else ''}")
    return examples[: spec.limit] if spec.limit else examples


def _check_lm_needs(suite: Suite, selection_only: bool | None) -> None:
    """A DSPy baseline that compiles with an LM cannot run selection-only: said before anything runs."""
    wrong = sorted({r.selector for r in suite.runs if is_dspy_baseline(r.selector) and needs_lm(r.selector)
                    and (r.selection_only if selection_only is None else selection_only)})
    if wrong:
        raise SuiteError(f"{', '.join(wrong)} compile{'s' if len(wrong) == 1 else ''} with an LM (DSPy's optimizer "
                         "runs the program): not in a selection-only run; the LM-free baselines are "
                         f"{', '.join(n for n in DSPY_BASELINES if not needs_lm(n))}")


def validation_slice(pool, spec: RunSpec):
    """Validation queries for selectors that fit on them at compile time (static, hybrid, fixed: their class
    declares ``fit_on``) and for the DSPy baselines that search with an LM: a seeded slice of the pool itself
    (never the eval split); selection excludes each query's own id and document, so nothing leaks."""
    wants = (needs_lm(spec.selector) if is_dspy_baseline(spec.selector)
             else spec.selection_config().selector_class.fit_on is not None)
    if not wants or not spec.val_size:
        return None
    rng = random.Random(spec.seed)
    return rng.sample(list(pool), min(spec.val_size, len(pool)))


def _default_lm(spec: RunSpec):
    return make_lm(spec.model, api_base=spec.api_base or None, max_tokens=spec.max_tokens,
                   timeout=spec.timeout, num_retries=spec.num_retries)
