"""experiments/selection_objective/selection_objective_gate.py: which rows the gate reads (no LM)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _script():
    spec = importlib.util.spec_from_file_location("selection_objective_gate",
                                                  ROOT / "experiments" / "selection_objective" /
                                                  "selection_objective_gate.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["selection_objective_gate"] = module
    spec.loader.exec_module(module)
    return module


def _row(question: str, selector: str, correct: bool, pool: str = "docs_pool", **spec) -> dict:
    spec = {"selector": selector, "budget": 2048, "pool_split": pool, "dataset": "finqa", **spec}
    return {"run": f"finqa|{selector}|{pool}|{spec.get('selector_params')}", "example_id": question,
            "doc_id": question.split("-")[0], "correct": correct, "prompt_tokens": 100, "spec": spec}


def _write(directory: Path, rows: list[dict]) -> Path:
    directory.mkdir()
    (directory / "predictions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return directory


def test_only_the_named_pools_runs_are_read(tmp_path):
    gate = _script()
    # the case pool's SEER is right on q1, the document pool's wrong: the gate must read the document pool only,
    # whatever order the rows are in
    results = _write(tmp_path / "finqa", [_row("a-1", "seer", False), _row("a-1", "seer", True, pool="train"),
                                          _row("a-1", "seer", True, exemplar_budget=1024)])
    scores = gate.read_scores(results, "finqa", budget=2048, pool="docs_pool")
    assert scores["seer"]["score"] == {"finqa:a-1": 0.0}
    with pytest.raises(SystemExit, match=r"2 runs of seer .*name the pool \(--finqa-pool\)"):
        gate.read_scores(results, "finqa", budget=2048)


def test_the_greedy_is_its_own_selector(tmp_path):
    gate = _script()
    results = _write(tmp_path / "finqa", [_row("a-1", "case_coverage", True),
                                          _row("a-1", "case_coverage", False, selector_params={"solver": "greedy"})])
    scores = gate.read_scores(results, "finqa", budget=2048, pool="docs_pool")
    assert scores["case_coverage"]["score"] == {"finqa:a-1": 1.0}
    assert scores["case_coverage greedy"]["score"] == {"finqa:a-1": 0.0}


def test_a_malformed_question_range_is_an_error(tmp_path):
    gate = _script()
    results = _write(tmp_path / "finqa", [_row("a-1", "seer", False)])
    with pytest.raises(SystemExit, match="FROM:TO"):
        gate.read_scores(results, "finqa", questions="150:61", budget=2048)


def test_a_pool_without_rows_is_named(tmp_path):
    gate = _script()
    results = _write(tmp_path / "finqa", [_row("a-1", "seer", False)])
    with pytest.raises(SystemExit, match="no finqa rows answered at budget 2048 from pool 'cases'"):
        gate.read_scores(results, "finqa", budget=2048, pool="cases")
