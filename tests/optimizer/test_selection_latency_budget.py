"""A latency budget (opt-in): the exemplars must keep the predicted call time within it, where the declared shared
prefix (system message, static set, hybrid core) costs no prefill; rows get the prediction."""

import dspy
import pytest
from dspy.utils import DummyLM
from helpers import HashingEmbedder, WordCounter
from test_select_exemplars import compile_tiny, make_examples

from knapsack_dspy.llm.latency_rates import MEASURED_RATES, latency_rates
from knapsack_dspy.modules.prompt_cost import PromptCostModel
from knapsack_dspy.selection import SelectionConfig
from knapsack_dspy.selection.config import SelectionConfigError
from knapsack_dspy.selection.latency import LatencyModel
from knapsack_dspy.teleprompt.knapsack_few_shot import CompileError

EMBEDDER, COUNTER = HashingEmbedder(), WordCounter()
# 10 new prompt tokens a second, no decode time: a budget of s seconds allows 10 * s new tokens
RATES = {"prefill_tokens_per_s": 10.0, "decode_tokens_per_s": 1e9, "overhead_s": 0.0, "output_tokens": 0}


def test_the_latency_model_is_linear_and_invertible():
    model = LatencyModel(prefill_tokens_per_s=32.0, decode_tokens_per_s=6.0, overhead_s=1.4, output_tokens=60)
    assert model.seconds(320) == pytest.approx(1.4 + 10 + 10)
    assert model.new_tokens_within(model.seconds(500)) == pytest.approx(500)
    assert model.seconds(-5) == model.seconds(0)
    with pytest.raises(ValueError, match="prefill_tokens_per_s"):
        LatencyModel(prefill_tokens_per_s=0, decode_tokens_per_s=1)
    with pytest.raises(ValueError, match="unknown keys"):
        LatencyModel.from_dict({**RATES, "speed": 3})


def test_the_embedded_models_have_measured_rates_with_the_command_that_measures_them():
    for model in ("local/qwen2.5-coder-1.5b-instruct", "local/qwen2.5-coder-0.5b-instruct"):
        entry = latency_rates(model)
        assert "benchmarks/latency_rates.py" in entry["command"] and entry["measured"]
        LatencyModel.from_dict(entry)  # valid
    assert latency_rates("openai/gpt-4o-mini") is None
    assert set(MEASURED_RATES) >= {"local/qwen2.5-coder-1.5b-instruct"}


def test_latency_settings_are_validated_and_round_trip():
    with pytest.raises(SelectionConfigError, match="latency_budget"):
        SelectionConfig(latency_budget=0)
    with pytest.raises(SelectionConfigError, match="decode_tokens_per_s"):
        SelectionConfig(latency_rates={"prefill_tokens_per_s": 5})
    config = SelectionConfig(latency_budget=10.0, latency_rates=RATES)
    assert SelectionConfig.from_dict(config.to_dict()) == config


def test_a_per_query_selection_keeps_its_new_tokens_within_the_latency_budget():
    pool = make_examples(60)
    free = compile_tiny(EMBEDDER, COUNTER, pool, budget=4000, selector="kate_within_budget", latency_rates=RATES)
    timed = compile_tiny(EMBEDDER, COUNTER, pool, budget=4000, selector="kate_within_budget", latency_rates=RATES,
                         latency_budget=30.0)
    fewer = 0
    for query in make_examples(8, seed=9, prefix="q"):
        a = free.answer.selection(base_tokens=60, shared_tokens=40, question=query.question).selection
        b = timed.answer.selection(base_tokens=60, shared_tokens=40, question=query.question).selection
        # 30 s at 10 tok/s = 300 new tokens; the query's own 20 (60 - 40 shared) leave 280 for exemplars
        assert b["total_cost"] <= 280 and b["new_prompt_tokens"] == 20 + b["total_cost"]
        assert b["predicted_latency_s"] == pytest.approx(b["new_prompt_tokens"] / 10)
        assert b["predicted_latency_s"] <= 30
        assert b["latency_budget"] == 30.0 and "latency_budget" not in a
        assert a["predicted_latency_s"] == pytest.approx((20 + a["total_cost"]) / 10)  # predicted without a budget
        fewer += a["total_cost"] > 280
    assert fewer  # the budget really binds


def test_a_hybrid_core_is_the_declared_shared_prefix_and_costs_no_latency():
    pool = make_examples(60)
    valset = make_examples(12, seed=2, prefix="v")
    program = compile_tiny(EMBEDDER, COUNTER, pool, valset=valset, mode="hybrid", core_size=2, budget=4000,
                           latency_rates=RATES, latency_budget=1.0)  # 10 new tokens: no per-query exemplar fits
    select = program.answer.selection
    core = select.selector_state["fixed_ids"]
    for query in make_examples(5, seed=3, prefix="q"):
        out = select(base_tokens=5, shared_tokens=5, question=query.question)
        assert list(out.ids) == core  # the core, free; nothing after it fits 10 new tokens
        assert out.selection["new_prompt_tokens"] == 0 and out.selection["predicted_latency_s"] == 0


def test_a_latency_budget_without_rates_is_a_clear_error():
    with pytest.raises(CompileError, match="no latency rates are known for word-counter"):  # at compile, not later
        compile_tiny(EMBEDDER, COUNTER, make_examples(20), budget=4000, latency_budget=5.0)
    plain = compile_tiny(EMBEDDER, COUNTER, make_examples(20), budget=4000)
    assert "predicted_latency_s" not in plain.answer.selection(base_tokens=10, question="q?").selection


def test_a_compiled_predictor_declares_its_system_message_as_the_shared_prefix():
    program = compile_tiny(EMBEDDER, COUNTER, make_examples(30), budget=4000, latency_rates=RATES)
    query = make_examples(1, seed=4, prefix="q")[0]
    with dspy.context(lm=DummyLM([{"answer": "1"}])):
        prediction = program(question=query.question, context=query.context)
    info = prediction.selection
    predictor = program.answer
    shared = PromptCostModel(predictor.signature, COUNTER, predictor.adapter).prefix_tokens()
    assert info["new_prompt_tokens"] == info["prompt_tokens"] - shared > 0
