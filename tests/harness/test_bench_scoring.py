"""Per-example scores of the bench (and the DSPy metric) on loaded examples: every answer type scores."""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace

import pytest

import knapsack_dspy  # noqa: F401  (first: LiteLLM then loads with its bundled model map, _env.py)
from knapsack_dspy.bench.scoring.example_scores import correctness_metric, score_prediction
from knapsack_dspy.docqa.data.loader import load_examples

FIXTURE = Path(__file__).parents[1] / "fixtures" / "metrics_tatqa_gold.json"


def _data_dir() -> Path | None:
    root = os.environ.get("KDSPY_DATA_DIR")
    candidates = [Path(root)] if root else []
    candidates.append(Path(__file__).resolve().parents[3] / "shared" / "data")
    return next((path for path in candidates if (path / "tatqa").is_dir()), None)


def _as_solver_answer(example):
    """The gold answer in the form the program-of-thought solver returns it (spans as strings, numbers)."""
    answer = example["answer"]
    if example["answer_type"] in ("arithmetic", "count"):
        return example["answer_value"]
    return answer


def _gold_prediction(example):
    return SimpleNamespace(answer=_as_solver_answer(example), scale=example.get("scale") or "")


@pytest.fixture(scope="module")
def fixture_examples():
    return load_examples("tatqa", path=FIXTURE)


def test_the_fixture_covers_every_answer_type(fixture_examples):
    assert {ex["answer_type"] for ex in fixture_examples} == {"span", "multi-span", "arithmetic", "count"}


def test_gold_answers_score_exact_match_for_every_answer_type(fixture_examples):
    for example in fixture_examples:
        row = score_prediction(example, _gold_prediction(example))
        assert (row["em"], row["f1"], row["correct"]) == (1.0, 1.0, True), (example["answer_type"], row)
        assert correctness_metric(example, _gold_prediction(example)) == 1.0


def test_a_span_answer_is_scored_not_rejected(fixture_examples):
    span = next(ex for ex in fixture_examples if ex["answer_type"] == "span")
    assert isinstance(span["answer"], str)  # loaded examples hold a span as one string
    words = span["answer"].split()
    assert score_prediction(span, SimpleNamespace(answer="nothing like it", scale=""))["em"] == 0.0
    if len(words) > 1:  # part of the span: no exact match, some F1
        row = score_prediction(span, SimpleNamespace(answer=words[0], scale=""))
        assert row["em"] == 0.0 and 0.0 < row["f1"] < 1.0
    wrong_scale = score_prediction(span, SimpleNamespace(answer=span["answer"], scale="million"))
    assert wrong_scale["em"] == 0.0


def test_a_wrong_scale_or_value_is_wrong(fixture_examples):
    arithmetic = next(ex for ex in fixture_examples if ex["answer_type"] == "arithmetic")
    value = arithmetic["answer_value"]
    other_scale = "million" if (arithmetic.get("scale") or "") != "million" else "thousand"
    assert score_prediction(arithmetic, SimpleNamespace(answer=value, scale=other_scale))["em"] == 0.0
    assert score_prediction(arithmetic, SimpleNamespace(answer=value + 1, scale=arithmetic["scale"]))["em"] == 0.0


@pytest.mark.skipif(_data_dir() is None, reason="TAT-QA data not available (set KDSPY_DATA_DIR)")
@pytest.mark.parametrize("split", ["dev_pool", "dev_tune"])
def test_every_real_gold_answer_scores_exact_match(split):
    examples = load_examples("tatqa", split, data_dir=_data_dir())
    missed = [(ex["id"], ex["answer_type"]) for ex in examples
              if score_prediction(ex, _gold_prediction(ex))["em"] != 1.0]
    assert not missed, f"{len(missed)} of {len(examples)} gold answers not matched, e.g. {missed[:5]}"


