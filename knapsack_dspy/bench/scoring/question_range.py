"""Questions by position: ``FROM:TO`` (1-based, inclusive) in the order the run answered its eval split.

A run takes its eval split (``eval_path`` or ``eval_split``) in the split's order or the one ``order_seed`` fixes,
then its ``example_ids`` (``bench.suites.chosen_questions``, what the runner asks). "Questions 61-150" in a report
are positions in that order, so a script that restricts rows to them reads the order from the rows' ``spec`` --
positions in the file's order would pick other questions without a word.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping

from knapsack_dspy.bench.suites.chosen_questions import chosen_examples, load_split
from knapsack_dspy.bench.suites.suite import RunSpec
from knapsack_dspy.errors import KnapsackDspyError

__all__ = ["QuestionRangeError", "order_key", "parse_question_range", "questions_at", "questions_in_order",
           "questions_of_rows"]


class QuestionRangeError(KnapsackDspyError, ValueError):
    """A ``FROM:TO`` that is not two positions 1 <= FROM <= TO, or that starts past the run's last question."""


def parse_question_range(text: str) -> tuple[int, int]:
    """``"61:150"`` -> ``(61, 150)``; anything else raises :class:`QuestionRangeError` naming the form wanted."""
    first, colon, last = str(text).partition(":")
    try:
        first_n, last_n = int(first), int(last)
    except ValueError:
        first_n = last_n = 0
    if not colon or first_n < 1 or last_n < first_n:
        raise QuestionRangeError(f"wants FROM:TO, two positions with 1 <= FROM <= TO (e.g. 61:150), got {text!r}")
    return first_n, last_n


def order_key(spec: Mapping) -> tuple:
    """What fixes a run's question order (rows with equal keys count positions alike)."""
    return (spec.get("dataset") or RunSpec.dataset, spec.get("eval_split"), spec.get("eval_path") or "",
            spec.get("order_seed"), tuple(spec.get("example_ids") or ()))


def questions_in_order(spec: Mapping, data_dir=None) -> list[str]:
    """The ids of the run ``spec``'s (a row's ``spec``) questions in the order the runner asks them, its
    ``limit`` aside."""
    run = dataclasses.replace(RunSpec.from_dict(spec), limit=None)
    return [str(example.id) for example in chosen_examples(load_split(run, "eval", data_dir), run)]


def questions_at(spec: Mapping, text: str, data_dir=None) -> set[str]:
    """The ids of the questions at positions ``text`` (``FROM:TO``) of the run ``spec`` (a row's ``spec``), in
    the order the runner asks them (its ``limit`` aside); a range past the last question is an error."""
    first, last = parse_question_range(text)
    ids = questions_in_order(spec, data_dir)
    if first > len(ids):
        run = RunSpec.from_dict(spec)
        raise QuestionRangeError(f"{text}: the run takes {len(ids)} questions of {run.dataset} "
                                 f"{run.eval_path or run.eval_split}")
    return set(ids[first - 1:last])


def questions_of_rows(rows: Iterable, text: str, data_dir=None) -> set[str]:
    """:func:`questions_at` for rows that take their questions in one order; rows in several orders (another
    split, seed or ``example_ids``) make positions ambiguous: :class:`QuestionRangeError`."""
    specs = {order_key(row.spec): row.spec for row in rows}
    if len(specs) > 1:
        raise QuestionRangeError(f"{text}: the rows take their questions in {len(specs)} different orders (data set, "
                                 "split or file, order_seed, example_ids): positions are ambiguous")
    if not specs:
        parse_question_range(text)  # a malformed range is an error even with nothing to restrict
        return set()
    return questions_at(next(iter(specs.values())), text, data_dir=data_dir)
