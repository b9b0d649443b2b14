"""TAT-QA metric: hand-computed cases on a tiny official-format gold file, the official dev acceptance
numbers, and invariances / perturbations of the official sample prediction file."""

from __future__ import annotations

import json
import math
import os
import random
from pathlib import Path

import pytest

import knapsack_dspy  # noqa: F401  (first: LiteLLM then loads with its bundled model map, _env.py)
from knapsack_dspy.docqa.metrics.errors import ScoringInputError
from knapsack_dspy.docqa.metrics.tatqa import (
    answer_string,
    evaluate_tatqa,
    is_number,
    load_tatqa_gold,
    normalize_answer,
    score_tatqa_answer,
    score_tatqa_files,
    span_em_f1,
    to_number,
)

FIXTURE = Path(__file__).parents[1] / "fixtures" / "metrics_tatqa_gold.json"


def _data_file(*parts: str) -> Path | None:
    root = os.environ.get("KDSPY_DATA_DIR")
    if not root:
        return None
    path = Path(root).joinpath(*parts)
    return path if path.is_file() else None


DEV = _data_file("tatqa", "dev.json.gz")
SAMPLE = _data_file("tatqa", "dev_sample_prediction.json")
needs_dev = pytest.mark.skipif(DEV is None or SAMPLE is None,
                               reason="TAT-QA dev data not available (set KDSPY_DATA_DIR)")


@pytest.fixture(scope="module")
def gold():
    return json.loads(FIXTURE.read_text())


def _question(gold, uid):
    return next(q for q in gold[0]["questions"] if q["uid"] == uid)


def _score(gold, uid, answer, scale):
    q = _question(gold, uid)
    return score_tatqa_answer(answer, scale, q["answer"], q["scale"], q["answer_type"])


# --- normalisation and numbers ---------------------------------------------------------------------------

@pytest.mark.parametrize("text, expected", [
    ("1,234", 1234), ("$1,234.5", 1234.5), ("(134)", -134), ("12%", 0.12), ("1.5 million", 1500000.0),
    ("-3.25", -3.25), ("2019", 2019), ("abc", None), (".5", None),  # official quirk: a leading-dot form
])
def test_to_number(text, expected):
    assert to_number(text) == expected


@pytest.mark.parametrize("text, expected", [
    ("1,234", True), ("5 million", True), ("5 apples", False), ("$", False), ("nan", False), ("12%", True),
    ("", False), ("Q4", False),
])
def test_is_number(text, expected):
    assert is_number(text) is expected


@pytest.mark.parametrize("text, expected", [
    ("The Net Sales, increased.", "net sales increased"),
    ("1,234 units", "1234 units"),
    ("5.0000 2019.0000", "5.0 2019.0"),
    ("a  b", "b"),
])
def test_normalize_answer(text, expected):
    assert normalize_answer(text) == expected


def test_answer_string_sorts_items_and_applies_the_scale():
    assert answer_string(["2019", "2018"], "") == "2018.0000 2019.0000"
    assert answer_string([23.42], "percent") == "0.2342"
    assert answer_string(["23.42%"], "") == "0.2342"
    assert answer_string(["Q4"], "million") == "Q4 million"
    assert answer_string([1496.5], "million") == "1496500000.0000"


def test_span_em_f1_aligns_bags():
    assert span_em_f1("net sales", "Net sales increased") == (0.0, 0.8)
    # list form: spans aligned 1-1; one gold bag is matched exactly, the other gets nothing
    assert span_em_f1(["a b", "c"], ["c"]) == (0.0, 0.5)
    assert span_em_f1(["x y", "z"], ["z", "x y"]) == (1.0, 1.0)


# --- per question, by hand -------------------------------------------------------------------------------

@pytest.mark.parametrize("answer, scale, expected", [
    (23.42, "percent", (1.0, 1.0)),
    (0.2342, "", (1.0, 1.0)),          # bare fraction tried as-is
    ("23.42%", "", (1.0, 1.0)),
    (23.42, "", (0.0, 0.0)),            # missing scale
    (23.42, "million", (0.0, 0.0)),     # wrong scale
    ("", "percent", (0.0, 0.0)),
    (None, None, (0.0, 0.0)),
])
def test_percent_question(gold, answer, scale, expected):
    assert _score(gold, "q-pct", answer, scale) == expected


