"""Re-score a results directory with the current metrics: no LM call, no compile.

Each stored row keeps what the model produced (``answer``, ``scale``, ``output``); its score fields
(``gold``, ``em``, ``f1``, ``correct``, ...) are recomputed from those with
:func:`knapsack_dspy.bench.scoring.score_prediction`, against the examples of the row's eval split. Use it
after a metric fix: the LM work is kept, only the judgement is redone. The model-free selection-quality fields
(``gold_case_hit``, ``program_score``, ``attribute_match.*``) are recomputed too, for the runs whose compiled
program is still in ``<dir>/programs/`` (it holds the pool's programs and attributes); selection-only rows
get only that. The file is rewritten atomically (a temporary file with the original's permissions, then a
rename; committed rows, ``predictions.jsonl.gz`` alone, are rewritten gzipped), and only when a row changed,
under the directory's lock (``results_lock``), so it cannot race a running ``kdspy bench``; the report is rebuilt
under the same lock.
"""

from __future__ import annotations

import gzip
import json
import os
import tempfile
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

from knapsack_dspy.bench.question_facts import eval_split_of, facts_of
from knapsack_dspy.bench.report import write_report
from knapsack_dspy.bench.results_lock import results_lock
from knapsack_dspy.bench.results_store import COMPRESSED_ROWS_FILE, ROWS_FILE, ResultsStore, read_rows, rows_file
from knapsack_dspy.bench.runner import load_split, saved_program_path
from knapsack_dspy.bench.scoring import score_prediction, selection_quality
from knapsack_dspy.modules.pipeline import load_program

#: Fields that say whether a row is right (what "changed" counts).
VERDICT_FIELDS = ("em", "f1", "correct")
#: Row fields ``score_prediction`` writes (whichever the dataset uses).
SCORE_FIELDS = ("gold", "gold_scale", "em", "f1", "correct", "program_correct", "program_check",
                "kdspy_lenient", "lenient", "within_10pct", "authors_rule", "case_type",
                "score_error")  # "lenient": the old name of kdspy_lenient
#: Row fields of the model-free selection quality (``bench.scoring.selection_quality``).
SELECTION_FIELDS = ("gold_case_hit", "program_score")
_SELECTION_PREFIX = "attribute_match."
# Pipelines whose ``output`` is a program the FinQA metric executes (the others' output is reasoning text).
_PROGRAM_PIPELINES = ("pot", "python_pot", "finqa_pot")


class RescoreError(ValueError):
    """The results cannot be re-scored (no such file, or rows whose questions are not in their split)."""


def _prediction(row: dict) -> SimpleNamespace:
    spec = row.get("spec") or {}
    program = row.get("output") if spec.get("pipeline") in _PROGRAM_PIPELINES else None
    language = "python" if spec.get("pipeline") == "python_pot" else "finqa"  # "pot" on FinQA writes the DSL
    return SimpleNamespace(answer=row.get("answer"), scale=row.get("scale"), program=program, language=language)


def rescore_row(row: dict, example) -> dict:
    """``row`` with its score fields recomputed against ``example`` (a new dict; the input is not changed)."""
    fresh = {key: value for key, value in row.items() if key not in SCORE_FIELDS}
    fresh.update(score_prediction(example, _prediction(row)))
    return fresh


def reselect_quality(row: dict, select, example) -> dict:
    """``row`` with its selection-quality fields recomputed for its stored ``exemplar_ids`` (a new dict)."""
    fresh = {key: value for key, value in row.items()
             if key not in SELECTION_FIELDS and not key.startswith(_SELECTION_PREFIX)}
    fresh.update(selection_quality(select, example, row.get("exemplar_ids") or []))
    return fresh


def _selection_of(out_dir: Path, row: dict, loaded: dict):
    """The compiled program's ``SelectExemplars`` of the row's run, or None when it is not saved."""
    run = row.get("run")
    if run not in loaded:
        path = saved_program_path(out_dir, run, row.get("spec") or {})
        loaded[run] = load_program(path).select if path.is_file() else None
    return loaded[run]


