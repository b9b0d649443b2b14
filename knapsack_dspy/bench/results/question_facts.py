"""What a results row does not hold about its question: the text, the gold answer type, modality and program.

Rows keep ids, the gold answer and what the model produced, not the question (a committed results file stays
small); reports and the per-question page read the rest from the row's eval split. Facts are keyed by
``(dataset, example_id)`` (:func:`facts_key`); a row whose split cannot be read simply has none.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from types import SimpleNamespace

from knapsack_dspy.bench.results.row_schema import as_row, rows_of

__all__ = ["FACT_FIELDS", "QuestionFacts", "eval_split_of", "facts_key", "facts_of", "load_question_facts"]

#: The example fields a report reads (``data/example_fields.py``).
FACT_FIELDS = ("question", "answer_type", "modality", "derivation", "program")
QuestionFacts = dict[tuple[str, str], dict]


def facts_key(row: Mapping) -> tuple[str, str]:
    """The key of a row's question: its dataset and example id."""
    row = as_row(row)
    return str(row.spec.get("dataset") or ""), str(row.example_id)


def facts_of(examples: Iterable, dataset: str | None = None, ids: set[str] | None = None) -> QuestionFacts:
    """The facts of ``examples`` (only those whose id is in ``ids``, when given)."""
    out: QuestionFacts = {}
    for ex in examples:
        if ids is not None and str(ex.get("id")) not in ids:
            continue
        name = dataset or str(ex.get("dataset") or "")
        out[name, str(ex.get("id"))] = {f: ex.get(f) for f in FACT_FIELDS if ex.get(f) not in (None, "")}
    return out


def stored_split(spec: Mapping) -> SimpleNamespace:
    """Everything ``run_program.load_split`` reads of a run spec (eval and pool), from a stored row's ``spec``; a field
    rows of older code lack takes ``RunSpec``'s default meaning (no ``pool_dataset``: the pool is the dataset's)."""
    return SimpleNamespace(dataset=spec.get("dataset"), eval_split=spec.get("eval_split"),
                           eval_path=spec.get("eval_path") or "", pool_split=spec.get("pool_split"),
                           pool_path=spec.get("pool_path") or "", pool_dataset=spec.get("pool_dataset") or "")


def eval_split_of(spec: Mapping) -> SimpleNamespace:
    """What ``run_program.load_split`` reads of a run spec, from a stored row's ``spec``."""
    return stored_split(spec)


def load_question_facts(rows: Iterable[Mapping], load_eval: Callable[[SimpleNamespace], Iterable]) -> QuestionFacts:
    """Facts of the rows' questions, reading each eval split the rows name once (``load_eval(eval_split_of(spec))``,
    e.g. ``lambda s: run_program.load_split(s, "eval", data_dir)``); a split that cannot be read raises."""
    wanted: dict[tuple, set[str]] = {}
    for row in rows_of(rows):
        spec = row.spec
        split = (spec.get("dataset"), spec.get("eval_split"), spec.get("eval_path"))
        wanted.setdefault(split, set()).add(str(row.example_id))
    facts: QuestionFacts = {}
    for (dataset, split, path), ids in sorted(wanted.items(), key=lambda kv: tuple(map(str, kv[0]))):
        spec = {"dataset": dataset, "eval_split": split, "eval_path": path}
        facts.update(facts_of(load_eval(eval_split_of(spec)), str(dataset or ""), ids))
    return facts
