"""Approximate token counts are marked (issue 22, item 8): for a model without a known tokenizer (Anthropic, counted
with tiktoken's cl100k_base) ``within_budget`` rests on an estimate, and the selection log, the compile report,
bench rows, ``metrics.json`` and ``report.md`` say so."""

import os
from pathlib import Path

import dspy
import pytest
from dspy.utils import DummyLM
from helpers import HashingEmbedder, WordCounter, bench_on_tatqa_slice

from knapsack_dspy.bench.suites.suite import suite_from_dict
from knapsack_dspy.llm.token_counter import get_token_counter, token_count_kind
from knapsack_dspy.modules.selection_context import selection_log
from knapsack_dspy.teleprompt import KnapsackFewShot

DATA = Path(os.environ.get("KDSPY_DATA_DIR", Path(__file__).resolve().parents[3] / "shared" / "data"))
QA = [("What is the capital of France?", "Paris"), ("What is the capital of Peru?", "Lima"),
      ("How many legs does a spider have?", "8"), ("How many legs does an ant have?", "6")]


class ApproximateCounter(WordCounter):
    """Counts words, and says it approximates (as ``LiteLLMTokenCounter`` does for a model it has no tokenizer for)."""

    exact = False


def test_counters_say_which_kind_of_count_they_make():
    assert token_count_kind(get_token_counter("anthropic/claude-haiku-4-5")) == "estimate"  # cl100k stand-in
    assert token_count_kind(get_token_counter("openai/gpt-4o-mini")) == "exact"  # its own encoding (o200k)
    assert token_count_kind(WordCounter()) == "exact"  # a user's counter that does not say: the model's own


@pytest.mark.parametrize(("model", "kind"), [("anthropic/claude-haiku-4-5", "estimate"),
                                             ("openai/gpt-4o-mini", "exact")])
def test_the_selection_log_and_the_compile_report_say_when_counts_are_estimates(model, kind):
    trainset = [dspy.Example(id=f"t{i}", question=q, answer=a).with_inputs("question") for i, (q, a) in enumerate(QA)]
    with dspy.context(lm=DummyLM([{"reasoning": "r", "answer": "Santiago"}] * 3)):
        program = KnapsackFewShot(token_counter=get_token_counter(model), embedder=HashingEmbedder(), budget=1024,
                                  max_exemplars=2, attributes=(), progress=False).compile(
            dspy.ChainOfThought("question -> answer"), trainset=trainset)
        with selection_log() as log:
            program(question="What is the capital of Chile?")
    assert log[0].info["token_count"] == kind and "within_budget" in log[0].info
    assert program.compile_report["predictors"]["predict"]["token_count"] == kind


@pytest.mark.skipif(not (DATA / "tatqa" / "dev_pool.json.gz").exists(), reason="TAT-QA data not found")
def test_bench_rows_metrics_and_the_report_mark_estimated_runs(tmp_path, monkeypatch):
    suite = suite_from_dict({"name": "t", "selector": ["kate", "seer"], "budget": 4000, "max_exemplars": 2,
                             "model": "anthropic/claude-haiku-4-5", "attributes": [], "selection_only": True})

    def bench(out, counter):
        return bench_on_tatqa_slice(suite, out, monkeypatch, counter)

    metrics, rows, report = bench(tmp_path / "estimated", ApproximateCounter())
    assert {r["token_count"] for r in rows} == {"estimate"} and len(rows) == 6
    assert all(m["token_count_estimated"] == m["n_selected"] == 3 for m in metrics.values())
    assert "## Token counts" in report
    section = report.split("## Token counts", 1)[1].split("##", 1)[0]
    assert "**estimate**" in section
    assert "- kate (anthropic/claude-haiku-4-5, budget 4000): 3 of 3 prompts" in section and "- seer (" in section

    metrics, rows, report = bench(tmp_path / "exact", WordCounter())
    assert {r["token_count"] for r in rows} == {"exact"}
    assert all(m["token_count_estimated"] == 0 for m in metrics.values())
    assert "## Token counts" not in report
