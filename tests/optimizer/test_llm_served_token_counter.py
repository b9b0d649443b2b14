"""A served model's prompt tokens, counted by its server when it can (llama.cpp, vLLM), else estimated and calibrated
by the usage it reports; the server's capability asked once; a server that does not answer is a transient error.

The servers are the OpenAI stub (``tokenize="llama.cpp"`` / ``"vLLM"`` answers those servers' count endpoints for a
toy tokenizer and reports the same count as a completion's usage); the real llama.cpp server is in
``tests/harness/test_served_model.py`` (slow).
"""

from __future__ import annotations

import knapsack_dspy  # noqa: F401  # isort: skip  (offline env defaults before dspy / litellm are imported)
import logging
import pickle
import socket

import dspy
import litellm
import pytest

from knapsack_dspy.llm import make_lm
from knapsack_dspy.llm.errors import ModelServerUnavailable, describe_lm_error, lm_error_kind
from knapsack_dspy.llm.served_models import note_served_model, served_address, server_root
from knapsack_dspy.llm.served_token_counter import ServedTokenCounter
from knapsack_dspy.llm.server_tokenizer import LLAMA_CPP, VLLM, server_tokenizer
from knapsack_dspy.llm.token_counter import LiteLLMTokenCounter, get_token_counter, token_count_kind
from knapsack_dspy.testing.openai_stub_server import StubOpenAIServer, stub_template

MODEL = "openai/stub-model"
MESSAGES = [{"role": "system", "content": "Answer with one number."},
            {"role": "user", "content": "What was the change in revenue from 2019 to 2020 in percent?"}]


def _reported(server, messages) -> int:
    response = litellm.completion(model=MODEL, api_base=server.base_url, api_key="x", messages=messages,
                                  max_tokens=5)
    return response.usage.prompt_tokens


@pytest.mark.parametrize("kind", [LLAMA_CPP, VLLM])
def test_a_server_that_counts_gives_the_prompt_tokens_it_reports(kind):
    with StubOpenAIServer(tokenize=kind, context_window=3000) as server:
        counter = get_token_counter(MODEL, api_base=server.base_url)
        assert isinstance(counter, ServedTokenCounter)
        assert counter.count_messages(MESSAGES) == _reported(server, MESSAGES) == len(stub_template(MESSAGES).split())
        assert counter.exact and token_count_kind(counter) == "exact" and counter.context_window == 3000
        assert counter.counted_by == f"{kind} server" and counter.calibration is None
        assert counter.count_text("three words here") == 3
        batch = [MESSAGES, MESSAGES[1:], [{"role": "user", "content": "a b"}]]
        assert counter.count_messages_batch(batch) == [len(stub_template(m).split()) for m in batch]


def test_the_server_is_asked_what_it_counts_once():
    with StubOpenAIServer(tokenize=LLAMA_CPP) as server:
        for _ in range(3):
            get_token_counter(MODEL, api_base=server.base_url).count_messages(MESSAGES)
        probes = [r.path for r in server.requests if r.path in ("/apply-template", "/props")]
        # the probe (/apply-template, /props), then one /apply-template per distinct prompt (memoised after)
        assert probes == ["/apply-template", "/props", "/apply-template"]
        assert server_tokenizer(server.base_url, MODEL).kind == LLAMA_CPP
        assert server_tokenizer(server.base_url + "/", MODEL) is server_tokenizer(server_root(server.base_url), MODEL)


