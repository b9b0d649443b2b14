"""``kdspy score``: JSON and table output for the three data sets, error handling, one real subprocess run."""

from __future__ import annotations

import dataclasses
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

import knapsack_dspy  # noqa: F401
from knapsack_dspy.cli.main import main

TATQA_GOLD = Path(__file__).parents[1] / "fixtures" / "metrics_tatqa_gold.json"
SARA_CASES = [
    {"id": "s151_a_pos", "type": "entailment", "label": "Entailment", "text": "t", "question": "q"},
    {"id": "s151_a_neg", "type": "entailment", "label": "Contradiction", "text": "t", "question": "q"},
    {"id": "tax_case_1", "type": "numerical", "answer": "$15037", "answer_value": 15037, "text": "t",
     "question": "q"},
    {"id": "tax_case_2", "type": "numerical", "answer": "$2000", "answer_value": 2000, "text": "t",
     "question": "q"},
]


def _write(path: Path, value) -> Path:
    path.write_text(value if isinstance(value, str) else json.dumps(value))
    return path


@pytest.fixture
def tatqa_predictions(tmp_path):
    return _write(tmp_path / "tatqa_pred.json", {
        "q-pct": [23.42, "percent"], "q-span": ["The net sales", ""], "q-years": [["2018", "2019"], ""],
        "q-count": [3, ""], "q-million": ["1,496.5", "million"], "q-thousand": ["1234", "thousand"],
        "q-zero": ["0", ""]})