@pytest.mark.parametrize("answer, scale, expected", [
    ("1,496.5", "million", (1.0, 1.0)),
    ("$1,496.5", "million", (1.0, 1.0)),
    ([1496.5], "million", (1.0, 1.0)),
    (1496.5, "thousand", (0.0, 0.0)),   # wrong scale scores 0
    (1496500000, "", (1.0, 1.0)),       # the scale folded into the number is the same value
    ("1496.49", "million", (0.0, 0.0)),
    ("1496.504", "million", (1.0, 1.0)),  # numbers are compared at 2 decimals
])
def test_scaled_arithmetic_question(gold, answer, scale, expected):
    assert _score(gold, "q-million", answer, scale) == expected


@pytest.mark.parametrize("answer, scale, expected", [
    (["2018", "2019"], "", (1.0, 1.0)),
    (["2019", "2018"], "", (1.0, 1.0)),   # order does not matter
    ([2019, 2018], "", (1.0, 1.0)),
    (["2019"], "", (0.0, 0.67)),          # P=1, R=1/2 -> F1 2/3, rounded
    (["2019", "2018", "2017"], "", (0.0, 0.8)),
])
def test_multi_span_question(gold, answer, scale, expected):
    assert _score(gold, "q-years", answer, scale) == expected


@pytest.mark.parametrize("answer, scale, expected", [
    ("net sales increased.", "", (1.0, 1.0)),
    (["Net sales increased"], "", (1.0, 1.0)),
    ("The net sales", "", (0.0, 0.8)),                   # P=1, R=2/3
    ("Net sales increased", "million", (0.0, 0.86)),     # a scale word on a span costs precision
    ("revenue fell", "", (0.0, 0.0)),
])
def test_span_question(gold, answer, scale, expected):
    assert _score(gold, "q-span", answer, scale) == expected


def test_count_question_f1_equals_em(gold):
    assert _score(gold, "q-count", 2, "") == (1.0, 1.0)
    assert _score(gold, "q-count", "2", "") == (1.0, 1.0)
    assert _score(gold, "q-count", "two", "") == (0.0, 0.0)
    assert _score(gold, "q-count", ["2", "segments"], "") == (0.0, 0.0)  # partial overlap, but F1 := EM


def test_scaled_span_number(gold):
    assert _score(gold, "q-thousand", "1234", "thousand") == (1.0, 1.0)
    assert _score(gold, "q-thousand", "1,234", "") == (0.0, 0.0)
    assert _score(gold, "q-thousand", "1,234,000", "") == (1.0, 1.0)


def test_numeric_zero_prediction_scores_zero_as_officially(gold):
    assert _score(gold, "q-zero", 0, "") == (0.0, 0.0)  # falsy prediction: the official script gives 0
    assert _score(gold, "q-zero", "0", "") == (1.0, 1.0)


# --- dataset level ---------------------------------------------------------------------------------------

def test_dataset_scores_by_hand(gold):
    predictions = {
        "q-pct": [0.2342, ""],                       # 1, 1
        "q-span": ["The net sales", ""],             # 0, 0.8
        "q-years": [["2019"], ""],                   # 0, 0.67
        "q-count": [2, ""],                          # 1, 1
        "q-million": [1496.5, "thousand"],           # 0, 0
        # q-thousand missing                         # 0, 0
        "q-zero": ["0", ""],                         # 1, 1
        "not-a-gold-uid": ["whatever", ""],          # ignored
    }
    result = evaluate_tatqa(gold, predictions)
    assert result.count == 7
    assert result.exact_match == pytest.approx(3 / 7)
    assert result.f1 == pytest.approx((1 + 0.8 + 0.67 + 1 + 0 + 0 + 1) / 7)
    assert result.missing_predictions == 1
    assert result.unknown_prediction_ids == ["not-a-gold-uid"]
    # scale accuracy: non-empty predictions whose scale equals the gold scale (q-pct: '' vs 'percent' no;
    # q-span, q-years, q-count, q-zero yes; q-million no; q-thousand missing)
    assert result.scale_accuracy == pytest.approx(4 / 7)
    assert result.by_answer_type["arithmetic"]["count"] == 3
    assert result.by_answer_type["arithmetic"]["exact_match"] == pytest.approx(200 / 3)
    low, high = result.exact_match_ci.low, result.exact_match_ci.high
    assert 0 <= low < 3 / 7 < high <= 1


def test_score_files_on_fixture(tmp_path):
    predictions = tmp_path / "pred.json"
    predictions.write_text(json.dumps({"q-span": ["net sales increased", ""], "q-count": ["2", ""]}))
    result = score_tatqa_files(FIXTURE, predictions)
    assert result["count"] == 7
    assert result["exact_match"] == pytest.approx(100 * 2 / 7)
    assert result["f1"] == pytest.approx(100 * 2 / 7)
    assert result["missing_predictions"] == 5
    json.dumps(result)  # JSON-ready


