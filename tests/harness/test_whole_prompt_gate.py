"""benchmarks/whole_prompt_gate.py: issue 49's four arms read from rows (no LM) -- named by their evidence settings,
the gate's conditions (the difference by document, the prompt tokens, the tokens after the instructions), a partial
run undecided, the instructions' hash compared across the arms, FinQA's failure classes."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import script_module

from knapsack_dspy.bench.results.store import ResultsStore, load_rows
from knapsack_dspy.bench.scoring.arm_figures import ArmError, read_arms

SPEC = {"dataset": "tatqa", "pipeline": "pot", "pool_split": "dev_pool_fold0", "eval_split": "dev_pool_fold1",
        "selector": "priced_case_coverage", "selector_params": {"token_price": 0.004}, "max_exemplars": 4}
#: arm -> its run's settings (as benchmarks/whole_prompt_tatqa.toml's runs)
RUNS = {"default": {"budget": 2048, "evidence_selection": "rules"},
        "whole_prompt": {"budget": 1024, "evidence_selection": "knapsack", "evidence": "joint",
                         "evidence_solver": "knapsack"},
        "whole_prompt_greedy": {"budget": 1024, "evidence_selection": "knapsack", "evidence": "joint",
                                "evidence_solver": "greedy"},
        "fair_relevance": {"budget": 1024, "evidence_selection": "knapsack", "evidence": "relevance",
                           "evidence_solver": "knapsack"}}
QUESTIONS = 120
INSTRUCTIONS = 380


def _script():
    return script_module("benchmarks/whole_prompt_gate.py")


def _row(arm: str, question: int, right: bool, tokens: int, dataset: str = "tatqa", **extra) -> dict:
    knapsack = arm != "default"
    return {"run": f"{dataset}|{arm}", "example_id": f"q{question}", "doc_id": f"d{question // 4}", "em": float(right),
            "correct": right, "prompt_tokens": tokens, "within_budget": True, "exemplar_ids": ["a"] * (question % 2),
            "instruction_tokens": INSTRUCTIONS, "tokens_after_instructions": tokens - INSTRUCTIONS,
            "instructions_sha256": extra.pop("instructions", "i" * 64),
            **({"pieces_kept": 6, "pieces_offered": 12} if knapsack else {}),
            "spec": {**SPEC, "dataset": dataset, **RUNS[arm], "example_ids": [f"q{i}" for i in range(QUESTIONS)]},
            "prompt_sha256": [f"{arm}-{question}"], "lm_calls": 1, "cache_hits": 0, "prefill_s": tokens / 100,
            "decode_s": 3.0, "lm_seconds": tokens / 100 + 3.0, **extra}


def _write(directory: Path, rows: list[dict]) -> Path:
    with ResultsStore(directory / "predictions.jsonl", fsync=False) as store:
        for row in rows:
            store.append(row)
    return directory


def _rows(*, answered: int = QUESTIONS, lost: int = 0, tokens: int = 740, default_tokens: int = 1090,
          fair_answered: int | None = None, odd_instructions: int | None = None) -> list[dict]:
    """Today's default right on the even questions; the setting the same but wrong on the first ``lost`` of them."""
    rows = []
    for q in range(answered):
        right = q % 2 == 0
        rows.append(_row("default", q, right, default_tokens))
        rows.append(_row("whole_prompt", q, right and q >= 2 * lost, tokens))
        rows.append(_row("whole_prompt_greedy", q, right and q % 6 != 0, tokens + 5))
        if q < (answered if fair_answered is None else fair_answered):
            rows.append(_row("fair_relevance", q, right and q % 4 != 0, tokens - 10,
                             instructions="j" * 64 if q == odd_instructions else "i" * 64))
    return rows


def _figures(tmp_path, name: str, solver: str = "exact", examples=None, **kw):
    gate = _script()
    directory = _write(tmp_path / name, _rows(**kw))
    rows = load_rows(directory)
    arms = read_arms(rows, gate.arm_of, gate.ARMS)
    return gate, gate.gate_figures(arms, [f"q{i}" for i in range(QUESTIONS)], solver=solver, examples=examples,
                                   rows=rows)


def test_the_arms_are_named_by_their_evidence_settings_and_rows_carry_the_prompt_parts(tmp_path):
    gate = _script()
    assert {arm: gate.arm_of(settings) for arm, settings in RUNS.items()} == {arm: arm for arm in RUNS}
    with pytest.raises(ArmError):
        gate.arm_of({"evidence_selection": "knapsack", "evidence": "sequential"})
    arms = read_arms(load_rows(_write(tmp_path / "parts", _rows(answered=4))), gate.arm_of, gate.ARMS)
    assert arms["whole_prompt"]["q1"]["after_instructions"] == 740 - INSTRUCTIONS
    assert arms["whole_prompt"]["q1"]["pieces"] == 6 and arms["default"]["q1"]["pieces"] is None
    assert arms["default"]["q1"]["instructions"] == "i" * 64


def test_the_gate_passes_at_parity_with_few_tokens(tmp_path):
    gate, figures = _figures(tmp_path, "pass")
    g = figures["gate"]
    assert figures["complete"] and g["difference"] == pytest.approx(0.0) and g["verdict"] == "PASS"
    assert g["after_share"] == pytest.approx((740 - INSTRUCTIONS) / (1090 - INSTRUCTIONS)) and g["aim_met"]
    assert figures["arms"]["whole_prompt"]["pieces"] == pytest.approx(6.0)
    assert set(figures["differences"]) == {"whole_prompt - default", "whole_prompt - fair_relevance",
                                           "whole_prompt - whole_prompt_greedy", "whole_prompt_greedy - default",
                                           "fair_relevance - default"}
    assert figures["differences"]["whole_prompt - fair_relevance"]["difference"] > 0
    assert not figures["instructions"]["mismatched"] and figures["instructions"]["compared"] == QUESTIONS
    assert not figures["preregistered"]  # these ids are not the 564 of docs/results.md
    text = gate.report(figures)
    assert "-> PASS" in text and "the same sha256 in every arm" in text and "NOT the pre-registered" in text


