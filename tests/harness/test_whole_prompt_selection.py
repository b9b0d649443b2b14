"""benchmarks/whole_prompt_selection.py on a tiny fixture (two documents, one per half; no LM): cross-fitted halves,
every arm at every budget, gold-evidence recall against what the prompt shows, the comparisons and the tables."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
from helpers import HashingEmbedder, WordCounter

from knapsack_dspy.docqa.data import load_examples

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "fixtures" / "data_tatqa_small.json"


def _script():
    spec = importlib.util.spec_from_file_location("whole_prompt_selection",
                                                  ROOT / "benchmarks" / "whole_prompt_selection.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["whole_prompt_selection"] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def measured():
    script = _script()
    examples = list(load_examples("tatqa", path=FIXTURE))
    records = script.measure("tatqa", examples, pipeline="pot", budgets=[520, 4000], weights=[0.5, 1, 4],
                             embedder=HashingEmbedder(), token_counter=WordCounter(), max_exemplars=2)
    return script, examples, records


def test_each_half_selects_from_the_other_and_every_arm_is_measured(measured):
    script, examples, records = measured
    halves = {e.id: script.document_half(e.doc_id) for e in examples}
    assert len(set(halves.values())) == 2  # the fixture's two documents fall in different halves
    points = {(r["arm"], r["budget"], r["weight"]) for r in records}
    assert points == ({(arm, b, 1.0) for arm in script.ARMS for b in (520, 4000)}
                      | {("joint_exact", b, w) for b in (520, 4000) for w in (0.5, 4.0)})
    for r in records:
        assert r["half"] == halves[r["id"]]  # its half's question, selecting from the other half's pool
        assert not (set(r["ids"]) & {e.id for e in examples if halves[e.id] == r["half"]})
    by_point = {}
    for r in records:
        by_point.setdefault((r["arm"], r["budget"], r["weight"]), []).append(r["id"])
    assert all(sorted(ids) == sorted(e.id for e in examples) for ids in by_point.values())


def test_recall_is_what_the_prompt_shows_of_the_gold_evidence(measured):
    script, examples, records = measured
    by_id = {e.id: e for e in examples}
    net_sales = by_id["q-a-1"]  # "What were the net sales in 2018?": the Net sales row
    assert script.gold_evidence(net_sales, "tatqa") == {("row", 2)}
    rules = [r for r in records if r["arm"] == "rules"]
    assert all(r["recall"] == 1.0 for r in rules if r["recall"] is not None)  # a small table: shown whole
    knapsack = [r for r in records if r["arm"] != "rules" and r["recall"] is not None]
    assert all(0.0 <= r["recall"] <= 1.0 for r in knapsack) and any(r["recall"] < 1.0 for r in knapsack)
    tight = [r for r in records if r["budget"] == 520]
    assert all(r["prompt_tokens"] + 256 <= 520 or not r["within_budget"] for r in tight)


def test_the_summary_compares_the_arms_and_checks_the_instructions(measured):
    script, examples, records = measured
    summary = script.summarise(records)
    assert summary["instructions"]["identical"] and summary["instructions"]["distinct"] == 2  # extract, compute
    points = {(p["arm"], p["budget"], p["weight"]): p for p in summary["points"]}
    for p in points.values():
        assert p["questions"] == len(examples) == 6 and p["documents"] == 2
        assert p["after_instructions"] < p["prompt_tokens"]
        if p["recall"]["n"]:
            assert p["recall"]["low"] <= p["recall"]["mean"] <= p["recall"]["high"]
    assert points[("rules", 520, 1.0)]["pieces_kept"] is None
    assert points[("joint_exact", 4000, 1.0)]["pieces_offered"] > points[("joint_exact", 520, 1.0)]["pieces_kept"]
    pairs = {(c["budget"], c["a"], c["b"]): c for c in summary["comparisons"]}
    exact = pairs[(520, "joint_exact", "joint_greedy")]
    assert 0.0 <= exact["differ"] <= 1.0 and exact["questions"] == 6
    # the exact solve is never below its greedy on the knapsack's objective, where no repair touched either
    clean = {r["id"]: r for r in records if r["budget"] == 520 and r["weight"] == 1.0 and not r["repaired"]}
    for q, r in clean.items():
        if r["arm"] == "joint_exact":
            greedy = next((g for g in records if g["id"] == q and g["arm"] == "joint_greedy" and g["budget"] == 520
                           and not g["repaired"]), None)
            if greedy is not None:
                assert r["objective"] >= greedy["objective"] - 1e-6
    text = script.markdown(summary, "fixture")
    for expected in ("Budget 520", "Budget 4,000", "| joint_exact |", "Gold-evidence recall by answer type",
                     "joint_exact − joint_greedy", "Exchange rate (joint_exact, evidence_weight)",
                     "Instructions: identical"):
        assert expected in text


def test_an_eval_split_is_refused():
    script = _script()
    with pytest.raises(SystemExit):
        script.main(["--dataset", "tatqa", "--split", "dev_tune"])
