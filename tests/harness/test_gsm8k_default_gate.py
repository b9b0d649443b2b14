"""benchmarks/gsm8k_default_gate.py: issue 50's arms read from rows (no LM): the new default against LabeledFewShot,
the gate's three conditions, format failures and compile costs per arm, the pre-registered questions."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

from knapsack_dspy.bench.results.store import load_rows
from knapsack_dspy.bench.scoring.arm_figures import ArmError, read_arms

ROOT = Path(__file__).resolve().parents[2]
SPEC = {"dataset": "gsm8k", "pipeline": "cot", "pool_split": "pool", "eval_split": "tune", "order_seed": 39,
        "budget": 1536, "max_exemplars": 8}
RUNS = {"auto": ("priced_case_coverage", {"token_price": "auto"}), "dspy_labeled": ("dspy_labeled", {}),
        "case_coverage": ("case_coverage", {}), "dspy_bootstrap": ("dspy_bootstrap", {}), "no_demos": ("no_demos", {})}


def _script():
    spec = importlib.util.spec_from_file_location("gsm8k_default_gate", ROOT / "benchmarks" / "gsm8k_default_gate.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["gsm8k_default_gate"] = module
    spec.loader.exec_module(module)
    return module


def _row(arm: str, question: int, right: bool, tokens: int, error: str | None = None) -> dict:
    selector, params = RUNS[arm]
    return {"run": f"gsm8k|{arm}", "example_id": f"q{question}", "doc_id": f"q{question}", "em": right,
            "prompt_tokens": tokens, "within_budget": tokens <= 1536, "exemplar_ids": ["a"] * (tokens // 200),
            "spec": {**SPEC, "selector": selector, "selector_params": params,
                     "example_ids": [f"q{i}" for i in range(300)]},
            "prompt_sha256": [f"{arm}-{question}"], "lm_calls": 1, "cache_hits": 0, "prefill_s": 10.0,
            "decode_s": 5.0, "lm_seconds": 15.0, "error": error}


def _figures(tmp_path, name: str, n: int, gained: int, tokens: int = 900, labeled_tokens: int = 1571):
    gate = _script()
    rows = []
    for q in range(n):
        rows.append(_row("dspy_labeled", q, q % 2 == 0, labeled_tokens))
        rows.append(_row("auto", q, q % 2 == 0 or q < gained, tokens))
        rows.append(_row("case_coverage", q, q % 2 == 0, 1260))
        rows.append(_row("dspy_bootstrap", q, q % 3 == 0, 1400, error="parse" if q == 0 else None))
        if q < 100:
            rows.append(_row("no_demos", q, False, 220))
    directory = tmp_path / name
    directory.mkdir()
    (directory / "predictions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (directory / "programs").mkdir()
    (directory / "programs" / "b.report.json").write_text(json.dumps(
        {"baseline": "dspy_bootstrap", "cost": {"lm_calls": 7, "seconds": 123.0}}))
    arms = read_arms(load_rows(directory), gate.arm_of, gate.ARMS)
    failures = {"dspy_bootstrap": 1}
    return gate, gate.gate_figures(arms, failures, [f"q{i}" for i in range(300)], gate.compile_costs(directory))


def test_the_gate_passes_at_parity_or_better_with_few_tokens_on_all_questions(tmp_path):
    gate, figures = _figures(tmp_path, "pass", 300, gained=0)
    assert figures["complete"] and figures["gate"]["difference"] == pytest.approx(0.0) and figures["gate"]["passed"]
    assert set(figures["differences"]) == {f"{arm} - dspy_labeled" for arm in gate.ARMS if arm != "dspy_labeled"}
    assert figures["arms"]["no_demos"]["n"] == 100 and figures["compile_cost"]["dspy_bootstrap"]["lm_calls"] == 7
    text = gate.report(figures)
    assert "-> PASSED" in text and "| dspy_bootstrap | 1 | 7 | 123.0 |" in text
    assert not figures["preregistered"]  # these ids are not the 300 of docs/gsm8k.md


def test_the_gate_fails_on_tokens_on_a_loss_and_stays_undecided_on_a_partial_run(tmp_path):
    _, dear = _figures(tmp_path, "dear", 300, gained=0, tokens=1000)
    assert dear["gate"]["accuracy_met"] and not dear["gate"]["tokens_met"] and not dear["gate"]["passed"]
    gate, partial = _figures(tmp_path, "partial", 60, gained=0)
    assert not partial["complete"] and "undecided (partial run)" in gate.report(partial)
    with pytest.raises(ArmError):
        gate.arm_of({"selector": "kate"})


def test_the_pre_registered_questions_hash_to_the_documented_sha256():
    gate = _script()
    suite = (ROOT / "benchmarks" / "gsm8k_default.toml").read_text()
    import tomllib

    runs = tomllib.loads(suite)
    ids = runs["example_ids"]
    assert len(ids) == 300 and gate.ids_sha256(ids) == gate.QUESTIONS_SHA256
    assert runs["runs"][-1]["example_ids"] == ids[:100]
    assert gate.QUESTIONS_SHA256 in (ROOT / "docs" / "gsm8k.md").read_text()
