"""bench/scoring/question_range.py: questions by position in the order the run answered its eval split."""

import os
from dataclasses import asdict
from pathlib import Path

import pytest

from knapsack_dspy.bench.execution.runner import _chosen_examples
from knapsack_dspy.bench.scoring.question_range import QuestionRangeError, parse_question_range, questions_at
from knapsack_dspy.bench.suites.suite import RunSpec
from knapsack_dspy.data.loader import load_examples

DATA = Path(os.environ.get("KDSPY_DATA_DIR", Path(__file__).resolve().parents[2] / "shared" / "data"))
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
    return [example.id for example in _chosen_examples(load_examples(spec.dataset, spec.eval_split), spec)]


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
def test_a_seeded_order_is_not_the_file_order():
    # the reason for the module: the file's first questions are not the seeded run's first questions
    file_order = [example["id"] for example in load_examples("tatqa", "dev_tune")[:12]]
    seeded = questions_at({"dataset": "tatqa", "eval_split": "dev_tune", "order_seed": 26}, "1:12")
    assert seeded != set(file_order)
    assert questions_at({"dataset": "tatqa", "eval_split": "dev_tune", "order_seed": None}, "1:12") == set(file_order)
