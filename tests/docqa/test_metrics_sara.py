"""SARA metric: label matching, dollar parsing, exact / within-10 % amounts, files, the real train cases."""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path

import pytest

import knapsack_dspy  # noqa: F401
from knapsack_dspy.docqa.metrics.errors import ScoringInputError
from knapsack_dspy.docqa.metrics.sara import (
    evaluate_sara,
    load_sara_gold,
    parse_dollars,
    score_sara_files,
    score_sara_prediction,
    within_authors_rule,
    within_tolerance,
)

CASES = [
    {"id": "s151_a_pos", "text": "...", "question": "...", "type": "entailment", "label": "Entailment"},
    {"id": "s151_a_neg", "text": "...", "question": "...", "type": "entailment", "label": "Contradiction"},
    {"id": "s63_c_pos", "text": "...", "question": "...", "type": "entailment", "label": "Entailment"},
    {"id": "tax_case_1", "text": "...", "question": "...", "type": "numerical", "answer": "$15037",
     "answer_value": 15037},
    {"id": "tax_case_2", "text": "...", "question": "...", "type": "numerical", "answer": "$0", "answer_value": 0},
    {"id": "tax_case_3", "text": "...", "question": "...", "type": "numerical", "answer": "$1000",
     "answer_value": 1000},
]


@pytest.mark.parametrize("value, expected", [
    ("$15,037", 15037.0), ("15037", 15037.0), (15037.0, 15037.0), (15037, 15037.0), ("15037.0", 15037.0),
    ("-$250", -250.0), ("$-250", -250.0), ("$ 1,000.50", 1000.5), ("12 dollars", 12.0), (" $7 ", 7.0),
    ("USD 40", 40.0), ("abc", None), ("1 2", None), ("1,23", None), ("", None), (None, None), (True, None),
    (float("nan"), None), ("$15,037 or $16,000", None),
])
def test_parse_dollars(value, expected):
    assert parse_dollars(value) == expected


def test_within_tolerance_bounds():
    assert within_tolerance(1100, 1000) and within_tolerance(900, 1000)
    assert not within_tolerance(1100.5, 1000) and not within_tolerance(899, 1000)
    assert within_tolerance(0.4, 0) and not within_tolerance(1, 0)  # gold $0: exact in dollars
    assert within_tolerance(-105, -100)


@pytest.mark.parametrize("prediction, correct", [
    ("Entailment", True), (" entailment. ", True), ("ENTAILMENT", True), ("Contradiction", False),
    ("Yes", False), (None, False), (1, False),
])
def test_entailment_labels(prediction, correct):
    assert score_sara_prediction(prediction, CASES[0]).correct is correct


@pytest.mark.parametrize("prediction, exact, within", [
    ("$15,037", True, True), (15037.4, True, True), (15037.5, False, True), ("15,000", False, True),
    (13000, False, False), ("Entailment", False, False), (None, False, False),
])
def test_numerical_amounts(prediction, exact, within):
    score = score_sara_prediction(prediction, CASES[3])
    assert (score.correct, score.within_10pct) == (exact, within)


@pytest.mark.parametrize("prediction, gold, inside", [
    (20036, 15037, True), (20037, 15037, False), (10038, 15037, True), (10037, 15037, False),  # $5,000 floor
    (109_999, 100_000, True), (110_000, 100_000, False), (90_001, 100_000, True),  # 10 % above $50,000
    (4999, 0, True), (-4999, 0, True), (5000, 0, False),
])
def test_the_sara_authors_numerical_rule(prediction, gold, inside):
    """|pred - gold| / max(0.1 * gold, 5000) < 1 (Holzenberger et al., 2020): strictly below."""
    assert within_authors_rule(prediction, gold) is inside
    case = {"id": "t", "type": "numerical", "answer": f"${gold}", "answer_value": gold}
    assert score_sara_prediction(prediction, case).authors_rule is inside
    assert score_sara_prediction("lots", case).authors_rule is False
    assert score_sara_prediction("Entailment", CASES[0]).authors_rule is None


def test_amounts_that_read_as_infinity_are_wrong_not_errors():
    for prediction in ("9" * 400, 10**400, 1e300):
        score = score_sara_prediction(prediction, CASES[3])
        assert (score.correct, score.within_10pct, score.authors_rule) == (False, False, False)


