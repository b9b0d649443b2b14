"""Re-score a results directory with the current metrics: no LM call, no compile.

Each stored row keeps what the model produced (``answer``, ``scale``, ``output``); its score fields
(``gold``, ``em``, ``f1``, ``correct``, ...) are recomputed from those with
:func:`knapsack_dspy.bench.scoring.example_scores.score_prediction`, against the examples of the row's eval split.
Use it after a metric fix: the LM work is kept, only the judgement is redone. The model-free selection-quality fields
(``gold_case_hit``, ``program_score``, ``attribute_match``) are recomputed too, for the runs whose compiled program
is still in ``<dir>/programs/`` (it holds the pool's programs and attributes); selection-only rows get only that.
The file is rewritten atomically (a temporary file with the original's permissions, then a rename; committed rows,
``predictions.jsonl.xz`` / ``.gz`` alone, are rewritten compressed the same way), and only when a row changed, under
the directory's lock (``results_lock``), so it cannot race a running ``kdspy bench``; the report is rebuilt under
the same lock.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable, Mapping
from pathlib import Path
from types import SimpleNamespace

from knapsack_dspy.bench.programs.run_program import load_split, saved_program_path
from knapsack_dspy.bench.reporting.report import write_report
from knapsack_dspy.bench.results.lock import results_lock
from knapsack_dspy.bench.results.question_facts import eval_split_of, facts_of
from knapsack_dspy.bench.results.row_schema import ResultRow, as_row
from knapsack_dspy.bench.results.store import COMPRESSED_ROWS_FILES, ROWS_FILE, ResultsStore, rows_file
from knapsack_dspy.bench.scoring.example_scores import score_prediction, selection_quality
from knapsack_dspy.docqa.pipelines.pipeline import load_program
from knapsack_dspy.docqa.pipelines.recorded_outputs import recorded_prediction
from knapsack_dspy.errors import KnapsackDspyError

R = ResultRow
#: Fields that say whether a row is right (what "changed" counts).
VERDICT_FIELDS = (R.em, R.f1, R.correct)
#: Row fields ``score_prediction`` writes (whichever the dataset uses).
SCORE_FIELDS = (R.gold, R.gold_scale, R.em, R.f1, R.correct, R.program_correct, R.program_check, R.kdspy_lenient,
                R.within_10pct, R.authors_rule, R.case_type, R.score_error)
#: Row fields of the model-free selection quality (``bench.scoring.example_scores.selection_quality``).
SELECTION_FIELDS = (R.gold_case_hit, R.program_score, R.attribute_match)


class RescoreError(KnapsackDspyError, ValueError):
    """The results cannot be re-scored (no such file, or rows whose questions are not in their split)."""


def _prediction(row: ResultRow) -> SimpleNamespace:
    return recorded_prediction(row.spec.get("pipeline"), row.answer, row.scale, row.output)


def rescore_row(row: Mapping, example) -> ResultRow:
    """``row`` with its score fields recomputed against ``example`` (a new row; the input is not changed)."""
    row = as_row(row)
    return row.without(SCORE_FIELDS).replace(score_prediction(example, _prediction(row)))


def reselect_quality(row: Mapping, select, example) -> ResultRow:
    """``row`` with its selection-quality fields recomputed for its stored ``exemplar_ids`` (a new row)."""
    row = as_row(row)
    return row.without(SELECTION_FIELDS).replace(selection_quality(select, example, row.exemplar_ids))


def _selection_of(out_dir: Path, row: ResultRow, loaded: dict):
    """The compiled program's ``SelectExemplars`` of the row's run, or None when it is not saved."""
    if row.run not in loaded:
        path = saved_program_path(out_dir, row.run, row.spec)
        loaded[row.run] = load_program(path).select if path.is_file() else None
    return loaded[row.run]


def rescore_results(out_dir: str | os.PathLike, *, data_dir=None, suite_name: str | None = None,
                    log: Callable[[str], None] = print) -> dict:
    """Re-score ``out_dir/predictions.jsonl`` in place (and, given ``suite_name``, rebuild the report). Returns
    counts: ``rows``, ``rescored`` (rows with an answer), ``changed`` (rows whose EM / F1 / correctness
    changed), ``reselected`` (rows whose selection quality changed), ``updated`` (rows rewritten for any
    reason, e.g. a ``gold`` an error row lacked), per run how many rows became right / wrong (``gained`` /
    ``lost``), and ``runs`` (runs in the report, when one was written).
    Raises ``ResultsBusyError`` while a bench writes the directory."""
    path = rows_file(out_dir)  # predictions.jsonl, or the committed .xz / .gz (rewritten in its form)
    if not path.is_file():
        raise RescoreError(f"{path} does not exist (nor {' / '.join(COMPRESSED_ROWS_FILES)}): nothing to re-score")
    # the store repairs a torn last line; it reads committed rows alone, and replace_all rewrites them in their form
    with results_lock(out_dir), ResultsStore(Path(out_dir) / ROWS_FILE, fsync=False) as store:
        counts, rows, facts = _rescore_locked(store, data_dir, log)
        if suite_name is not None:
            counts["runs"] = len(write_report(rows, Path(out_dir), suite_name, facts=facts))
    return counts


def _rescore_locked(store: ResultsStore, data_dir, log: Callable[[str], None]) -> tuple[dict, list[ResultRow], dict]:
    rows = list(store.rows())
    examples_by_split: dict[tuple, dict] = {}
    selections: dict = {}
    result, missing = [], Counter()
    gained, lost = Counter(), Counter()
    rescored = changed = updated = reselected = 0
    for row in rows:
        spec = row.spec
        answered = not spec.get("selection_only") and row.has(ResultRow.answer)
        if not answered and not row.exemplar_ids:
            result.append(row)
            continue
        key = (spec.get("dataset"), spec.get("eval_split"), spec.get("eval_path"))
        if key not in examples_by_split:
            examples_by_split[key] = {ex.id: ex for ex in load_split(eval_split_of(spec), "eval", data_dir)}
        example = examples_by_split[key].get(row.example_id)
        if example is None:
            missing[key] += 1
            result.append(row)
            continue
        fresh = row
        select = _selection_of(store.path.parent, row, selections) if row.exemplar_ids else None
        if select is not None:
            fresh = reselect_quality(row, select, example)
            reselected += fresh != row
        if answered:
            fresh = rescore_row(fresh, example)
            rescored += 1
        updated += fresh != row
        if answered and any(field.of(fresh) != field.of(row) for field in VERDICT_FIELDS):
            changed += 1
            if fresh.correct and not row.correct:
                gained[row.run] += 1
            elif row.correct and not fresh.correct:
                lost[row.run] += 1
        result.append(fresh)
    if missing:
        where = "; ".join(f"{n} rows of {k[0]} {k[2] or k[1]}" for k, n in missing.items())
        raise RescoreError(f"questions not found in their eval split ({where}); wrong --data-dir? "
                           "nothing was changed")
    if updated:
        store.replace_all(result)
    for run in sorted(set(gained) | set(lost)):
        log(f"  {run}: {gained[run]} rows now correct, {lost[run]} no longer")
    log(f"re-scored {rescored} of {len(rows)} rows: {changed} scores changed"
        + (f"; selection quality changed in {reselected} rows" if reselected else "")
        + (f"; {updated} rows rewritten" if updated else " (file left as it was)"))
    ids = {str(row.example_id) for row in rows}
    facts = {}  # the questions' text and gold attributes, for the report (rows do not hold them)
    for (dataset, _, _), examples in examples_by_split.items():
        facts.update(facts_of(examples.values(), str(dataset or ""), ids))
    return ({"rows": len(rows), "rescored": rescored, "changed": changed, "updated": updated,
             "reselected": reselected, "gained": dict(gained), "lost": dict(lost)}, result, facts)