def test_a_server_that_counts_nothing_is_estimated_and_calibrated_by_its_usage(caplog):
    with StubOpenAIServer() as server, caplog.at_level(logging.WARNING):
        counter = get_token_counter(MODEL, api_base=server.base_url)
        assert counter.count_messages(MESSAGES) == LiteLLMTokenCounter(MODEL).count_messages(MESSAGES)
        assert not counter.exact and token_count_kind(counter) == "estimate"
        assert counter.counted_by == "estimate (calibrated)" and "calibrated" in caplog.text
        raw = LiteLLMTokenCounter(MODEL)
        lm = make_lm(MODEL, api_base=server.base_url, api_key="x", cache=False, num_retries=0)
        prompts = [[{"role": "user", "content": " ".join(["word"] * n)}] for n in (40, 80, 120)]
        reported = [lm(messages=m) and server.completion_requests()[-1] for m in prompts]
        assert len(reported) == 3
        calibration = counter.calibration
        assert calibration.calls == 3
        # the stub reports words + 1 per prompt; tiktoken counts a repeated word once per occurrence too
        reported_total = sum(len(m[0]["content"].split()) + 1 for m in prompts)
        estimated_total = sum(raw.count_messages(m) for m in prompts)
        assert (calibration.reported, calibration.estimated) == (reported_total, estimated_total)
        ratio = round(reported_total / estimated_total, 2)
        assert calibration.ratio == ratio != 1.0
        assert counter.count_messages(MESSAGES) == round(raw.count_messages(MESSAGES) * ratio)
        # calls to another server or of another model do not move it
        with StubOpenAIServer() as other:
            make_lm(MODEL, api_base=other.base_url, api_key="x", cache=False)(messages=prompts[0])
        assert counter.calibration.calls == 3


def test_an_exact_estimate_is_not_calibrated():
    with StubOpenAIServer() as server:
        counter = get_token_counter("openai/gpt-4o-mini", api_base=server.base_url)
        assert counter.exact and counter.calibration is None and counter.counted_by == "estimate"
        assert counter.count_messages(MESSAGES) == LiteLLMTokenCounter("openai/gpt-4o-mini").count_messages(MESSAGES)


def _dead_address() -> str:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


def test_a_server_that_does_not_answer_is_a_transient_error_and_asked_again():
    address = _dead_address()
    counter = get_token_counter(MODEL, api_base=address)
    with pytest.raises(ModelServerUnavailable) as raised:
        counter.count_messages(MESSAGES)
    assert lm_error_kind(raised.value) == "transient"
    assert "did not answer a token count" in describe_lm_error(raised.value) and address.rsplit("/", 1)[0] in str(
        raised.value)
    with pytest.raises(ModelServerUnavailable):  # not remembered as "counts nothing": asked again
        counter.count_messages(MESSAGES)


def test_a_model_is_counted_where_make_lm_said_it_is_served():
    with StubOpenAIServer(tokenize=VLLM) as server:
        assert not isinstance(get_token_counter(MODEL), ServedTokenCounter)
        make_lm(MODEL, api_base=server.base_url + "/")
        assert served_address(MODEL) == server.base_url
        counter = get_token_counter(MODEL)
        assert isinstance(counter, ServedTokenCounter) and counter.api_base == server.base_url
        assert counter is get_token_counter(MODEL, api_base=server.base_url)
        assert pickle.loads(pickle.dumps(counter)) is counter  # a saved program's counter: the process's own
        note_served_model("local/qwen2.5-coder-0.5b-instruct", server.base_url)  # embedded: served in-process
    assert served_address("local/qwen2.5-coder-0.5b-instruct") is None


def test_compiling_with_a_plain_dspy_lm_counts_on_its_server():
    from knapsack_dspy.teleprompt.knapsack_few_shot import KnapsackFewShot

    with StubOpenAIServer(tokenize=LLAMA_CPP) as server:
        lm = dspy.LM(MODEL, api_base=server.base_url, api_key="local")
        with dspy.context(lm=lm):
            counter, model = KnapsackFewShot()._counter()
        assert model == MODEL and isinstance(counter, ServedTokenCounter) and counter.api_base == server.base_url
        assert counter.count_messages(MESSAGES) == len(stub_template(MESSAGES).split())


def test_without_servers_nothing_is_counted_on_a_server():
    """``kdspy bench --reuse --replay-only``: nothing contacts a model's server, its token counts included."""
    from knapsack_dspy.llm.served_models import without_servers

    note_served_model(MODEL, _dead_address())
    with without_servers():
        assert not isinstance(get_token_counter(MODEL), ServedTokenCounter)
        assert not isinstance(get_token_counter(MODEL, api_base=_dead_address()), ServedTokenCounter)
        assert served_address(MODEL) is None
    assert isinstance(get_token_counter(MODEL), ServedTokenCounter)