def test_dataset_scores_by_hand():
    predictions = {
        "s151_a_pos": "Entailment",        # right
        "s151_a_neg": "Entailment",        # wrong
        # s63_c_pos missing                # wrong
        "tax_case_1": "$15,500",           # not exact, within 10 % (3.1 %)
        "tax_case_2": 0,                   # exact
        "tax_case_3": "1200",              # wrong, 20 % off
        "tax_case_99": "$5",               # not a gold case: ignored
    }
    result = evaluate_sara(CASES, predictions)
    assert result.count == 6
    assert result.accuracy.value == pytest.approx(2 / 6)
    assert result.entailment_accuracy.value == pytest.approx(1 / 3)
    assert result.numerical_accuracy.value == pytest.approx(1 / 3)
    assert result.numerical_within_10pct.value == pytest.approx(2 / 3)
    assert result.missing_predictions == 1
    assert result.unknown_prediction_ids == ["tax_case_99"]
    out = result.to_dict()
    assert out["accuracy"] == pytest.approx(100 * 2 / 6)
    assert out["entailment_count"] == 3 and out["numerical_count"] == 3
    low, high = out["accuracy_ci90"]
    assert 0 <= low < out["accuracy"] < high <= 100


def test_files_json_and_gzip(tmp_path):
    gold = tmp_path / "cases.json.gz"
    gold.write_bytes(gzip.compress(json.dumps(CASES).encode()))
    predictions = tmp_path / "pred.json"
    predictions.write_text(json.dumps({c["id"]: c.get("label") or c["answer"] for c in CASES}))
    result = score_sara_files(gold, predictions)
    assert result["accuracy"] == 100.0 and result["count"] == 6
    plain = tmp_path / "cases.json"
    plain.write_text(json.dumps(CASES))
    assert score_sara_files(plain, predictions) == result


@pytest.mark.parametrize("cases, message", [
    ({"id": "x"}, "expected a JSON list of SARA cases"),
    ([{"id": "a", "type": "entailment", "label": "Maybe"}], "case 0 \\(id 'a'\\): field 'label'"),
    ([{"id": "a", "type": "numerical", "answer": "lots"}], "field 'answer'"),
    ([{"id": "a", "type": "other"}], "field 'type'"),
    ([{"type": "entailment", "label": "Entailment"}], "field 'id'"),
    ([CASES[0], CASES[0]], "duplicate case id"),
    ([], "no cases"),
])
def test_bad_gold_errors_name_the_case(tmp_path, cases, message):
    path = tmp_path / "cases.json"
    path.write_text(json.dumps(cases))
    with pytest.raises(ScoringInputError, match=message) as info:
        load_sara_gold(path)
    assert str(path) in str(info.value)


def test_bad_predictions_file(tmp_path):
    gold = tmp_path / "cases.json"
    gold.write_text(json.dumps(CASES))
    predictions = tmp_path / "pred.json"
    predictions.write_text(json.dumps(["Entailment"]))
    with pytest.raises(ScoringInputError, match="expected a JSON object"):
        score_sara_files(gold, predictions)
    predictions.write_text(json.dumps({"tax_case_1": [1, 2]}))
    with pytest.raises(ScoringInputError, match="case id 'tax_case_1'"):
        score_sara_files(gold, predictions)


_TRAIN = Path(os.environ.get("KDSPY_DATA_DIR", "/nonexistent")) / "sara" / "cases_train.json.gz"


@pytest.mark.skipif(not _TRAIN.is_file(), reason="SARA data not available (set KDSPY_DATA_DIR)")
def test_real_train_cases(tmp_path):
    cases = load_sara_gold(_TRAIN)
    entailment = [c for c in cases if c["type"] == "entailment"]
    numerical = [c for c in cases if c["type"] == "numerical"]
    # gold predictions (the amount as written, "$15037") score 100 %
    perfect = {c["id"]: c.get("label") or c["answer"] for c in cases}
    assert evaluate_sara(cases, perfect).accuracy.value == 1.0
    # always "Entailment", always $0: accuracy follows the label / zero-amount shares of the file
    constant = {c["id"]: "Entailment" if c["type"] == "entailment" else 0 for c in cases}
    result = evaluate_sara(cases, constant)
    n_entailed = sum(c["label"] == "Entailment" for c in entailment)
    n_zero = sum(c["answer_value"] == 0 for c in numerical)
    assert result.entailment_accuracy.value == pytest.approx(n_entailed / len(entailment))
    assert result.numerical_accuracy.value == pytest.approx(n_zero / len(numerical))
    assert result.accuracy.value == pytest.approx((n_entailed + n_zero) / len(cases))
    # every amount 5 % too high: none exact (except $0 cases), all within 10 %
    high = {c["id"]: (c["answer_value"] * 1.05 if c["type"] == "numerical" else c["label"]) for c in cases}
    result = evaluate_sara(cases, high)
    assert result.numerical_within_10pct.value == 1.0
    assert result.numerical_accuracy.value == pytest.approx(
        sum(abs(c["answer_value"] * 0.05) < 0.5 for c in numerical) / len(numerical))
