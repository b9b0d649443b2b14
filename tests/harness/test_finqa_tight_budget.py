"""experiments/finqa_tight_budget/finqa_tight_budget.py: which rows it reads and the figures it computes (no LM)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _script():
    spec = importlib.util.spec_from_file_location("finqa_tight_budget", ROOT / "experiments" / "finqa_tight_budget" /
                                                  "finqa_tight_budget.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["finqa_tight_budget"] = module
    spec.loader.exec_module(module)
    return module


def _row(question: str, selector: str, correct: bool, program_correct=None, exemplars: int = 4,
         **spec) -> dict:
    spec = {"selector": selector, "budget": 4096, "exemplar_budget": 1024, "pool_split": "docs_pool",
            "dataset": "finqa", **spec}
    return {"run": f"finqa|{selector}|b{spec['budget']}|e{spec['exemplar_budget']}|{spec.get('selection_only')}",
            "example_id": question, "doc_id": question.split("-")[0], "correct": correct,
            "program_correct": program_correct, "prompt_tokens": 1000 + 10 * exemplars,
            "exemplar_ids": [f"d{i}" for i in range(exemplars)], "spec": spec}


def _write(directory: Path, rows: list[dict]) -> Path:
    directory.mkdir()
    (directory / "predictions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return directory


def test_reads_the_tight_lm_runs_and_pairs_them_with_kate_within_budget(tmp_path, capsys):
    script = _script()
    rows = [
        # the tight group: SEER right on a-1 and b-1, KATE within budget on a-2 and b-1
        _row("a-1", "seer", True, True), _row("a-2", "seer", False, None), _row("b-1", "seer", True, False),
        _row("a-1", "kate_within_budget", False, False, exemplars=3), _row("a-2", "kate_within_budget", True, True),
        _row("b-1", "kate_within_budget", True, True, exemplars=3),
        # not read: the whole-prompt budget's run (everything right) and a selection-only run
        *[_row(q, "seer", True, True, exemplar_budget=None, budget=2048) for q in ("a-1", "a-2", "b-1")],
        *[_row(q, "seer", False, selection_only=True) for q in ("a-1", "a-2", "b-1")],
        # a question KATE within budget never answered: not compared
        _row("c-1", "seer", True, True),
    ]
    results = _write(tmp_path / "finqa", rows)
    out = tmp_path / "tight.json"
    assert script.main([str(results), "--json", str(out)]) == 0
    figures = json.loads(out.read_text())
    assert (figures["n"], figures["pages"]) == (3, 2)
    seer, kate = figures["selectors"]["seer"], figures["selectors"]["kate_within_budget"]
    assert seer["execution_accuracy"] == pytest.approx(200 / 3)
    assert seer["program_accuracy"] == pytest.approx(50.0)  # over the rows that define it (2 of 3)
    assert kate["program_accuracy"] == pytest.approx(200 / 3)
    assert (seer["exemplars"], kate["exemplars"]) == (4.0, pytest.approx(10 / 3))
    diff = figures["differences"]["seer"]
    assert diff["difference"] == pytest.approx(0.0)
    assert (diff["wins"], diff["losses"], diff["clusters"]) == (1, 1, 2)
    assert "kate_within_budget" not in figures["differences"]
    assert "| seer | 66.7 | 50.0 | 4.00 |" in capsys.readouterr().out


def test_two_exemplar_budgets_are_named_not_mixed(tmp_path):
    script = _script()
    rows = [_row("a-1", "seer", True), _row("a-1", "kate_within_budget", False),
            _row("a-1", "seer", False, exemplar_budget=2048), _row("a-1", "kate_within_budget", True,
                                                                    exemplar_budget=2048)]
    results = _write(tmp_path / "finqa", rows)
    with pytest.raises(SystemExit, match=r"2 runs of seer .*\(--exemplar-budget\)"):
        script.main([str(results)])
    figures = script.summary(script.tight_rows(results, exemplar_budget=2048))
    assert figures["differences"]["seer"]["difference"] == pytest.approx(-100.0)


def test_no_tight_rows_or_no_reference_is_an_error(tmp_path):
    script = _script()
    only_whole_prompt = _write(tmp_path / "a", [_row("a-1", "seer", True, exemplar_budget=None)])
    with pytest.raises(SystemExit, match="no LM rows with an exemplar budget"):
        script.main([str(only_whole_prompt)])
    no_reference = _write(tmp_path / "b", [_row("a-1", "seer", True)])
    with pytest.raises(SystemExit, match="no kate_within_budget rows"):
        script.main([str(no_reference)])


def test_greedy_and_other_pools_are_their_own_rows_and_a_failed_call_counts_wrong(tmp_path):
    script = _script()
    failed = {**_row("b-1", "seer", False), "error": "timeout", "error_kind": "transient"}
    del failed["correct"], failed["program_correct"]
    no_selection = {**_row("c-1", "seer", False, False), "prompt_tokens": None, "exemplar_ids": []}
    rows = [_row("a-1", "seer", True, True), failed, no_selection,
            *[_row(q, "kate_within_budget", False, False) for q in ("a-1", "b-1", "c-1")],
            *[_row(q, "case_coverage", True, True, selector_params={"solver": "greedy"}) for q in ("a-1", "b-1",
                                                                                                  "c-1")],
            *[_row(q, "case_coverage", False, False) for q in ("a-1", "b-1", "c-1")],
            *[_row(q, "seer", True, True, pool_split="train") for q in ("a-1", "b-1", "c-1")]]
    figures = script.summary(script.tight_rows(_write(tmp_path / "finqa", rows)))
    assert set(figures["selectors"]) == {"seer", "kate_within_budget", "case_coverage greedy", "case_coverage",
                                         "seer (train)"}
    seer = figures["selectors"]["seer"]
    assert seer["execution_accuracy"] == pytest.approx(100 / 3)  # the failed call and the failed selection: wrong
    assert seer["program_accuracy"] == pytest.approx(50.0)  # of a-1 and c-1: the failed call defines none
    assert (seer["exemplars"], seer["prompt_tokens"]) == (4.0, 1040.0)  # the failed selection measured nothing
    assert figures["differences"]["case_coverage greedy"]["difference"] == pytest.approx(100.0)
    assert figures["differences"]["case_coverage"]["difference"] == pytest.approx(0.0)


def test_questions_keep_the_range_and_an_empty_range_is_named(tmp_path, monkeypatch):
    script = _script()
    rows = [_row(q, s, q == "a-1") for q in ("a-1", "a-2", "b-1") for s in ("seer", "kate_within_budget")]
    results = _write(tmp_path / "finqa", rows)
    asked = []

    def positions(rows, text):
        asked.append(text)
        return {"a-2", "b-1"} if text == "2:3" else set()

    monkeypatch.setattr(script, "questions_of_rows", positions)
    figures = script.summary(script.tight_rows(results), "2:3")
    assert (figures["n"], figures["questions"]) == (2, "2:3")
    assert figures["selectors"]["seer"]["execution_accuracy"] == 0.0  # a-1, the only right one, is outside
    with pytest.raises(SystemExit, match=r"no row at positions 9:10 \(the runs answered 3 questions\)"):
        script.summary(script.tight_rows(results), "9:10")
    assert asked == ["2:3", "9:10"]
