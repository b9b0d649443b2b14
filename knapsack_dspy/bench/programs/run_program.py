"""A run's program: its data splits, and compiling it (or reloading it from the results directory).

``compile_program`` compiles the run's pipeline with ``KnapsackFewShot`` (or, for the DSPy baselines, DSPy's own
optimizer: ``bench/programs/baseline_runs.py``) and saves it under ``<results>/programs/``; a later run of the same
suite, ``kdspy report`` (the results page's prompts) and ``kdspy bench --rescore`` reload it from there.
"""

from __future__ import annotations

import hashlib
import json
import random
from pathlib import Path
from types import SimpleNamespace

from knapsack_dspy.bench.programs.baseline_runs import compile_baseline_run, wants_validation_slice
from knapsack_dspy.bench.suites.baseline_names import is_dspy_baseline
from knapsack_dspy.bench.suites.chosen_questions import load_split  # noqa: F401  (run_program.load_split)
from knapsack_dspy.bench.suites.suite import RunSpec
from knapsack_dspy.docqa.pipelines.pipeline import load_program, save_program
from knapsack_dspy.docqa.tasks import build_pipeline
from knapsack_dspy.teleprompt.knapsack_few_shot import KnapsackFewShot


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


def saved_program_path(out_dir: Path, run: str, spec: dict) -> Path:
    """``program_path`` of a stored row's run (its ``run`` key and ``spec``)."""
    return program_path(Path(out_dir), SimpleNamespace(key=run, selector=spec.get("selector"),
                                                       budget=spec.get("budget"),
                                                       max_exemplars=spec.get("max_exemplars")))


def _student(spec: RunSpec, embedder=None, token_counter=None):
    routing = {"route": spec.route or None}  # the run's route is resolved: "" is none, not the default
    sampling = {"samples": spec.samples, "temperature": spec.temperature} if spec.samples != 1 else {}
    statutes = {"statute_tokens": spec.statute_tokens} if spec.statute_tokens is not None else {}
    evidence = {"evidence_selection": spec.evidence_selection} if spec.evidence_selection != "rules" else {}
    # the run's demo cut is resolved: "all" is the whole demo, not the task's default
    demos = {"demo_table": spec.demo_table, "demo_paragraphs": spec.demo_paragraphs}
    if spec.demo_table != "all":
        demos["demo_table_rows"] = spec.demo_table_rows
    return build_pipeline(dataset=spec.dataset, pipeline=spec.pipeline, selection=spec.selection_config(),
                          top_n_paragraphs=spec.top_n_paragraphs, retrieval=spec.retrieval or None,
                          embedder=embedder, token_counter=token_counter, model=spec.model, **routing, **sampling,
                          **statutes, **demos, **evidence)


def compile_program(spec: RunSpec, pool, valset, out_dir: Path, embedder=None, token_counter=None,
                    progress: bool = True, lm=None):
    """Compile (or reload) the run's program. Returns (program, compile report). ``lm``: the run's LM, for the DSPy
    baselines that need one to compile (``bench/programs/baseline_runs.py``)."""
    path = program_path(out_dir, spec)
    if is_dspy_baseline(spec.selector):
        return compile_baseline_run(spec, lambda: _student(spec, embedder, token_counter), pool, valset, path, lm)
    if path.exists():
        program = load_program(path, embedder=embedder, token_counter=token_counter)
        return program, json.loads(path.with_suffix(".report.json").read_text()) if path.with_suffix(
            ".report.json").exists() else {}
    student = _student(spec, embedder, token_counter)
    tele = KnapsackFewShot(token_counter=student.token_counter, lm_model=spec.model, progress=progress)
    program = tele.compile(student, trainset=pool, valset=valset)
    save_program(program, path)
    return program, program.compile_report


def validation_slice(pool, spec: RunSpec):
    """Validation queries for selectors that fit on them at compile time (static, hybrid, fixed: their class
    declares ``fit_on``) and for the DSPy baselines that search with an LM: a seeded slice of the pool itself
    (never the eval split); selection excludes each query's own id and document, so nothing leaks."""
    wants = (wants_validation_slice(spec) if is_dspy_baseline(spec.selector)
             else spec.selection_config().selector_class.fit_on is not None)
    if not wants or not spec.val_size:
        return None
    rng = random.Random(spec.seed)
    return rng.sample(list(pool), min(spec.val_size, len(pool)))
