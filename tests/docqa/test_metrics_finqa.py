"""FinQA execution / program accuracy (official semantics) and the answer matchers.

The fixtures are hand-written in the official FinQA schema; every expected number below was worked out by
hand from the official ``evaluate.py`` rules (see ``docs/execution.md``).
"""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pytest

import knapsack_dspy  # noqa: F401
from knapsack_dspy.docqa.metrics.answer_matching import (
    finqa_exact_match,
    kdspy_lenient_match,
    normalize_answer_number,
    seer_finqa_match,
)
from knapsack_dspy.docqa.metrics.errors import ScoringInputError
from knapsack_dspy.docqa.metrics.finqa import (
    FinQAScoreError,
    execution_accuracy,
    execution_match,
    load_finqa_gold,
    load_finqa_predictions,
    program_accuracy,
    program_match,
    score_finqa,
    score_finqa_files,
)
from knapsack_dspy.docqa.sandbox import program_to_tokens

FIXTURES = Path(__file__).parents[1] / "fixtures"
GOLD = FIXTURES / "finqa_metric_gold.json"
PERFECT = FIXTURES / "finqa_metric_predictions_gold.json"
PERTURBED = FIXTURES / "finqa_metric_predictions_perturbed.json"
TABLE = [["", "2019", "2018", "2017"], ["net sales", "$ 1,200", "$ 1,000", "$ 800"],
         ["operating margin", "12%", "10%", "8%"]]


# -- whole files --------------------------------------------------------------------------------------------
def test_gold_programs_as_predictions_score_100():
    scores = score_finqa_files(GOLD, PERFECT)
    assert scores["execution_accuracy"] == 100.0 and scores["program_accuracy"] == 100.0
    assert scores["count"] == 10 and scores["invalid"] == 0 and scores["missing_predictions"] == 0
    assert scores["inconsistent"] == []


def test_perturbed_predictions():
    scores = score_finqa_files(GOLD, PERTURBED, details=True)
    by_id = {r["id"]: (r["execution_correct"], r["program_correct"]) for r in scores["records"]}
    assert by_id == {
        "HANDMADE/2009/page_1.pdf-1": (False, False),  # wrong divisor
        "HANDMADE/2019/page_2.pdf-1": (True, True),    # written-out program with extra spaces
        "HANDMADE/2019/page_2.pdf-2": (True, False),   # table steps swapped: same value, official keys differ
        "HANDMADE/2019/page_2.pdf-3": (False, False),  # malformed token structure
        "HANDMADE/2019/page_2.pdf-4": (False, False),  # greater with swapped arguments -> "no"
        "HANDMADE/2019/page_2.pdf-5": (True, False),   # right value, different program
        "HANDMADE/2019/page_2.pdf-6": (False, False),  # no EOF: the official code drops the last token
        "HANDMADE/2019/page_2.pdf-7": (True, False),   # ".5" is not the gold's "0.5" argument
        "HANDMADE/2019/page_2.pdf-8": (True, True),    # add(250, 150) == add(150, 250)
    }
    assert scores["count"] == 9                      # the 10th gold record has no prediction
    assert scores["missing_predictions"] == 1
    assert scores["execution_accuracy"] == pytest.approx(100 * 5 / 9)
    assert scores["program_accuracy"] == pytest.approx(100 * 2 / 9)
    assert scores["invalid"] == 2 and scores["unparseable"] == 0
    low, high = scores["execution_accuracy_ci90"]
    assert low < scores["execution_accuracy"] < high


def test_jsonl_and_gzip_files(tmp_path):
    predictions = json.loads(PERTURBED.read_text())
    jsonl = tmp_path / "predictions.jsonl"
    jsonl.write_text("\n".join(json.dumps(p) for p in predictions) + "\n")
    gold_gz = tmp_path / "gold.json.gz"
    with gzip.open(gold_gz, "wt", encoding="utf-8") as handle:
        handle.write(GOLD.read_text())
    assert score_finqa_files(gold_gz, jsonl)["execution_accuracy"] == pytest.approx(100 * 5 / 9)


def test_in_memory_api():
    gold = load_finqa_gold(GOLD)
    predictions = load_finqa_predictions(PERTURBED)
    assert execution_accuracy(predictions, gold) == pytest.approx(100 * 5 / 9)
    assert program_accuracy(predictions, gold) == pytest.approx(100 * 2 / 9)
    assert score_finqa([("HANDMADE/2019/page_2.pdf-4", "greater(1200, 1000)")], gold)["execution_accuracy"] == 100


def test_unparseable_written_out_program_is_wrong_on_both():
    gold = load_finqa_gold(GOLD)
    scores = score_finqa({"HANDMADE/2019/page_2.pdf-4": "greater(1200 1000"}, gold, details=True)
    assert scores["unparseable"] == 1 and scores["execution_accuracy"] == 0 and scores["program_accuracy"] == 0
    assert scores["records"][0]["error"] == "the program does not parse"