@pytest.mark.parametrize("content, message", [
    ("{not json", "not valid JSON"),
    ('{"a": 1}', "expected a JSON list of TAT-QA contexts"),
    ('[{"questions": [{"uid": "x", "question": "q"}]}]', "field 'answer'"),
    ('[{"questions": [{"uid": "x", "answer": "5", "answer_type": "span", "scale": ""}]}]',
     "a span answer must be a list"),
    ("[]", "no questions"),
])
def test_bad_gold_file_errors_name_the_place(tmp_path, content, message):
    path = tmp_path / "gold.json"
    path.write_text(content)
    with pytest.raises(ScoringInputError, match=message) as info:
        load_tatqa_gold(path)
    assert str(path) in str(info.value)


@pytest.mark.parametrize("content, message", [
    ('["a", "b"]', "expected a JSON object"),
    ('{"q-span": "just text"}', "uid 'q-span': expected \\[answer, scale\\]"),
    ('{"q-span": ["x", 3]}', "the scale must be a string"),
])
def test_bad_prediction_file_errors(tmp_path, content, message):
    path = tmp_path / "pred.json"
    path.write_text(content)
    with pytest.raises(ScoringInputError, match=message):
        score_tatqa_files(FIXTURE, path)


def test_gzip_gold_is_read(tmp_path):
    import gzip

    path = tmp_path / "gold.json.gz"
    path.write_bytes(gzip.compress(FIXTURE.read_bytes()))
    assert len(load_tatqa_gold(path)) == 7


# --- the official dev numbers and perturbations of the sample predictions --------------------------------

@pytest.fixture(scope="module")
def dev_run():
    from knapsack_dspy.docqa.metrics.json_files import read_json_file

    gold_contexts = read_json_file(DEV)
    predictions = json.loads(SAMPLE.read_text())
    return gold_contexts, predictions, evaluate_tatqa(gold_contexts, predictions)


@needs_dev
def test_official_dev_numbers():
    result = score_tatqa_files(DEV, SAMPLE)
    assert round(result["exact_match"], 2) == 45.92
    assert round(result["f1"], 2) == 58.88
    assert result["count"] == 1668
    assert result["missing_predictions"] == 0 and result["unknown_prediction_ids"] == 0


@needs_dev
def test_dropped_uids_score_zero_and_still_count(dev_run):
    gold_contexts, predictions, full = dev_run
    rng = random.Random(7)
    dropped = set(rng.sample(sorted(predictions), 200))
    kept = {uid: v for uid, v in predictions.items() if uid not in dropped}
    result = evaluate_tatqa(gold_contexts, kept)
    per_question = {s.uid: s for s in full.questions}
    assert result.count == full.count
    assert result.missing_predictions == 200
    expected_em = sum(per_question[u].em for u in kept) / full.count
    assert result.exact_match == pytest.approx(expected_em)
    assert result.exact_match < full.exact_match


@needs_dev
def test_changed_scales_zero_the_numeric_answers(dev_run):
    gold_contexts, predictions, full = dev_run
    other = {"": "million", "thousand": "million", "million": "thousand", "billion": "million",
             "percent": "thousand"}
    correct_numeric = [s for s in full.questions if s.em == 1.0 and s.answer_type == "arithmetic"
                       and s.gold_scale in ("thousand", "million", "billion")]
    assert len(correct_numeric) > 50
    changed = dict(predictions)
    for s in correct_numeric:
        answer, scale = predictions[s.uid]
        changed[s.uid] = [answer, other[scale]]
    result = evaluate_tatqa(gold_contexts, changed)
    after = {s.uid: s for s in result.questions}
    assert all(after[s.uid].em == 0.0 and after[s.uid].f1 == 0.0 for s in correct_numeric)
    assert result.exact_match == pytest.approx(full.exact_match - len(correct_numeric) / full.count)


@needs_dev
def test_reordered_multi_spans_and_comma_strings_score_the_same(dev_run):
    gold_contexts, predictions, full = dev_run
    rng = random.Random(3)
    perturbed = {}
    for uid, (answer, scale) in predictions.items():
        if isinstance(answer, list) and len(answer) > 1:
            answer = list(answer)
            rng.shuffle(answer)
        elif isinstance(answer, (int, float)) and answer and "e" not in repr(answer):
            answer = f"{answer:,}"  # 1496.5 -> "1,496.5"
        perturbed[uid] = [answer, scale]
    result = evaluate_tatqa(gold_contexts, perturbed)
    assert [(s.em, s.f1) for s in result.questions] == [(s.em, s.f1) for s in full.questions]
    assert math.isclose(result.f1, full.f1)
