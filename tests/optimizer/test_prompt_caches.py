"""Prompt caches: what the embedded model and providers report about reused prompt tokens reaches the rows; the
bench orders questions so consecutive prompts share prefixes; Anthropic gets a cache breakpoint after the shared
prefix."""

from __future__ import annotations

import json

import dspy
import litellm
import pytest
from helpers import HashingEmbedder, WordCounter
from test_select_exemplars import compile_tiny, make_examples

from knapsack_dspy.bench.execution.question_order import cache_friendly_order, greedy_prefix_chain, shared_prefix_length
from knapsack_dspy.bench.results.store import load_rows
from knapsack_dspy.cli.main import main
from knapsack_dspy.llm import local_server
from knapsack_dspy.llm.cache import configure_cache
from knapsack_dspy.llm.call_counter import counting_calls
from knapsack_dspy.llm.lm_factory import make_lm
from knapsack_dspy.llm.local_provider import register_local_provider
from knapsack_dspy.llm.prompt_cache import cache_breakpoint
from knapsack_dspy.testing.openai_stub_server import StubOpenAIServer, chat_adapter_reply

SMALL = "local/qwen2.5-coder-0.5b-instruct"


def test_greedy_chain_follows_the_longest_shared_prefix_ties_in_order():
    keys = [("a", "b", "x"), ("c",), ("a", "b", "y"), ("c", "d"), ("a", "z")]
    assert shared_prefix_length(keys[0], keys[2]) == 2 and shared_prefix_length((), keys[0]) == 0
    assert greedy_prefix_chain(keys) == [0, 2, 4, 1, 3]
    assert greedy_prefix_chain([(), (), ()]) == [0, 1, 2] and greedy_prefix_chain([]) == []


def test_the_order_groups_first_then_chains_within_a_group():
    class Program:
        def prompt_group(self, example):
            return example["route"]

        def select_for(self, example):
            return {"ids": example["ids"]}

    examples = [{"route": "r1", "ids": ["a"], "doc_id": "d1"}, {"route": "r2", "ids": ["b"], "doc_id": "d2"},
                {"route": "r1", "ids": ["c"], "doc_id": "d3"}, {"route": "r1", "ids": ["a"], "doc_id": "d1"}]
    ordered = cache_friendly_order(Program(), examples)
    assert [e["route"] for e in ordered] == ["r1", "r1", "r1", "r2"]  # groups in order of first appearance
    assert ordered[:2] == [examples[0], examples[3]]  # same demos, same document: adjacent
    assert cache_friendly_order(object(), examples) == examples


class TimedServer:
    """Answers like xllamacpp, with its prompt-cache usage and timings."""

    def __init__(self):
        self.requests = []

    def chat(self, request):
        self.requests.append(request)
        return {"choices": [{"finish_reason": "stop", "message": {"content": "[[ ## answer ## ]]\n5\n\n"
                                                                             "[[ ## completed ## ]]"}}],
                "usage": {"prompt_tokens": 100, "completion_tokens": 10,
                          "prompt_tokens_details": {"cached_tokens": 70}},
                "timings": {"cache_n": 70, "prompt_n": 30, "prompt_ms": 1500.0, "predicted_n": 10,
                            "predicted_ms": 800.0}}


def test_the_embedded_models_report_reused_tokens_and_the_prefill_decode_split(monkeypatch):
    server = TimedServer()
    monkeypatch.setattr(local_server, "get_local_server", lambda model, cache_dir=None: server)
    register_local_provider()
    response = litellm.completion(model=SMALL, messages=[{"role": "user", "content": "hi"}], n=2)
    assert response.usage.prompt_tokens_details.cached_tokens == 70  # the one prompt, counted once
    assert response._hidden_params["timings"] == {"prompt_n": 60, "cache_n": 140, "prompt_ms": 3000.0,
                                                  "predicted_n": 20, "predicted_ms": 1600.0}
    previous = dspy.cache
    configure_cache(enabled=False)
    try:
        with counting_calls() as calls, dspy.context(lm=make_lm(SMALL)):
            dspy.Predict("question -> answer")(question="2+3?")
            dspy.Predict("question -> answer")(question="2+4?")
    finally:
        dspy.cache = previous
    assert (calls.calls, calls.cached_prompt_tokens, calls.timed_calls) == (2, 140, 2)
    assert (calls.prefill_seconds, calls.decode_seconds) == (3.0, 1.6)


