"""benchmarks/tokens_gate.py: the tokens gate read from rows (no LM): arms named by their settings, seconds of a
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
    spec = importlib.util.spec_from_file_location("tokens_gate", ROOT / "benchmarks" / "tokens_gate.py")
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