def _write_atomically(path: Path, rows: list[dict]) -> None:
    """``rows`` in place of ``path``, in its form (a ``.gz`` stays gzipped), atomically."""
    mode = path.stat().st_mode & 0o7777
    handle, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
    try:
        os.chmod(tmp, mode)  # mkstemp makes it 0600
        with os.fdopen(handle, "wb") as raw:
            out = gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) if path.name.endswith(".gz") else raw
            for row in rows:
                out.write((json.dumps(row, ensure_ascii=False, default=str) + "\n").encode("utf-8"))
            if out is not raw:
                out.close()  # writes the gzip trailer; the file itself stays open
            raw.flush()
            os.fsync(raw.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def rescore_results(out_dir: str | os.PathLike, *, data_dir=None, suite_name: str | None = None,
                    log: Callable[[str], None] = print) -> dict:
    """Re-score ``out_dir/predictions.jsonl`` in place (and, given ``suite_name``, rebuild the report). Returns
    counts: ``rows``, ``rescored`` (rows with an answer), ``changed`` (rows whose EM / F1 / correctness
    changed), ``reselected`` (rows whose selection quality changed), ``updated`` (rows rewritten for any
    reason, e.g. a ``gold`` an error row lacked), per run how many rows became right / wrong (``gained`` /
    ``lost``), and ``runs`` (runs in the report, when one was written).
    Raises ``ResultsBusyError`` while a bench writes the directory."""
    path = rows_file(out_dir)  # predictions.jsonl, or the committed predictions.jsonl.gz (rewritten gzipped)
    if not path.is_file():
        raise RescoreError(f"{path} does not exist (nor {COMPRESSED_ROWS_FILE}): nothing to re-score")
    with results_lock(out_dir):
        counts, rows, facts = _rescore_locked(path, data_dir, log)
        if suite_name is not None:
            counts["runs"] = len(write_report(rows, Path(out_dir), suite_name, facts=facts))
    return counts


def _rescore_locked(path: Path, data_dir, log: Callable[[str], None]) -> tuple[dict, list[dict], dict]:
    if path.name == ROWS_FILE:
        with ResultsStore(path, fsync=False) as store:  # repairs a torn last line
            rows = list(store.rows())
    else:
        rows = read_rows(path)
    examples_by_split: dict[tuple, dict] = {}
    selections: dict = {}
    result, missing = [], Counter()
    gained, lost = Counter(), Counter()
    rescored = changed = updated = reselected = 0
    for row in rows:
        spec = row.get("spec") or {}
        answered = not spec.get("selection_only") and "answer" in row
        if not answered and not row.get("exemplar_ids"):
            result.append(row)
            continue
        key = (spec.get("dataset"), spec.get("eval_split"), spec.get("eval_path"))
        if key not in examples_by_split:
            examples_by_split[key] = {ex.id: ex for ex in load_split(eval_split_of(spec), "eval", data_dir)}
        example = examples_by_split[key].get(row.get("example_id"))
        if example is None:
            missing[key] += 1
            result.append(row)
            continue
        fresh = row
        select = _selection_of(path.parent, row, selections) if row.get("exemplar_ids") else None
        if select is not None:
            fresh = reselect_quality(row, select, example)
            reselected += fresh != row
        if answered:
            fresh = rescore_row(fresh, example)
            rescored += 1
        updated += fresh != row
        if answered and any(fresh.get(field) != row.get(field) for field in VERDICT_FIELDS):
            changed += 1
            if fresh.get("correct") and not row.get("correct"):
                gained[row.get("run")] += 1
            elif row.get("correct") and not fresh.get("correct"):
                lost[row.get("run")] += 1
        result.append(fresh)
    if missing:
        where = "; ".join(f"{n} rows of {k[0]} {k[2] or k[1]}" for k, n in missing.items())
        raise RescoreError(f"questions not found in their eval split ({where}); wrong --data-dir? "
                           "nothing was changed")
    if updated:
        _write_atomically(path, result)
    for run in sorted(set(gained) | set(lost)):
        log(f"  {run}: {gained[run]} rows now correct, {lost[run]} no longer")
    log(f"re-scored {rescored} of {len(rows)} rows: {changed} scores changed"
        + (f"; selection quality changed in {reselected} rows" if reselected else "")
        + (f"; {updated} rows rewritten" if updated else " (file left as it was)"))
    ids = {str(row.get("example_id")) for row in rows}
    facts = {}  # the questions' text and gold attributes, for the report (rows do not hold them)
    for (dataset, _, _), examples in examples_by_split.items():
        facts.update(facts_of(examples.values(), str(dataset or ""), ids))
    return ({"rows": len(rows), "rescored": rescored, "changed": changed, "updated": updated,
             "reselected": reselected, "gained": dict(gained), "lost": dict(lost)}, result, facts)