def test_finqa_gold_programs_and_answers_are_correct():
    examples = load_examples("finqa", path=Path(__file__).parents[1] / "fixtures" / "finqa_small.json")
    for example in examples:
        with_program = score_prediction(example, SimpleNamespace(answer=example["answer"], scale="",
                                                                 program=example["program"]))
        assert with_program["correct"] and with_program["program_correct"], (example["id"], with_program)
        assert score_prediction(example, SimpleNamespace(answer=example["answer"], scale=""))["correct"]
    wrong = score_prediction(examples[0], SimpleNamespace(answer=None, scale="", program="add(1, 2)"))
    assert not wrong["correct"] and not wrong["program_correct"]


def test_sara_gold_answers_are_correct():
    examples = load_examples("sara", path=Path(__file__).parents[1] / "fixtures" / "data_sara_small.json")
    assert examples
    for example in examples:
        assert score_prediction(example, SimpleNamespace(answer=example["answer"], scale=""))["correct"], example["id"]


def test_sara_rows_carry_the_authors_rule_and_the_report_shows_it(tmp_path):
    from knapsack_dspy.bench.reporting.report import write_report

    examples = load_examples("sara", path=Path(__file__).parents[1] / "fixtures" / "data_sara_small.json")
    numerical = next(ex for ex in examples if ex["answer_type"] == "numerical")
    gold = numerical["answer_value"]
    near = score_prediction(numerical, SimpleNamespace(answer=gold + 4999, scale=""))
    far = score_prediction(numerical, SimpleNamespace(answer=gold + max(5001, 0.2 * gold), scale=""))
    assert (near["correct"], near["authors_rule"], far["authors_rule"]) == (False, True, False)
    exact = score_prediction(numerical, SimpleNamespace(answer=gold, scale=""))
    entailment = next(ex for ex in examples if ex["answer_type"] == "entailment")
    right = score_prediction(entailment, SimpleNamespace(answer=entailment["answer"], scale=""))
    spec = {"dataset": "sara", "pipeline": "cot", "selector": "kate", "budget": 2048, "max_exemplars": 2}
    rows = [{**row, "run": "r", "spec": spec, "example_id": str(i)}
            for i, row in enumerate((near, far, exact, right))]
    metrics = write_report(rows, tmp_path, "unit")["r"]
    assert metrics["authors_rule"] == pytest.approx(200 / 3)  # near and exact of the three numerical cases
    # Table 3's columns: entailment accuracy, numerical cases exact in dollars, within 10 %, the authors' rule
    assert (metrics["entailment_accuracy"], metrics["entailment_accuracy_n"]) == (100.0, 1)
    assert (metrics["numerical_exact"], metrics["numerical_exact_n"]) == (pytest.approx(100 / 3), 3)
    assert metrics["numerical_within_10pct"] == pytest.approx(100 / 3 * (1 + (4999 <= 0.1 * gold)))
    report = (tmp_path / "report.md").read_text()
    for column in ("entailment", "numerical, exact $", "numerical, within 10 %", "numerical, authors' rule"):
        assert f"| {column} |" in report


def test_a_computed_negative_zero_is_zero(fixture_examples):
    zero = [ex for ex in fixture_examples if ex["answer_type"] == "arithmetic" and ex["answer_value"] == 0]
    assert zero, "the fixture has an arithmetic question whose answer is 0"
    for value in (0, 0.0, -0.0):
        assert score_prediction(zero[0], SimpleNamespace(answer=value, scale=zero[0]["scale"]))["em"] == 1.0


def test_finqa_cases_programs_are_scored_like_finqa():
    examples = load_examples("finqa_cases", path=Path(__file__).parents[1] / "fixtures" / "data_finqa_cases_small.csv")
    table_free = [ex for ex in examples if ex["program"] and "table_" not in ex["program"]]
    assert table_free
    for example in table_free:
        row = score_prediction(example, SimpleNamespace(answer=example["answer"], scale="", program=example["program"]))
        assert row["correct"] and row["program_correct"], (example["id"], row)
    wrong = score_prediction(table_free[0], SimpleNamespace(answer=None, scale="", program="add(1, 2)"))
    assert not wrong["correct"]