def test_tatqa_json(tatqa_predictions, capsys):
    assert main(["score", "tatqa", "--gold", str(TATQA_GOLD), "--predictions", str(tatqa_predictions),
                 "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    # right: pct, years, million, thousand, zero (5 of 7); span F1 0.8; count wrong
    assert out["count"] == 7
    assert out["exact_match"] == pytest.approx(100 * 5 / 7)
    assert out["f1"] == pytest.approx(100 * (5 + 0.8) / 7)
    assert out["missing_predictions"] == 0


def test_tatqa_table(tatqa_predictions, capsys):
    assert main(["score", "tatqa", "--gold", str(TATQA_GOLD), "--predictions", str(tatqa_predictions)]) == 0
    out = capsys.readouterr().out
    assert "exact match (%)" in out and "71.43" in out and "F1 (%)" in out and "82.86" in out
    assert "by answer type" in out and "multi-span" in out


def test_sara_json_and_table(tmp_path, capsys):
    gold = _write(tmp_path / "cases.json", SARA_CASES)
    predictions = _write(tmp_path / "pred.json", {"s151_a_pos": "Entailment", "s151_a_neg": "Entailment",
                                                  "tax_case_1": "$15,037", "tax_case_2": 2150})
    assert main(["score", "sara", "--gold", str(gold), "--predictions", str(predictions), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["accuracy"] == 50.0 and out["count"] == 4
    assert out["entailment_accuracy"] == 50.0 and out["numerical_accuracy"] == 50.0
    assert out["numerical_within_10pct"] == 100.0
    assert out["numerical_authors_rule"] == 100.0  # |2150 - 2000| < max(200, 5000)
    assert main(["score", "sara", "--gold", str(gold), "--predictions", str(predictions)]) == 0
    table = capsys.readouterr().out
    assert "numerical accuracy, within 10% (%)" in table and "numerical, authors' rule (%)" in table


def test_finqa_is_delegated_to_score_finqa_files(tmp_path, capsys, monkeypatch):
    calls = []

    def fake(gold_path, predictions_path):
        calls.append((str(gold_path), str(predictions_path)))
        return {"execution_accuracy": 61.5, "program_accuracy": 58.25, "count": 200}

    from knapsack_dspy.docqa.tasks import task

    monkeypatch.setitem(task._REGISTRY, "finqa", dataclasses.replace(task._REGISTRY["finqa"], file_scorer=fake))
    gold = _write(tmp_path / "gold.json", [])
    predictions = _write(tmp_path / "pred.json", [])
    assert main(["score", "finqa", "--gold", str(gold), "--predictions", str(predictions), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"execution_accuracy": 61.5, "program_accuracy": 58.25,
                                                   "count": 200}
    assert calls == [(str(gold), str(predictions))]
    assert main(["score", "finqa", "--gold", str(gold), "--predictions", str(predictions)]) == 0
    table = capsys.readouterr().out
    assert "execution accuracy (%)" in table and "61.50" in table and "58.25" in table


def test_finqa_real_scorer(tmp_path, capsys):
    finqa = pytest.importorskip("knapsack_dspy.docqa.metrics.finqa")
    if not hasattr(finqa, "score_finqa_files"):
        pytest.skip("FinQA scorer not available")
    record = {"id": "R1", "pre_text": ["Revenue grew."], "post_text": [],
              "table": [["", "2019", "2018"], ["revenue", "5829", "5735"]],
              "qa": {"question": "What was the change in revenue?", "program": "subtract(5829, 5735)",
                     "exe_ans": 94.0, "gold_inds": {}}}
    gold = _write(tmp_path / "finqa_gold.json", [record])
    predictions = _write(tmp_path / "finqa_pred.json", [{"id": "R1", "program": "subtract(5829, 5735)"}])
    assert main(["score", "finqa", "--gold", str(gold), "--predictions", str(predictions), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["execution_accuracy"] == 100.0 and out["program_accuracy"] == 100.0 and out["count"] == 1


@pytest.mark.parametrize("dataset, gold_content, pred_content, message", [
    ("tatqa", None, "{}", "gold file '.*missing.json' not found"),
    ("tatqa", "[{]", "{}", "not valid JSON"),
    ("tatqa", "FIXTURE", '{"q-span": "oops"}', "expected \\[answer, scale\\]"),
    ("sara", '{"cases": []}', "{}", "expected a JSON list of SARA cases"),
    ("sara", json.dumps(SARA_CASES), "[1, 2]", "expected a JSON object"),
])
def test_errors_are_one_clean_line(tmp_path, capsys, dataset, gold_content, pred_content, message):
    if gold_content is None:
        gold = tmp_path / "missing.json"
    elif gold_content == "FIXTURE":
        gold = TATQA_GOLD
    else:
        gold = _write(tmp_path / "gold.json", gold_content)
    predictions = _write(tmp_path / "pred.json", pred_content)
    assert main(["score", dataset, "--gold", str(gold), "--predictions", str(predictions), "--json"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("kdspy score: error: ")
    assert re.search(message, lines[0])


def test_strict_rejects_missing_and_unknown_ids(tmp_path, capsys):
    predictions = _write(tmp_path / "pred.json", {"q-span": ["x", ""], "elsewhere": ["y", ""]})
    args = ["score", "tatqa", "--gold", str(TATQA_GOLD), "--predictions", str(predictions)]
    assert main([*args, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["missing_predictions"] == 6 and out["unknown_prediction_ids"] == 1
    assert main([*args, "--strict"]) == 2
    assert "6 gold id(s) without a prediction, 1 prediction id(s) not in the gold file" in capsys.readouterr().err


def test_unknown_dataset_is_a_usage_error(capsys):
    assert main(["score", "drop", "--gold", "a", "--predictions", "b"]) == 2
    assert "unknown dataset 'drop' (expected one of finqa, sara, tatqa)" in capsys.readouterr().err


def test_subprocess_json(tatqa_predictions):
    done = subprocess.run([sys.executable, "-m", "knapsack_dspy.cli.main", "score", "tatqa", "--gold",
                           str(TATQA_GOLD), "--predictions", str(tatqa_predictions), "--json"],
                          check=False, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert set(out) >= {"exact_match", "f1", "count"} and out["count"] == 7


def test_a_reader_that_goes_away_is_not_a_traceback(tatqa_predictions):
    """``kdspy score ... | head -0``: the pipe's reader is gone before we write; no BrokenPipeError traceback."""
    import os

    read_end, write_end = os.pipe()
    os.close(read_end)  # every write to the pipe now fails with EPIPE, like a finished `head`
    try:
        done = subprocess.run([sys.executable, "-m", "knapsack_dspy.cli.main", "score", "tatqa", "--gold",
                               str(TATQA_GOLD), "--predictions", str(tatqa_predictions)],
                              check=False, stdout=write_end, stderr=subprocess.PIPE, text=True, timeout=120)
    finally:
        os.close(write_end)
    assert done.returncode == 141
    assert "Traceback" not in done.stderr and "BrokenPipe" not in done.stderr, done.stderr
