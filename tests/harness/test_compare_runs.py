"""bench/scoring/paired_runs.py (benchmarks/compare_runs.py): paired comparisons of two results directories,
optionally on split positions."""

import json
import os
from pathlib import Path

import pytest

from knapsack_dspy.bench.scoring import paired_runs as compare_runs
from knapsack_dspy.docqa.data.loader import load_examples
from knapsack_dspy.docqa.data.seeded_order import in_seeded_order

DATA = Path(os.environ.get("KDSPY_DATA_DIR", Path(__file__).resolve().parents[3] / "shared" / "data"))
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


def test_positions_follow_the_suites_seeded_order(tmp_path, capsys):
    seeded = [example["id"] for example in in_seeded_order(load_examples("tatqa", "dev_tune"), 26)[:4]]
    rows = [{**_row(i, selector, em), "spec": {**_row(i, selector, em)["spec"], "order_seed": 26}}
            for n, i in enumerate(seeded) for selector, em in (("seer", float(n < 2)), ("kate", float(n >= 2)))]
    results = _write(tmp_path / "a", rows)
    compare_runs.main([str(results), str(results), "--pairs", "seer:kate", "--questions", "1:2"])
    assert "| seer − kate | 2 | 100.0 | 0.0 | +100.0" in capsys.readouterr().out.splitlines()[-1]


def test_rows_in_two_orders_make_positions_ambiguous(tmp_path):
    ids = [example["id"] for example in load_examples("tatqa", "dev_tune")[:2]]
    rows = [_row(ids[0], "seer", 1.0), {**_row(ids[1], "kate", 0.0),
                                         "spec": {**_row(ids[1], "kate", 0.0)["spec"], "order_seed": 26}}]
    results = _write(tmp_path / "a", rows)
    with pytest.raises(SystemExit, match="different orders"):
        compare_runs.main([str(results), str(results), "--pairs", "seer:kate", "--questions", "1:2"])