def test_program_equal_but_executing_differently_is_reported(tmp_path):
    # the gold exe_ans disagrees with its own program: the official script would stop at an assert
    records = json.loads(GOLD.read_text())[:1]
    records[0]["qa"]["exe_ans"] = 0.5
    gold = tmp_path / "gold.json"
    gold.write_text(json.dumps(records))
    predictions = tmp_path / "pred.json"
    predictions.write_text(json.dumps([{"id": records[0]["id"], "program": records[0]["qa"]["program"]}]))
    scores = score_finqa_files(gold, predictions)
    assert scores["program_accuracy"] == 100 and scores["execution_accuracy"] == 0
    assert scores["inconsistent"] == [records[0]["id"]]


# -- errors ---------------------------------------------------------------------------------------------------
def _write(tmp_path, name, data) -> Path:
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return path


def test_prediction_id_not_in_gold_is_an_error(tmp_path):
    predictions = _write(tmp_path, "p.json", [{"id": "nope", "program": "add(1, 2)"}])
    with pytest.raises(FinQAScoreError, match=r"p\.json: prediction id 'nope' not in the gold data"):
        score_finqa_files(GOLD, predictions)


@pytest.mark.parametrize("data, message", [
    ([{"id": "a", "program": "add(1, 2)"}, {"id": "a", "program": "add(1, 2)"}], r"record 1 \(id 'a'\): duplicate id"),
    ([{"program": "add(1, 2)"}], "record 0: field 'id' is missing"),
    ([{"id": "a"}], "needs a field 'predicted'"),
    ([{"id": "a", "predicted": 3}], "field 'predicted' must be a list of tokens"),
    ([{"id": "a", "program": ["add("]}], "field 'program' must be a string"),
    ({"not": "a list"}, "field 'id' is missing"),
    ([], "there are no predictions to score"),
    ("[{", "not valid JSON"),
])
def test_bad_prediction_files(tmp_path, data, message):
    predictions = _write(tmp_path, "p.json", data)
    with pytest.raises(FinQAScoreError, match=message):
        score_finqa_files(GOLD, predictions)


def _gold_with(tmp_path, **changes):
    record = json.loads(GOLD.read_text())[0]
    for key, value in changes.items():
        if key.startswith("qa_"):
            record["qa"][key[3:]] = value
        else:
            record[key] = value
    return _write(tmp_path, "gold.json", [record])


@pytest.mark.parametrize("changes, message", [
    ({"id": ""}, "field 'id' is missing"),
    ({"table": "x"}, "field 'table' must be a list of rows"),
    ({"qa": None}, "field 'qa' is missing"),
    ({"qa_program": None}, "field 'qa.program' is missing"),
    ({"qa_exe_ans": "0.01639"}, "field 'qa.exe_ans' must be a number or 'yes'/'no'"),
    ({"qa_exe_ans": True}, "field 'qa.exe_ans' must be a number"),
])
def test_bad_gold_files(tmp_path, changes, message):
    gold = _gold_with(tmp_path, **changes)
    with pytest.raises(FinQAScoreError, match=r"gold\.json: record 0.*" + message):
        load_finqa_gold(gold)


def test_duplicate_gold_ids(tmp_path):
    records = json.loads(GOLD.read_text())[:1] * 2
    with pytest.raises(FinQAScoreError, match=r"record 1 \(id 'HANDMADE/2009/page_1.pdf-1'\): duplicate id"):
        load_finqa_gold(_write(tmp_path, "gold.json", records))


def test_missing_files(tmp_path):
    with pytest.raises(FinQAScoreError, match="file not found"):
        score_finqa_files(tmp_path / "missing.json", PERFECT)
    copied = tmp_path / "gold.json"
    shutil.copy(GOLD, copied)
    with pytest.raises(FinQAScoreError, match=r"missing\.json: file not found"):
        score_finqa_files(copied, tmp_path / "missing.json")


def test_errors_are_scoring_input_errors():
    assert issubclass(FinQAScoreError, ScoringInputError) and issubclass(FinQAScoreError, ValueError)


def test_unreadable_gold_program_is_an_error():
    with pytest.raises(FinQAScoreError, match="cannot be read the official way"):
        program_match("table_max(net income (loss), none)", "table_max(net income (loss), none)")


# -- single predictions -------------------------------------------------------------------------------------
def test_execution_match():
    assert execution_match("table_max(net sales, none), table_min(net sales, none), subtract(#0, #1)", TABLE, 400.0)
    assert execution_match(program_to_tokens("greater(1200, 1000)"), TABLE, "yes")
    assert not execution_match("divide(1, 0)", TABLE, 0)
    assert not execution_match("divide(1, 3)", TABLE, 0.333333)  # rounded to 5 decimals first
    assert execution_match("divide(1, 3)", TABLE, 0.33333)
    assert not execution_match("add(1,", TABLE, 1)


