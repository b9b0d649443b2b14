"""experiments/gsm8k/gsm8k_arms.py: GSM8K's arms read from rows (no LM): every arm against KNNFewShot, the aim's two
conditions, the pre-registered questions, and the shared arm figures (``bench/scoring/arm_figures.py``)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest
from helpers import DATA, needs_gsm8k

from knapsack_dspy.bench.results.store import load_rows
from knapsack_dspy.bench.scoring.arm_figures import ArmError, read_arms

ROOT = Path(__file__).resolve().parents[2]
SPEC = {"dataset": "gsm8k", "pipeline": "cot", "pool_split": "pool", "eval_split": "tune", "order_seed": 39,
        "budget": 1536, "max_exemplars": 8, "limit": 100}


def _script():
    spec = importlib.util.spec_from_file_location("gsm8k_arms", ROOT / "experiments" / "gsm8k" / "gsm8k_arms.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["gsm8k_arms"] = module
    spec.loader.exec_module(module)
    return module


def _row(arm: str, question: int, right: bool, tokens: int, *, sha: str | None = None, asked: bool = True) -> dict:
    return {"run": f"gsm8k|{arm}", "example_id": f"q{question}", "doc_id": f"q{question}", "em": right,
            "prompt_tokens": tokens, "within_budget": tokens <= 1536, "exemplar_ids": ["a"] * (tokens // 200),
            "spec": {**SPEC, "selector": arm}, "prompt_sha256": [sha or f"{arm}-{question}"],
            "lm_calls": int(asked), "cache_hits": int(not asked), "prefill_s": 20.0 if asked else 0.0,
            "decode_s": 40.0 if asked else 0.0, "lm_seconds": 60.0 if asked else 0.0}


def _write(directory: Path, rows: list[dict]) -> Path:
    directory.mkdir()
    (directory / "predictions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return directory


def _arms(tmp_path, name: str, n: int, ours_right: int, ours_tokens: int = 1260):
    gsm8k = _script()
    rows = []
    for q in range(n):
        rows.append(_row("dspy_knn", q, q % 2 == 0, 1650))
        rows.append(_row("case_coverage", q, q % 2 == 0 or q < ours_right, ours_tokens))
        rows.append(_row("dspy_labeled", q, q % 3 == 0, 1570))
        rows.append(_row("no_demos", q, False, 150))
    return gsm8k, read_arms(load_rows(_write(tmp_path / name, rows)), gsm8k.arm_of, gsm8k.ARMS)


def test_every_arm_is_compared_with_knn_few_shot(tmp_path):
    gsm8k, arms = _arms(tmp_path, "all", 100, ours_right=10)
    figures = gsm8k.comparison_figures(arms)
    assert set(figures["differences"]) == {"case_coverage - dspy_knn", "dspy_labeled - dspy_knn",
                                          "no_demos - dspy_knn"}
    gain = figures["differences"]["case_coverage - dspy_knn"]
    assert gain["difference"] == pytest.approx(5.0) and (gain["wins"], gain["losses"]) == (5, 0)
    assert figures["arms"]["dspy_knn"]["within_budget"] == 0.0  # KNNFewShot knows no budget
    assert figures["aim"]["met"] and figures["aim"]["token_share"] == pytest.approx(1260 / 1650)
    text = gsm8k.report(figures)
    assert "| case_coverage | 100 | 55.0 | 1260 |" in text and "-> met" in text


def test_the_aim_needs_three_points_at_no_more_tokens_and_all_questions(tmp_path):
    gsm8k, arms = _arms(tmp_path, "small_gain", 100, ours_right=4)  # +2 points
    assert not gsm8k.comparison_figures(arms)["aim"]["points_met"]
    gsm8k, arms = _arms(tmp_path, "dear", 100, ours_right=10, ours_tokens=1700)
    aim = gsm8k.comparison_figures(arms)["aim"]
    assert aim["points_met"] and not aim["tokens_met"] and not aim["met"]
    gsm8k, arms = _arms(tmp_path, "partial", 40, ours_right=10)
    figures = gsm8k.comparison_figures(arms)
    assert not figures["complete"] and not figures["aim"]["met"]
    assert "undecided (partial run)" in gsm8k.report(figures)


def test_a_shared_prompt_gives_its_seconds_to_the_arm_the_cache_served(tmp_path):
    gsm8k = _script()
    rows = [_row("dspy_knn", 1, True, 1650, sha="same"), _row("dspy_labeled", 1, True, 1650, sha="same", asked=False)]
    arms = read_arms(load_rows(_write(tmp_path / "shared", rows)), gsm8k.arm_of, gsm8k.ARMS)
    assert arms["dspy_labeled"]["q1"]["lm"] == 60.0 and arms["dspy_labeled"]["q1"]["decode"] == 40.0


def test_runs_the_suite_does_not_have_are_refused(tmp_path):
    gsm8k = _script()
    with pytest.raises(ArmError, match="'kate'"):
        gsm8k.arm_of({"selector": "kate"})
    rows = [_row("dspy_knn", 1, True, 1650), {**_row("dspy_knn", 2, True, 1650), "run": "gsm8k|other"}]
    with pytest.raises(ArmError, match="2 runs read as the arm 'dspy_knn'"):
        read_arms(load_rows(_write(tmp_path / "twice", rows)), gsm8k.arm_of, gsm8k.ARMS)
    with pytest.raises(ArmError, match="comparator"):
        gsm8k.comparison_figures({arm: {} for arm in gsm8k.ARMS})


@needs_gsm8k
def test_the_pre_registered_questions_are_the_suites(tmp_path, monkeypatch, capsys):
    gsm8k = _script()
    monkeypatch.setenv("KDSPY_DATA_DIR", str(DATA))
    planned = gsm8k.planned_questions({**SPEC, "selector": "dspy_knn"})
    assert len(planned) == 100 and gsm8k.ids_sha256(planned) == gsm8k.QUESTIONS_SHA256
    assert planned[0] == "gsm8k-95961265deda" and planned[-1] == "gsm8k-f5ca4fad0d67"  # docs/gsm8k.md
    rows = [{**_row(arm, 0, True, 900), "example_id": planned[0], "doc_id": planned[0]} for arm in gsm8k.ARMS]
    assert gsm8k.main([str(_write(tmp_path / "real", rows)), "--json", str(tmp_path / "f.json")]) == 0
    out = capsys.readouterr().out
    assert out.startswith("1 questions (partial") and "; the pre-registered questions" in out
    assert json.loads((tmp_path / "f.json").read_text())["preregistered"] is True
    assert gsm8k.main([str(tmp_path / "missing")]) == 2