def test_bench_rows_record_the_tokens_a_prefix_cache_served(env, capsys):
    out = env / "results"
    with StubOpenAIServer(reply=chat_adapter_reply(program="ans = 1"), prefix_cache=True) as server:
        suite = env / "suite.toml"
        suite.write_text("\n".join([
            'name = "caches"', 'dataset = "tatqa"', 'pipeline = "pot"', 'route = ""', 'selector = "static"',
            "budget = 3000",
            "max_exemplars = 2", "val_size = 5", 'model = "openai/stub-model"', f'api_base = "{server.base_url}"',
            "limit = 6", "num_retries = 0"]) + "\n")
        assert main(["bench", str(suite), "--out", str(out), "--quiet", "--no-cache"]) == 0
        reported = [r.body["messages"] for r in server.completion_requests()]
    rows = load_rows(out)
    assert len(rows) == 6 and all(r["lm_calls"] == 1 for r in rows)
    assert sum(r["cached_prompt_tokens"] for r in rows) > 0
    assert all("prefill_s" not in r for r in rows)  # the stub does not time its calls
    # a static set opens every prompt in one order: each prompt after the first reuses at least the system
    # message and the set (the stub counts words)
    system_words = len(reported[0][0]["content"].split())
    assert sum(r["cached_prompt_tokens"] >= system_words for r in rows) >= len(rows) - 1
    # one prefix for all: the system message and the static set in one order (pool and questions come from
    # different documents, so no query loses a demo of its own document)
    assert len({json.dumps(m[:-1]) for m in reported}) == 1


def test_anthropic_gets_a_cache_breakpoint_after_the_hybrid_core_and_reports_reads(tmp_path):
    embedder, counter = HashingEmbedder(), WordCounter()
    program = compile_tiny(embedder, counter, make_examples(40), valset=make_examples(12, seed=2, prefix="v"),
                           mode="hybrid", core_size=2, budget=4000)
    previous = dspy.cache
    configure_cache(enabled=False)
    try:
        with StubOpenAIServer(reply=chat_adapter_reply(answer="7")) as server:
            lm = make_lm("anthropic/claude-haiku-4-5", api_base=f"http://127.0.0.1:{server.port}", api_key="k",
                         num_retries=0)
            with counting_calls() as calls, dspy.context(lm=lm):
                for query in make_examples(3, seed=5, prefix="q"):
                    program(question=query.question, context=query.context)
            bodies = [r.body for r in server.message_requests()]
    finally:
        dspy.cache = previous
    assert len(bodies) == 3
    for body in bodies:  # system message, then core demo 1 (user, assistant), core demo 2 (user, assistant) ...
        marked = [k for k, m in enumerate(body["messages"])
                  for block in m["content"] if isinstance(block, dict) and block.get("cache_control")]
        assert marked == [3] and body["messages"][3]["role"] == "assistant"  # the second core demo's answer
    assert calls.cache_write_tokens > 0 and calls.cached_prompt_tokens == 2 * calls.cache_write_tokens


def test_only_providers_that_need_a_breakpoint_get_one():
    assert cache_breakpoint("openai/gpt-4o-mini", 2) == {} and cache_breakpoint(SMALL, 0) == {}
    assert cache_breakpoint("anthropic/claude-haiku-4-5", 0) == {
        "cache_control_injection_points": [{"location": "message", "index": 0}]}


@pytest.fixture(autouse=True)
def _quiet(capsys):
    yield
    capsys.readouterr()