@pytest.mark.parametrize("gold, predicted, equal", [
    ("add(1, 2)", "add(2, 1)", True),
    ("multiply(3, 4)", "multiply(4, 3)", True),
    ("add(1, 2), add(#0, 3)", "add(2, 3), add(1, #0)", True),                 # associativity
    ("multiply(1200, 12%), divide(#0, const_100)", "divide(1200, const_100), multiply(#0, 12%)", True),
    ("subtract(5, 3), divide(#0, 3)", "divide(5, 3), subtract(#0, const_1)", False),  # const_1 not in gold
    ("subtract(5, 3)", "subtract(3, 5)", False),
    ("divide(5, 3)", "divide(5.0, 3)", False),                               # same value, other text
    ("greater(5, 3)", "greater(3, 5)", False),
    ("add(1, 2)", "add(1, 2), add(#0, 1)", False),
    ("table_average(net sales, none)", "table_average(net sales, none)", True),
    ("table_average(net sales, none)", "table_sum(net sales, none)", False),
    ("table_max(net sales, none), table_min(net sales, none), subtract(#0, #1)",
     "table_max(net sales, none), table_min(net sales, none), subtract(#0, #1)", True),
])
def test_program_match(gold, predicted, equal):
    assert program_match(predicted, gold) is equal
    assert program_match(program_to_tokens(predicted), gold) is equal


def test_program_match_rejects_bad_structure_and_references():
    assert not program_match(["add(", "#1", "2", ")", "add(", "1", "2", ")", "EOF"], "add(1, 2), add(#0, 2)")
    assert not program_match(["add(", "1", "2", "EOF"], "add(1, 2)")
    assert not program_match([], "add(1, 2)")
    assert not program_match(["add(", 1, 2, ")", "EOF"], "add(1, 2)")
    assert not program_match(None, "add(1, 2)")


def test_program_match_is_bounded_for_exploding_references():
    doubling = ["add(1, 2)"] + [f"add(#{i}, #{i})" for i in range(40)]
    assert program_match(", ".join(doubling), "add(1, 2)") is False


# -- answer matching ---------------------------------------------------------------------------------------
def test_finqa_exact_match():
    assert finqa_exact_match(0.016390584, 0.01639)
    assert not finqa_exact_match(0.0164, 0.01639)
    assert finqa_exact_match("0.01639", 0.01639)
    assert finqa_exact_match(94, 94.0)
    assert finqa_exact_match("yes", "yes")
    assert not finqa_exact_match("Yes", "yes")
    assert not finqa_exact_match(True, "yes")
    assert not finqa_exact_match("abc", 1.0)
    assert not finqa_exact_match(float("nan"), 1.0)


def test_seer_finqa_match():
    assert seer_finqa_match(0.0164, 0.01639)              # within 0.001
    assert seer_finqa_match(1.639, 0.01639)               # percent vs decimal (/100)
    assert seer_finqa_match(0.0001639, 0.01639)           # (*100)
    assert not seer_finqa_match(1.639, 0.01639, percentage=False)
    assert not seer_finqa_match(12.344, 12.34)            # no rounding in SEER's FinQA check
    assert seer_finqa_match(True, "yes") and seer_finqa_match(0, "no")
    assert not seer_finqa_match(1, "no")
    assert seer_finqa_match("abc", "abcd") and seer_finqa_match("", "abc")  # SEER: "" is in every text
    assert not seer_finqa_match("1.0", 1.0)               # SEER compares text only with text


@pytest.mark.parametrize("pred, gold, expected", [
    ("$1,234.5 million", 1234.5, True),
    ("(12)", -12, True),
    ("1.64%", 0.01639, True),
    ("16.39%", 0.1639, True),
    ("16.39", "16.39%", True),
    (12.344, 12.34, True),                 # rounding to 2 decimals
    (12.36, 12.34, False),
    (0.0164, 0.01639, True),
    (0.0199, 0.01639, False),              # small ratios compared as percentages (1.99 vs 1.64)
    (1.64, 0.01639, True),
    ("yes", True, True),
    ("no", "yes", False),
    ("Americas", "americas", True),
    ("north", "north america", False),     # no substring fallback (it made "-" match -0.5)
    ("-", -0.5, False),
    ("North America.", "north america", True),
    ("", "x", False),
    (None, 1, False),
    ([1, 2], [2.0, 1.0], True),
    ([1], 1, True),
    ([1, 2], [1, 1], False),
    ("3 years", 3, True),
    ("abc", 1, False),
])
def test_kdspy_lenient_match(pred, gold, expected):
    assert kdspy_lenient_match(pred, gold) is expected


def test_kdspy_lenient_match_without_rounding():
    assert not kdspy_lenient_match(12.344, 12.34, decimals=None)
    assert kdspy_lenient_match(12.3405, 12.34, decimals=None)


def test_kdspy_lenient_match_reads_numpy_scalars_as_numbers():
    np = pytest.importorskip("numpy")
    assert not kdspy_lenient_match(np.int64(0), 0.02899)  # was a "match" through the substring fallback
    assert kdspy_lenient_match(np.float32(0.0164), 0.01639) and kdspy_lenient_match(np.int64(3), "3")


def test_normalize_answer_number():
    assert normalize_answer_number("$ (1,234.5)") == -1234.5
    assert normalize_answer_number("2.5 billion") == 2.5
    assert normalize_answer_number("nan") is None
    assert normalize_answer_number("n/a") is None
    assert normalize_answer_number(False) == 0.0
