"""A suite run whose selector is one of DSPy's optimizers (``bench/programs/dspy_baselines.py``): what the runner calls
instead of compiling with ``KnapsackFewShot``, and the checks made before a suite starts."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import dspy

from knapsack_dspy.bench.programs.dspy_baselines import BaselineProgram, compile_baseline
from knapsack_dspy.bench.scoring.example_scores import correctness_metric
from knapsack_dspy.bench.suites.baseline_names import DSPY_BASELINES, is_dspy_baseline, needs_lm
from knapsack_dspy.bench.suites.suite import SuiteError
from knapsack_dspy.docqa.metrics.selection_proxies import pool_view
from knapsack_dspy.llm.call_counter import call_counts

__all__ = ["check_baseline_runs", "compile_baseline_run", "wants_validation_slice"]


def check_baseline_runs(specs: Sequence, selection_only: bool | None, ray: str | None) -> None:
    """Said before anything runs: a DSPy baseline that compiles with an LM cannot run selection-only, and no
    baseline runs on Ray workers (they rebuild a program from its JSON state, and a baseline's demos live in
    DSPy's optimizer, not in that state)."""
    wrong = sorted({s.selector for s in specs if is_dspy_baseline(s.selector) and needs_lm(s.selector)
                    and (s.selection_only if selection_only is None else selection_only)})
    if wrong:
        raise SuiteError(f"{', '.join(wrong)} compile{'s' if len(wrong) == 1 else ''} with an LM (DSPy's optimizer "
                         "runs the program): not in a selection-only run; the LM-free baselines are "
                         f"{', '.join(n for n in DSPY_BASELINES if not needs_lm(n))}")
    baselines = sorted({s.selector for s in specs if is_dspy_baseline(s.selector)})
    if baselines and ray is not None:
        raise SuiteError(f"{', '.join(baselines)}: DSPy's optimizers run in this process only (their programs "
                         "cannot be shipped to Ray workers); use --workers N (threads) instead of --ray")


def wants_validation_slice(spec) -> bool:
    """Whether a baseline run searches with an LM on validation queries (BootstrapFewShotWithRandomSearch,
    MIPROv2)."""
    return needs_lm(spec.selector)


def compile_baseline_run(spec, make_student: Callable, pool, valset, path: Path, lm) -> tuple[BaselineProgram, dict]:
    """The run's program compiled by DSPy's optimizer ``spec.selector``. The LM-free ones are rebuilt (cheap and
    deterministic); the others are compiled once with the run's ``lm``, saved at ``path`` (and a report beside
    it), and reloaded into a fresh student (``make_student()``) by later runs. Returns (program, report)."""
    student = make_student()
    report_path = path.with_suffix(".report.json")
    if needs_lm(spec.selector) and path.exists():
        program = make_student()
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
    wrapped = BaselineProgram(program, pool=pool_view(pool, spec.attributes), counter=student.token_counter,
                              budget=spec.budget, reserve_output_tokens=spec.reserve_output_tokens, report=report)
    return wrapped, report
