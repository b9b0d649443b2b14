"""benchmarks/sara_table3.py: the RAG-CoT Table 3 figures from SARA rows (no model is run)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

from knapsack_dspy.bench.results.store import encode_row
from knapsack_dspy.saved_format import RESULT_ROW_SCHEMA_VERSION as ROW_SCHEMA_VERSION

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("sara_table3", ROOT / "benchmarks" / "sara_table3.py")
sara_table3 = importlib.util.module_from_spec(spec)
sys.modules["sara_table3"] = sara_table3
spec.loader.exec_module(sara_table3)

GOLD = {"s1_a_pos": "Entailment", "s1_a_neg": "Contradiction", "s2_b_pos": "Entailment", "s2_b_neg": "Contradiction"}
#: strategy -> case -> answer. mentioned_only tells both twin pairs apart (4 / 4 right); entire_section says
#: "Entailment" to everything (2 / 4, no pair told apart); references gets one pair (3 / 4).
ANSWERS = {
    "mentioned_only": {"s1_a_pos": "Entailment", "s1_a_neg": "Contradiction", "s2_b_pos": "Entailment",
                       "s2_b_neg": "Contradiction"},
    "entire_section": {case: "Entailment" for case in GOLD},
    "references": {"s1_a_pos": "Entailment", "s1_a_neg": "Contradiction", "s2_b_pos": "Contradiction",
                   "s2_b_neg": "Contradiction"},
}


def row(strategy: str, case: str, answer, gold, case_type: str, **scores) -> dict:
    return {"schema_version": ROW_SCHEMA_VERSION, "run": f"sara|cot|{strategy}", "example_id": case,
            "doc_id": case.rsplit("_", 1)[0] if case_type == "entailment" else case, "case_type": case_type,
            "answer": answer, "gold": gold, "prompt_tokens": 1000,
            "spec": {"dataset": "sara", "retrieval": strategy, "selection_only": False}, **scores}


def write(tmp_path: Path, rows: list[dict]) -> Path:
    (tmp_path / "predictions.jsonl").write_text("".join(encode_row(r) + "\n" for r in rows))
    return tmp_path


def test_entailment_accuracy_twins_and_paired_differences(tmp_path):
    rows = [row(s, case, answer, GOLD[case], "entailment", correct=answer == GOLD[case])
            for s, answers in ANSWERS.items() for case, answer in answers.items()]
    # a case only one strategy answered is left out of every figure
    rows.append(row("mentioned_only", "s3_c_pos", "Entailment", "Entailment", "entailment", correct=True))
    rows += [row(s, "tax_case_1", amount, "$10000", "numerical", correct=amount == 10000,
                 within_10pct=amount is not None and abs(amount - 10000) <= 1000,
                 authors_rule=amount is not None and abs(amount - 10000) <= 5000)
             for s, amount in (("mentioned_only", 10000), ("entire_section", 10900), ("references", None))]
    result = {"entailment": sara_table3.entailment_summary(sara_table3.read_rows(write(tmp_path, rows)))}
    ent = result["entailment"]
    assert (ent["n"], ent["groups"]) == (4, 2)
    mentioned, entire, references = (ent["strategies"][s] for s in sara_table3.STRATEGIES)
    assert (mentioned["accuracy"], entire["accuracy"], references["accuracy"]) == (100.0, 50.0, 75.0)
    assert (mentioned["twins_told_apart"], entire["twins_told_apart"], references["twins_told_apart"]) == (2, 0, 1)
    assert mentioned["twin_pairs"] == 2 and entire["said_entailment"] == 100.0
    assert entire["low"] <= entire["accuracy"] <= entire["high"]
    difference = ent["differences"]["mentioned_only - entire_section"]
    assert (difference["difference"], difference["wins"], difference["losses"]) == (50.0, 2, 0)
    numerical = sara_table3.numerical_summary(sara_table3.read_rows(tmp_path))
    assert numerical["n"] == 1
    assert numerical["strategies"]["mentioned_only"]["exact"] == 100.0
    assert numerical["strategies"]["entire_section"]["within_10pct"] == 100.0
    assert numerical["strategies"]["entire_section"]["exact"] == 0.0
    assert numerical["strategies"]["references"]["no_amount"] == 1
    assert "| mentioned_only | 100.0 [100.0, 100.0] |" in sara_table3.render(
        {"entailment": ent, "numerical": numerical})


def test_the_script_writes_json(tmp_path, capsys):
    rows = [row(s, case, answer, GOLD[case], "entailment", correct=answer == GOLD[case])
            for s, answers in ANSWERS.items() for case, answer in answers.items()]
    out = tmp_path / "table3.json"
    assert sara_table3.main([str(write(tmp_path, rows)), "--json", str(out)]) == 0
    assert json.loads(out.read_text())["entailment"]["strategies"]["references"]["accuracy"] == 75.0
    assert "### Entailment (4 cases, 2 groups" in capsys.readouterr().out
