"""Token counting for API models (LiteLLM's bundled tiktoken files, offline) and its memoisation."""

from __future__ import annotations

import knapsack_dspy  # noqa: F401  # isort: skip  (offline env defaults before dspy / litellm are imported)
import logging
import threading

import pytest
import tiktoken

from knapsack_dspy.llm.errors import LLMConfigError
from knapsack_dspy.llm.local_token_counter import LocalTokenCounter
from knapsack_dspy.llm.token_counter import LiteLLMTokenCounter, context_window_of, get_token_counter

SYSTEM = {"role": "system", "content": "You answer questions about financial tables."}
USER = {"role": "user", "content": "What was the change in revenue from 2019 to 2020, in percent?"}
ASSISTANT = {"role": "assistant", "content": "[[ ## answer ## ]]\n12.5\n\n[[ ## completed ## ]]"}


def test_counts_are_additive_per_message():
    counter = get_token_counter("openai/gpt-4o-mini")
    whole = counter.count_messages([SYSTEM, USER, ASSISTANT])
    base = counter.count_messages([SYSTEM])
    # Adding a message adds its content tokens plus a constant per-message template overhead.
    overhead = counter.count_messages([SYSTEM, USER]) - base - counter.count_text(USER["content"])
    assert 0 <= overhead <= 8
    assert whole - base == sum(counter.count_text(m["content"]) + overhead for m in (USER, ASSISTANT))


def test_known_openai_models_use_their_own_encoding():
    counter = get_token_counter("openai/gpt-4o-mini")
    assert counter.exact and counter.context_window == 128000
    text = "Привет, как дела? 日本語のテキストです。 Σύντομο κείμενο."
    assert counter.count_text(text) == len(tiktoken.get_encoding("o200k_base").encode(text))
    assert get_token_counter("gpt-4o-mini").count_text(text) == counter.count_text(text)
    assert get_token_counter("openai/gpt-4").count_text(text) == len(tiktoken.get_encoding("cl100k_base").encode(text))


def test_unknown_models_fall_back_to_cl100k_with_a_warning(caplog):
    with caplog.at_level(logging.WARNING, logger="knapsack_dspy.llm.token_counter"):
        counter = LiteLLMTokenCounter("hosted_vllm/my-finetune-v7")
    assert not counter.exact and counter.context_window is None
    assert "approximate" in caplog.text and "hosted_vllm/my-finetune-v7" in caplog.text
    text = "Net income rose 12% to $4.1bn."
    assert counter.count_text(text) == len(tiktoken.get_encoding("cl100k_base").encode(text))
    assert counter.count_messages([USER]) > counter.count_text(USER["content"])


def test_counter_is_shared_per_model_and_memoised():
    a = get_token_counter("openai/gpt-4o-mini")
    assert get_token_counter(" openai/gpt-4o-mini ") is a
    messages = [SYSTEM, {"role": "user", "content": "memo test " * 7}]
    before = a.cache_info
    first = a.count_messages(messages)
    assert a.count_messages([dict(m) for m in messages]) == first
    after = a.cache_info
    assert after["misses"] - before["misses"] == 1 and after["hits"] - before["hits"] == 1


def test_lru_evicts_oldest():
    counter = LiteLLMTokenCounter("openai/gpt-4o-mini", cache_size=3)
    for word in ("a", "b", "c", "d"):
        counter.count_text(word)
    assert counter.cache_info["size"] == 3
    counter.count_text("a")  # evicted: counted again
    assert counter.cache_info["misses"] == 5


def test_thread_safe_counts_agree():
    counter = LiteLLMTokenCounter("openai/gpt-4o-mini")
    texts = [f"row {i}: revenue {i * 17} million, cost {i * 3}" for i in range(200)]
    expected = [len(tiktoken.get_encoding("o200k_base").encode(t)) for t in texts]
    results: list[list[int]] = []

    def work():
        results.append([counter.count_text(t) for t in texts])

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [expected] * 4


def test_empty_and_bad_inputs():
    counter = get_token_counter("openai/gpt-4o-mini")
    assert counter.count_text("") == 0
    with pytest.raises(TypeError, match="list of"):
        counter.count_messages("hello")
    with pytest.raises(LLMConfigError):
        get_token_counter("")


def test_context_windows():
    assert context_window_of("openai/gpt-4o-mini") == 128000
    assert context_window_of("openai/some-unknown-thing") is None
    assert context_window_of("local/qwen2.5-coder-1.5b-instruct") == 4096


def test_local_counter_does_not_load_until_used():
    assert isinstance(get_token_counter("local/qwen2.5-coder-0.5b-instruct"), LocalTokenCounter)
    counter = LocalTokenCounter("local/qwen2.5-coder-0.5b-instruct")
    assert counter._server is None
    assert counter.context_window == 4096 and counter.model == "local/qwen2.5-coder-0.5b-instruct"
    with pytest.raises(LLMConfigError, match="known local models"):
        get_token_counter("local/llama-70b")