def test_the_greedy_setting_is_gated_when_the_solver_rule_names_it(tmp_path):
    _, figures = _figures(tmp_path, "greedy", solver="greedy")
    assert figures["setting"] == "whole_prompt_greedy" and figures["gate"]["difference"] < 0
    assert figures["gate"]["verdict"] == "FAIL" and "whole_prompt_greedy - fair_relevance" in figures["differences"]


def test_the_gate_fails_on_tokens(tmp_path):
    _, dear = _figures(tmp_path, "dear", tokens=900, default_tokens=1800)  # 900 > 866; after: 520 / 1420
    assert dear["gate"]["point_met"] and dear["gate"]["bound_met"] and dear["gate"]["after_met"]
    assert not dear["gate"]["tokens_met"] and dear["gate"]["verdict"] == "FAIL"
    _, after = _figures(tmp_path, "after", tokens=800, default_tokens=1000)  # after: 420 / 620 = 68 %
    assert after["gate"]["tokens_met"] and not after["gate"]["after_met"] and after["gate"]["verdict"] == "FAIL"


def test_the_gate_fails_on_a_loss(tmp_path):
    _, small = _figures(tmp_path, "small_loss", lost=1)  # -0.8 points: the bound holds, the point does not
    assert small["gate"]["bound_met"] and not small["gate"]["point_met"] and small["gate"]["verdict"] == "FAIL"
    _, large = _figures(tmp_path, "large_loss", lost=20)
    assert large["gate"]["lower_bound"] < -5 and large["gate"]["verdict"] == "FAIL"


def test_a_partial_run_is_undecided(tmp_path):
    gate, partial = _figures(tmp_path, "partial", fair_answered=60)  # the comparator behind: still undecided
    assert not partial["complete"] and partial["questions"] == 60 and partial["gate"]["verdict"].startswith("undec")
    assert "-> undecided (partial run)" in gate.report(partial)


def test_different_instructions_between_arms_are_reported_loudly(tmp_path):
    gate, figures = _figures(tmp_path, "mismatch", odd_instructions=7)
    assert list(figures["instructions"]["mismatched"]) == ["q7"]
    assert figures["instructions"]["mismatched"]["q7"]["fair_relevance"] == "j" * 64
    assert "INSTRUCTIONS DIFFER BETWEEN ARMS on 1 of 120 questions" in gate.report(figures)


def test_em_by_gold_answer_type_when_the_eval_split_gives_it(tmp_path):
    types = {f"q{i}": ("span" if i < 60 else "arithmetic") for i in range(QUESTIONS)}
    gate, figures = _figures(tmp_path, "types", lost=10, examples={q: {"answer_type": t} for q, t in types.items()})
    span = figures["by_answer_type"]["span"]
    assert span["default"] == {"n": 60, "em": 50.0} and span["whole_prompt"]["em"] == pytest.approx(100 * 20 / 60)
    assert figures["by_answer_type"]["arithmetic"]["whole_prompt"]["em"] == 50.0
    assert "| span | 60 | 50.0 | 33.3 |" in gate.report(figures)


def test_finqa_reports_the_failure_classes_and_no_gate(tmp_path):
    gate = _script()
    rows = [_row(arm, q, q == 0, 700, dataset="finqa", answer=answer, output=program)
            for arm in RUNS for q, (answer, program) in enumerate(
                [(8.0, "ans = 5 + 3"), (None, "ans = x"), (9.0, "a = 5\nb = 4\nans = a + b"), (3.0, "ans = 7 - 4")])]
    examples = {"q0": {"answer": 8.0, "program": "add(5, 3)"}, "q1": {"answer": 2.0, "program": "subtract(5, 3)"},
                "q2": {"answer": 1.0, "program": "subtract(5, 4)"}, "q3": {"answer": 2.0, "program": "subtract(5, 3)"}}
    loaded = load_rows(_write(tmp_path / "finqa", rows))
    figures = gate.gate_figures(read_arms(loaded, gate.arm_of, gate.ARMS), ["q0", "q1", "q2", "q3"],
                                solver="exact", dataset="finqa", examples=examples, rows=loaded)
    assert "gate" not in figures and figures["complete"]
    assert figures["failures"]["default"] == {"invalid program": 1, "wrong operation": 1, "wrong cell": 1}
    text = gate.report(figures)
    assert "Gate:" not in text and "| fair_relevance | 1 | 1 |" in text
    unread = gate.gate_figures(read_arms(loaded, gate.arm_of, gate.ARMS), ["q0"], solver="exact", dataset="finqa")
    assert "Wrong cell / wrong operation: not counted" in gate.report(unread)


def test_the_command_prints_the_report_and_refuses_other_rows(tmp_path, capsys):
    gate = _script()
    directory = _write(tmp_path / "run", _rows())
    assert gate.main([str(directory), "--solver", "exact", "--json", str(tmp_path / "out.json")]) == 0
    out = capsys.readouterr().out
    assert "-> PASS" in out and "| whole_prompt |" in out and (tmp_path / "out.json").is_file()
    assert gate.main([str(directory), "--solver", "exact", "--finqa"]) == 2
    assert "expected finqa LM rows" in capsys.readouterr().err
