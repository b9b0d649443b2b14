"""experiments/tokens/tokens_gate.py: the tokens gate read from rows (no LM): arms named by their settings, seconds of a
prompt two arms share, the gate's three conditions."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SMALL = {"demo_table": "gold_rows", "demo_paragraphs": "gold"}
ARM_SPECS = {
    "default": {"selector": "kate_within_budget", "budget": 2048},
    "new": {"selector": "case_coverage", "selector_params": {"token_price": 0.004}, "budget": 2048, **SMALL},
    "greedy": {"selector": "case_coverage", "selector_params": {"token_price": 0.004, "solver": "greedy"},
               "budget": 2048, **SMALL},
    "comparator": {"selector": "kate_within_budget", "budget": 1344, **SMALL},
    "frozen": {"selector": "case_coverage", "budget": 2048},
    "no_demos": {"selector": "no_demos", "budget": 2048},
}


def _script():
    spec = importlib.util.spec_from_file_location("tokens_gate", ROOT / "experiments" / "tokens" / "tokens_gate.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["tokens_gate"] = module
    spec.loader.exec_module(module)
    return module


def _row(arm: str, question: int, em: bool, tokens: int, *, sha: str | None = None, asked: bool = True) -> dict:
    spec = {"dataset": "tatqa", **ARM_SPECS[arm]}
    return {"run": f"tatqa|{arm}", "example_id": f"q{question}", "doc_id": f"d{question // 3}", "em": em,
            "prompt_tokens": tokens, "within_budget": True, "exemplar_ids": ["a"] * (tokens // 500), "spec": spec,
            "prompt_sha256": [sha or f"{arm}-{question}"], "lm_calls": int(asked), "cache_hits": int(not asked),
            "prefill_s": 30.0 if asked else 0.0, "decode_s": 3.0 if asked else 0.0,
            "lm_seconds": 33.0 if asked else 0.0}


def _write(directory: Path, rows: list[dict]) -> Path:
    directory.mkdir()
    (directory / "predictions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return directory


def test_every_run_of_the_suite_is_named_by_its_arm():
    gate = _script()
    assert {arm: gate.arm_of(spec) for arm, spec in ARM_SPECS.items()} == {arm: arm for arm in ARM_SPECS}
    with pytest.raises(gate.GateError, match="'seer'"):
        gate.arm_of({"selector": "seer"})


def test_a_prompt_answered_once_gives_its_seconds_to_the_arm_the_cache_served(tmp_path):
    gate = _script()
    rows = [_row("new", 1, True, 1000, sha="same"), _row("greedy", 1, True, 1000, sha="same", asked=False)]
    arms = gate.read_arms(gate.load_rows(_write(tmp_path / "r", rows)))
    assert arms["greedy"]["q1"]["prefill"] == 30.0 and arms["greedy"]["q1"]["lm"] == 33.0


def _run(tmp_path, new_right: int, new_tokens: int, n: int = 342) -> dict:
    gate = _script()
    rows = []
    for q in range(n):
        rows.append(_row("default", q, q % 2 == 0, 1700))
        rows.append(_row("new", q, q % 2 == 0 if q >= new_right else True, new_tokens))
        if q < n // 2:
            rows.append(_row("no_demos", q, False, 800))
    figures = gate.gate_figures(gate.read_arms(gate.load_rows(_write(tmp_path / f"r{new_right}{new_tokens}{n}",
                                                                       rows))))
    return figures


def test_the_gate_passes_only_with_all_three_conditions(tmp_path):
    gate = _script()
    passed = _run(tmp_path, new_right=20, new_tokens=1100)  # 10 more right, 65 % of the tokens
    assert passed["gate"]["passed"] and passed["gate"]["token_share"] == pytest.approx(1100 / 1700)
    assert passed["arms"]["no_demos"]["n"] == 171 and "new" in passed["against_no_demos"]
    too_dear = _run(tmp_path, new_right=20, new_tokens=1300)  # 76 % of the tokens
    assert not too_dear["gate"]["passed"] and not too_dear["gate"]["tokens_met"]
    partial = _run(tmp_path, new_right=20, new_tokens=1100, n=100)
    assert not partial["gate"]["passed"] and not partial["complete"]
    assert "undecided (partial run)" in gate.report(partial)


def test_a_worse_new_setting_fails_the_point_estimate(tmp_path):
    gate = _script()
    rows = [_row("default", q, True, 1700) for q in range(342)]
    rows += [_row("new", q, q >= 10, 1100) for q in range(342)]
    figures = gate.gate_figures(gate.read_arms(gate.load_rows(_write(tmp_path / "worse", rows))))
    assert figures["gate"]["difference"] < 0 and not figures["gate"]["point_met"] and not figures["gate"]["passed"]


def test_the_command_prints_the_table_and_writes_json(tmp_path, capsys):
    gate = _script()
    rows = [_row("default", q, True, 1700) for q in range(4)] + [_row("new", q, True, 1100) for q in range(4)]
    out = tmp_path / "figures.json"
    assert gate.main([str(_write(tmp_path / "small", rows)), "--json", str(out)]) == 0
    assert "| new | 4 | 100.0 | 1100 |" in capsys.readouterr().out
    assert json.loads(out.read_text())["questions"] == 4
    assert gate.main([str(tmp_path / "missing")]) == 2


def _default_script():
    _script()  # experiments/tokens/tokens_default.py reads the gate's arm names
    spec = importlib.util.spec_from_file_location("tokens_default",
                                                  ROOT / "experiments" / "tokens" / "tokens_default.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _answers(right: list[bool], tokens: int, docs: int = 3) -> dict[str, dict]:
    return {f"q{q}": {"em": float(ok), "tokens": tokens, "exemplars": 1, "within": True, "doc": f"d{q % docs}",
                      "prefill": None, "decode": None, "lm": None} for q, ok in enumerate(right)}


def test_the_default_is_the_fewest_token_arm_non_inferior_to_the_most_accurate():
    from knapsack_dspy.bench.scoring.arm_figures import ArmError, fewest_tokens_non_inferior

    n = 60
    questions = [f"q{q}" for q in range(n)]
    arms = {"dear": _answers([q % 2 == 0 for q in range(n)], 1700),  # 50 %
            "cheap": _answers([q % 2 == 0 or q in (1, 3) for q in range(n)], 1100),  # 53.3 %: the most accurate
            "cheaper_worse": _answers([q % 4 == 0 for q in range(n)], 1000),  # 25 %: inferior
            "bare": _answers([False] * (n // 2), 800)}  # on half the questions only, all wrong
    choice = fewest_tokens_non_inferior(arms, questions, margin=5.0)
    assert choice["most_accurate"] == "cheap" and choice["chosen"] == "cheap"
    assert choice["arms"]["dear"]["difference"] == pytest.approx(-100 * 2 / 60)
    assert not choice["arms"]["cheaper_worse"]["non_inferior"] and not choice["arms"]["bare"]["non_inferior"]
    assert choice["arms"]["bare"]["n"] == 30
    # a cheaper arm that loses only a little is non-inferior at a wide margin, and then it is chosen
    wide = fewest_tokens_non_inferior(arms, questions, margin=70.0)
    assert wide["most_accurate"] == "cheap" and wide["chosen"] == "bare"
    with pytest.raises(ArmError, match="every question"):
        fewest_tokens_non_inferior({"bare": arms["bare"]}, questions)


def test_the_default_command_reads_the_suite_rows(tmp_path, capsys):
    script = _default_script()
    rows = []
    for q in range(12):
        rows.append(_row("default", q, q % 2 == 0, 1700))
        rows.append(_row("new", q, True, 1100))
        rows.append(_row("comparator", q, False, 1000))
    out = tmp_path / "choice.json"
    assert script.main([str(_write(tmp_path / "rows", rows)), "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert "Most accurate: new; fewest tokens of the non-inferior arms: new" in text and "(partial" in text
    choice = json.loads(out.read_text())
    assert choice["questions"] == 12 and not choice["complete"] and not choice["arms"]["comparator"]["non_inferior"]
    assert script.main([str(tmp_path / "missing")]) == 2
