"""benchmarks/tatqa_token_price_reask.py: issue 50's TAT-QA re-ask read from rows (no LM): the rule's price against
the constant on the re-asked questions, the re-ask against the tokens run's first ask, and both arms over all of
its questions."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import script_module

from knapsack_dspy.bench.scoring.arm_figures import ArmError

SPEC = {"dataset": "tatqa", "pipeline": "pot", "pool_split": "dev_pool", "eval_split": "dev_tune", "budget": 2048,
        "max_exemplars": 4, "demo_table": "gold_rows", "demo_paragraphs": "gold"}


def _script():
    return script_module("benchmarks/tatqa_token_price_reask.py")


def _row(run: str, params: dict, question: int, right: bool, *, prompt: str, error: str | None = None,
         **spec) -> dict:
    return {"run": run, "example_id": f"q{question}", "doc_id": f"d{question // 2}", "em": right,
            "prompt_tokens": 1000 + 10 * question, "within_budget": True, "exemplar_ids": ["a"],
            "spec": {**SPEC, "selector": "case_coverage", "selector_params": params, **spec},
            "prompt_sha256": [prompt], "lm_calls": 1, "cache_hits": 0, "prefill_s": 10.0, "decode_s": 2.0,
            "lm_seconds": 12.0, "error": error}


def _write(directory: Path, rows: list[dict]) -> Path:
    directory.mkdir()
    (directory / "predictions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return directory


def _reask(tmp_path, answered: int = 10, constant_answered: int = 10, first: int = 0) -> Path:
    """Questions first..first+9 planned: the rule right on the first 6, the constant on the first 3 (its 10th
    failed); ``answered`` / ``constant_answered``: how many each arm has answered so far."""
    rows = []
    planned = [f"q{i}" for i in range(first, first + 10)]
    for i in range(max(answered, constant_answered)):
        q = first + i
        if i < constant_answered:
            rows.append({**_row("constant", {"token_price": 0.004}, q, i < 3, prompt=f"c{q}",
                                error="parse" if i == 9 else None), "spec": _spec({"token_price": 0.004}, planned)})
        if i < answered:
            rows.append({**_row("rule", {"token_price": "auto"}, q, i < 6, prompt=f"r{q}"),
                         "spec": _spec({"token_price": "auto"}, planned)})
    return _write(tmp_path / f"reask{answered}-{constant_answered}-{first}", rows)


def _spec(params: dict, planned: list[str]) -> dict:
    return {**SPEC, "selector": "case_coverage", "selector_params": params, "example_ids": planned}


def _tokens_run(tmp_path) -> Path:
    """The tokens run: arm (2) on questions 0-29 (right on the even ones; the prompts of 0-7 as re-asked), and runs
    the analysis must leave out (unpriced, greedy, full demos)."""
    rows = []
    for q in range(30):
        rows.append(_row("arm2", {"token_price": 0.004}, q, q % 2 == 0, prompt=f"c{q}" if q < 8 else f"old{q}"))
        rows.append(_row("greedy", {"token_price": 0.004, "solver": "greedy"}, q, False, prompt=f"g{q}"))
        rows.append(_row("full", {"token_price": 0.004}, q, True, prompt=f"f{q}", demo_table="all"))
    return _write(tmp_path / "tokens", rows)


def test_the_rule_against_the_constant_on_the_reasked_questions(tmp_path):
    script = _script()
    code = script.main([str(_reask(tmp_path)), "--json", str(tmp_path / "out.json")])
    figures = json.loads((tmp_path / "out.json").read_text())
    assert code == 0 and figures["complete"] and figures["questions"] == 10
    assert figures["arms"]["rule"]["em"] == pytest.approx(60.0) and figures["arms"]["constant"]["em"] == 30.0
    d = figures["differences"]["rule - constant"]
    assert d["difference"] == pytest.approx(30.0) and (d["wins"], d["losses"]) == (3, 0)
    assert figures["failed_rows"] == {"constant": 1, "rule": 0} and "reask" not in figures


def test_a_partial_run_says_so_and_leaves_all_questions_for_the_end(tmp_path, capsys):
    script = _script()
    directory = _reask(tmp_path, answered=4)
    assert script.main([str(directory), "--tokens-run", str(_tokens_run(tmp_path)), "--json",
                        str(tmp_path / "out.json")]) == 0
    figures = json.loads((tmp_path / "out.json").read_text())
    assert not figures["complete"] and figures["questions"] == 4 and figures["reask"]["questions"] == 4
    assert "all_questions" not in figures  # the 6 not yet re-asked would count as selecting the same
    # the constant's failed 10th row is not among the 4 questions both arms answered
    assert figures["failed_rows"] == {"constant": 0, "rule": 0}
    out = capsys.readouterr().out
    assert out.startswith("4 questions (partial: the suite has 10)") and "once every planned question" in out


def test_the_reask_against_the_first_ask_and_over_all_its_questions(tmp_path, capsys):
    script = _script()
    code = script.main([str(_reask(tmp_path)), "--tokens-run", str(_tokens_run(tmp_path)),
                        "--json", str(tmp_path / "out.json")])
    figures = json.loads((tmp_path / "out.json").read_text())
    assert code == 0
    r = figures["reask"]
    # the same prompt on 0-7; the first ask right on 0, 2, 4, 6, 8; the re-ask on 0, 1, 2:
    # the same score on 0, 2, 3, 5, 7, 9
    assert (r["questions"], r["same_prompt"], r["same_score"], r["same_score_same_prompt"]) == (10, 8, 6, 5)
    assert r["first_em"] == pytest.approx(50.0) and r["difference"]["difference"] == pytest.approx(-20.0)
    whole = figures["all_questions"]
    assert whole["questions"] == 30 and whole["reasked"] == 10
    # questions 10-29 as the first ask answered them (even ones right: 10) in both arms
    assert whole["arms"]["rule"]["em"] == pytest.approx(100 * (6 + 10) / 30)
    assert whole["arms"]["constant"]["em"] == pytest.approx(100 * (3 + 10) / 30)
    assert whole["difference"]["difference"] == pytest.approx(10.0)
    out = capsys.readouterr().out
    assert "the same prompt on 8, scored the same on 6" in out and "All 30 of the tokens run's questions" in out


def test_a_run_the_suite_does_not_have_is_one_line_and_status_2(tmp_path, capsys):
    script = _script()
    with pytest.raises(ArmError):
        script.arm_of({"selector": "case_coverage", "selector_params": {"token_price": 0.004, "solver": "greedy"}})
    with pytest.raises(ArmError):
        script.arm_of({"selector": "kate", "selector_params": {}})
    directory = _write(tmp_path / "odd", [_row("x", {"token_price": 0.01}, 0, True, prompt="x")])
    assert script.main([str(directory)]) == 2
    assert capsys.readouterr().err.startswith("tatqa_token_price_reask: a run the suite does not have")
    no_arm2 = _write(tmp_path / "tokens", [_row("full", {"token_price": 0.004}, 0, True, prompt="f",
                                                 demo_table="all")])
    assert script.main([str(_reask(tmp_path)), "--tokens-run", str(no_arm2)]) == 2
    assert "no run of case_coverage at token_price 0.004" in capsys.readouterr().err


def test_a_reasked_question_the_tokens_run_did_not_ask_is_an_error(tmp_path, capsys):
    script = _script()
    assert script.main([str(_reask(tmp_path, first=25)), "--tokens-run", str(_tokens_run(tmp_path))]) == 2
    assert "5 re-asked questions are not among the tokens run's" in capsys.readouterr().err
