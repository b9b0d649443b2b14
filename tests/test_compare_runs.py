"""bench/scoring/paired_runs.py (benchmarks/compare_runs.py): paired comparisons of two results directories,
optionally on split positions."""

import json
import os
from pathlib import Path

import pytest

from knapsack_dspy.bench.scoring import paired_runs as compare_runs
from knapsack_dspy.data.loader import load_examples

DATA = Path(os.environ.get("KDSPY_DATA_DIR", Path(__file__).resolve().parents[2] / "shared" / "data"))
pytestmark = pytest.mark.skipif(not (DATA / "tatqa" / "dev_tune.json.gz").exists(), reason="TAT-QA data not found")


def _write(directory: Path, rows) -> Path:
    directory.mkdir()
    (directory / "predictions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return directory


def _row(example_id, selector, em):
    return {"run": f"tatqa|pot|{selector}", "example_id": example_id, "em": em, "f1": em,
            "spec": {"selector": selector, "dataset": "tatqa", "eval_split": "dev_tune"}}


def test_questions_by_position_restrict_the_pairs(tmp_path, capsys):
    ids = [example["id"] for example in load_examples("tatqa", "dev_tune")[:4]]
    # SEER right on questions 1-2 only; KATE right on 3-4 only: opposite verdicts on the two halves
    rows = [_row(i, "seer", float(n < 2)) for n, i in enumerate(ids)] + \
           [_row(i, "kate", float(n >= 2)) for n, i in enumerate(ids)]
    results = _write(tmp_path / "a", rows)
    assert compare_runs.main([str(results), str(results), "--pairs", "seer:kate", "--questions", "1:2"]) == 0
    first_half = capsys.readouterr().out.splitlines()[-1]
    assert "| seer − kate | 2 | 100.0 | 0.0 | +100.0" in first_half
    compare_runs.main([str(results), str(results), "--pairs", "seer:kate", "--questions", "3:4"])
    assert "| seer − kate | 2 | 0.0 | 100.0 | -100.0" in capsys.readouterr().out.splitlines()[-1]
    compare_runs.main([str(results), str(results), "--pairs", "seer:kate"])
    assert "| seer − kate | 4 | 50.0 | 50.0 | +0.0" in capsys.readouterr().out.splitlines()[-1]
    with pytest.raises(SystemExit):
        compare_runs.main([str(results), str(results), "--pairs", "seer:kate", "--questions", "one:two"])
