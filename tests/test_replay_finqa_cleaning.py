"""benchmarks/replay_finqa_cleaning.py: recorded FinQA rows re-cleaned, executed and scored officially (no LM)."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest

from knapsack_dspy.bench.results.row_schema import as_row
from knapsack_dspy.data.loader import load_examples
from knapsack_dspy.data.seeded_order import in_seeded_order

ROOT = Path(__file__).resolve().parents[1]


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


def test_questions_by_position_follow_each_runs_order():
    data = Path(os.environ.get("KDSPY_DATA_DIR", ROOT.parent / "shared" / "data"))
    if not (data / "tatqa" / "dev_tune.json.gz").exists():
        pytest.skip("TAT-QA data not found")
    seeded = [example["id"] for example in in_seeded_order(load_examples("tatqa", "dev_tune"), 26)[:3]]
    spec = {"dataset": "tatqa", "eval_split": "dev_tune", "order_seed": 26}
    rows = [as_row({"run": "seer", "example_id": i, "spec": {**spec, "selector": "seer"}}) for i in seeded]
    kept = _script().in_positions(rows, "2:3")
    assert [r.example_id for r in kept] == seeded[1:]
