"""benchmarks/replay_finqa_cleaning.py: recorded FinQA rows re-cleaned, executed and scored officially (no LM)."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import sys
from pathlib import Path

import pytest

from knapsack_dspy.bench.results.row_schema import as_row
from knapsack_dspy.docqa.data.loader import load_examples
from knapsack_dspy.docqa.data.seeded_order import in_seeded_order

ROOT = Path(__file__).resolve().parents[2]


def _script():
    spec = importlib.util.spec_from_file_location("replay_finqa_cleaning", ROOT / "benchmarks" /
                                                  "replay_finqa_cleaning.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["replay_finqa_cleaning"] = module
    spec.loader.exec_module(module)
    return module


TABLE = [["", "2019", "2018"], ["revenue", "100", "80"], ["costs", "60", "50"]]
EXAMPLE = {"id": "q1", "dataset": "finqa", "question": "What was the average?", "table": TABLE, "answer": 44.8,
           "program": "multiply(45, const_4), add(#0, 44), divide(#1, const_5)", "exe_ans": 44.8}


def row(selector: str, output: str, answer, correct: bool, *, attempts: int = 1, **spec) -> object:
    return as_row({"run": selector, "example_id": "q1", "output": output, "answer": answer, "correct": correct,
                   "program_correct": correct, "attempts": attempts, "error": None if answer is not None else "x",
                   "gold": 44.8, "spec": {"pipeline": "finqa_pot", "selector": selector, "eval_split": "t", **spec}})


def test_a_flattened_program_is_rescored_and_the_rest_keep_their_scores():
    replay = _script().replay
    rows = [row("seer", "divide(sum(45, 45, 45, 45, 44), 5)", None, False),     # now runs: 44.8
            row("kate_within_budget", "divide(224, 5)", 44.8, True),            # unchanged
            row("no_demos", "table_max(revenue), divide(#0, 2)", None, False),  # now runs: 50, still wrong
            row("seer", "add(1, 2)", 3.0, False, exemplar_budget=1024),         # another run label
            row("seer", "divide(sum(1, 2), 3)", None, False, attempts=2)]        # a repair: not replayed
    counts, changed = replay(rows, {"q1": EXAMPLE})
    assert counts["seer"]["rows"] == 1 and counts["seer"]["changed"] == 1
    assert counts["seer"]["EA before"] == 0 and counts["seer"]["EA after"] == 1
    assert counts["seer"]["invalid before"] == 1 and counts["seer"]["invalid after"] == 0
    assert counts["seer"]["repaired, not replayed"] == 1
    assert counts["kate_within_budget"]["EA after"] == 1 and counts["kate_within_budget"]["changed"] == 0
    assert counts["no_demos"]["changed"] == 1 and counts["no_demos"]["EA after"] == 0
    assert counts["seer@L1024"]["rows"] == 1
    assert [(label, program) for label, _row, program, _result, _scores in changed] == [
        ("seer", "add(45, 45), add(#0, 45), add(#1, 45), add(#2, 44), divide(#3, 5)"),
        ("no_demos", "table_max(revenue, none), divide(#0, 2)")]


def test_questions_by_position_follow_each_runs_order(tmp_path, capsys):
    data = Path(os.environ.get("KDSPY_DATA_DIR", ROOT.parent / "shared" / "data"))
    if not (data / "finqa" / "dev_docs.json.gz").exists():
        pytest.skip("FinQA dev documents not found")
    questions = in_seeded_order(load_examples("finqa", "dev_docs_tune"), 26)[:3]
    spec = {"dataset": "finqa", "eval_split": "dev_docs_tune", "order_seed": 26, "pipeline": "finqa_pot",
            "selector": "seer"}
    # question 1 right, 2 and 3 wrong (no program): positions 2-3 hold only the wrong ones
    rows = [{"run": "seer", "example_id": q["id"], "output": q["program"] if n == 0 else "", "attempts": 1,
             "answer": 1.0 if n == 0 else None, "correct": n == 0, "program_correct": n == 0, "spec": spec}
            for n, q in enumerate(questions)]
    (tmp_path / "predictions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    script = _script()
    assert script.main([str(tmp_path), "--show", "0", "--questions", "2:3"]) == 0
    assert re.search(r"^seer\s+2\s+0\s+2 -> 2\s+0\.0 ->\s+0\.0", capsys.readouterr().out, re.M)
    script.main([str(tmp_path), "--show", "0", "--questions", "1:3"])
    assert re.search(r"^seer\s+3\s+0\s+2 -> 2\s+33\.3 ->\s+33\.3", capsys.readouterr().out, re.M)
    with pytest.raises(SystemExit, match="positions 4:5"):
        script.main([str(tmp_path), "--questions", "4:5"])
