"""bench/scoring/question_range.py: questions by position in the order the run answered its eval split."""

import os
from dataclasses import asdict
from pathlib import Path

import pytest

from knapsack_dspy.bench.scoring.question_range import (
    QuestionRangeError,
    parse_question_range,
    questions_at,
    questions_of_rows,
)
from knapsack_dspy.bench.suites.chosen_questions import chosen_examples
from knapsack_dspy.bench.suites.suite import RunSpec
from knapsack_dspy.docqa.data.loader import load_examples

DATA = Path(os.environ.get("KDSPY_DATA_DIR", Path(__file__).resolve().parents[3] / "shared" / "data"))
needs_data = pytest.mark.skipif(not (DATA / "tatqa" / "dev_tune.json.gz").exists(), reason="TAT-QA data not found")


@pytest.mark.parametrize("text", ["0:3", "5:4", "3", "one:two", ":", "2:", "-1:4", "1:2:3"])
def test_a_range_that_is_not_two_ordered_positions_is_refused(text):
    with pytest.raises(QuestionRangeError, match="FROM:TO"):
        parse_question_range(text)


def test_a_range_is_read_inclusive_and_one_based():
    assert parse_question_range("61:150") == (61, 150)
    assert parse_question_range("7:7") == (7, 7)


def _answered(spec: RunSpec) -> list[str]:
    """The ids the bench answers for ``spec``, in its order (the runner's own choice)."""
    return [example.id for example in chosen_examples(load_examples(spec.dataset, spec.eval_split), spec)]


@needs_data
@pytest.mark.parametrize("order_seed", [None, 26])
def test_positions_are_the_ones_the_bench_answered(order_seed):
    spec = RunSpec(dataset="tatqa", eval_split="dev_tune", order_seed=order_seed, limit=12)
    answered = _answered(spec)
    row_spec = asdict(spec)  # as a row stores it
    assert questions_at(row_spec, "1:12") == set(answered)
    assert questions_at(row_spec, "5:12") == set(answered[4:])
    assert questions_at(row_spec, "3:3") == {answered[2]}


@needs_data
def test_example_ids_count_positions_among_themselves():
    # a suite of chosen questions (SARA's entailment cases): position 1 is the first chosen one in the run's order
    ids = tuple(example["id"] for example in load_examples("tatqa", "dev_tune")[10:40:3])
    spec = RunSpec(dataset="tatqa", eval_split="dev_tune", order_seed=26, example_ids=ids, limit=4)
    answered = _answered(spec)
    assert len(answered) == 4 and set(answered) <= set(ids)
    assert questions_at(asdict(spec), "1:4") == set(answered)
    assert questions_at(asdict(spec), "1:100") == set(ids)  # a range past the end stops at the last question
    with pytest.raises(QuestionRangeError, match="takes 10 questions"):
        questions_at(asdict(spec), "11:20")


@needs_data
def test_rows_in_two_orders_are_ambiguous():
    from knapsack_dspy.bench.results.row_schema import as_row

    rows = [as_row({"run": "a", "example_id": "x", "spec": {"dataset": "tatqa", "order_seed": 26}}),
            as_row({"run": "b", "example_id": "y", "spec": {"dataset": "tatqa", "order_seed": None}})]
    with pytest.raises(QuestionRangeError, match="2 different orders"):
        questions_of_rows(rows, "1:2")
    assert questions_of_rows(rows[:1], "1:2") == questions_at(rows[0].spec, "1:2")
    assert questions_of_rows([], "1:2") == set()
    with pytest.raises(QuestionRangeError):
        questions_of_rows([], "2:1")


@needs_data
def test_a_seeded_order_is_not_the_file_order():
    # the reason for the module: the file's first questions are not the seeded run's first questions
    file_order = [example["id"] for example in load_examples("tatqa", "dev_tune")[:12]]
    seeded = questions_at({"dataset": "tatqa", "eval_split": "dev_tune", "order_seed": 26}, "1:12")
    assert seeded != set(file_order)
    assert questions_at({"dataset": "tatqa", "eval_split": "dev_tune", "order_seed": None}, "1:12") == set(file_order)
