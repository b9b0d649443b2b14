"""Issue 49's pre-registered questions and suites (benchmarks/whole_prompt_questions.py,
benchmarks/whole_prompt_{tatqa,finqa}.toml; no LM): which rows count as answered with an LM, the suites' arms, and
their ids equal to what the script computes from the committed rows and the data."""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from pathlib import Path

import pytest

from knapsack_dspy.bench.suites.suite import load_suite

ROOT = Path(__file__).resolve().parents[2]
DATA = Path(os.environ.get("KDSPY_DATA_DIR", ROOT.parent / "shared" / "data"))
SUITES = {"tatqa": ROOT / "benchmarks" / "whole_prompt_tatqa.toml",
          "finqa": ROOT / "benchmarks" / "whole_prompt_finqa.toml"}
needs_data = pytest.mark.skipif(not (DATA / "tatqa" / "dev_pool.json.gz").exists()
                                or not (DATA / "finqa" / "dev_docs.json.gz").exists(), reason="data not found")


def _script():
    spec = importlib.util.spec_from_file_location("whole_prompt_questions",
                                                  ROOT / "benchmarks" / "whole_prompt_questions.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["whole_prompt_questions"] = module
    spec.loader.exec_module(module)
    return module


def _write_rows(directory: Path, rows: list[dict], name: str = "predictions.jsonl") -> None:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / name).write_text("".join(json.dumps(r) + "\n" for r in rows))


def _row(example_id: str, selection_only: bool) -> dict:
    return {"run": "tatqa|pot|x" + ("|selection-only" if selection_only else ""), "example_id": example_id,
            "spec": {"dataset": "tatqa", "selection_only": selection_only}}


def test_lm_rows_count_as_answered_and_selection_only_rows_and_the_runs_own_outputs_do_not(tmp_path):
    script = _script()
    _write_rows(tmp_path / "benchmarks" / "results" / "lm_run", [_row("a", False), _row("b", True)])
    _write_rows(tmp_path / "benchmarks" / "results" / "selection", [_row("c", True)])
    _write_rows(tmp_path / "experiments" / "topic" / "results" / "deep" / "run", [_row("d", False)])
    _write_rows(tmp_path / "experiments" / "topic" / "not_results", [_row("e", False)])  # not a results folder
    for own in script.OWN_OUTPUTS:  # the pre-registered run's own rows, once committed
        _write_rows(tmp_path / own, [_row("f", False)])
    other = next(iter(script.OTHER_LM_ROWS))
    (tmp_path / other).parent.mkdir(parents=True)
    (tmp_path / other).write_text(json.dumps({"id": "g", "answer": "1"}) + "\n")
    answered = script.answered_ids(tmp_path)
    assert answered == {"a", "d", "g"}
    assert script.unanswered(["a", "b", "c", "d", "e", "f", "g", "h"], answered) == ["b", "c", "e", "f", "h"]
    assert script.unanswered(["a", "b", "c", "h"], answered, 2) == ["b", "c"]


def test_the_hash_is_of_the_sorted_ids_joined_by_newlines():
    import hashlib

    script = _script()
    assert script.ids_sha256(["b", "a"]) == hashlib.sha256(b"a\nb").hexdigest() == script.ids_sha256(["a", "b"])


@pytest.mark.parametrize("name", sorted(SUITES))
def test_the_suites_hold_the_pre_registered_arms(name):
    suite = load_suite(SUITES[name])
    runs = suite.runs
    assert len(runs) == 4 and len({r.key for r in runs}) == 4
    assert {r.selector for r in runs} == {"priced_case_coverage"}
    assert all(dict(r.selector_params) == {"token_price": 0.004} and r.max_exemplars == 4 for r in runs)
    default, exact, greedy, comparator = runs
    assert (default.budget, default.evidence_selection) == (2048, "rules")
    for run, solver in ((exact, "knapsack"), (greedy, "greedy")):
        assert (run.budget, run.evidence_selection, run.evidence, run.evidence_solver, run.evidence_weight) == (
            1024, "knapsack", "joint", solver, 1.0)
    assert (comparator.budget, comparator.evidence_selection, comparator.evidence) == (1024, "knapsack", "relevance")
    assert len({r.example_ids for r in runs}) == 1  # every arm on the same questions
    if name == "tatqa":
        assert {(r.pool_split, r.eval_split, r.pipeline, r.route, r.demo_table, r.demo_paragraphs) for r in runs} == {
            ("dev_pool_fold0", "dev_pool_fold1", "pot", "extract_compute", "gold_rows", "gold")}
    else:
        assert {(r.pool_split, r.eval_split, r.pipeline) for r in runs} == {
            ("docs_pool", "dev_docs_tune", "python_pot")}


@needs_data
def test_the_suites_ids_are_what_the_script_computes_and_their_hashes_are_documented():
    script = _script()
    found = script.questions()
    results = (ROOT / "docs" / "results.md").read_text()
    for name, path in SUITES.items():
        ids = list(load_suite(path).runs[0].example_ids)
        assert ids == found[name]["ids"]
        digest = script.ids_sha256(ids)
        assert digest in path.read_text() and digest in results
    assert len(found["finqa"]["ids"]) == 100
