"""``testing/fault_proxy.py``: 500 / 429 / a slow answer / a dropped connection for the next chat completions, the
server's own answers otherwise (its token endpoints untouched); the faults reach a client as a server's would.

The server behind it here is the OpenAI stub; the real llama.cpp server behind it: ``test_served_model.py`` (slow).
"""

from __future__ import annotations

import time

import pytest

from knapsack_dspy.llm import make_lm
from knapsack_dspy.llm.token_counter import get_token_counter
from knapsack_dspy.testing.fault_proxy import FaultProxy
from knapsack_dspy.testing.openai_stub_server import StubOpenAIServer

MODEL = "openai/stub-model"


@pytest.fixture()
def served():
    with StubOpenAIServer(reply="forty two", tokenize="llama.cpp") as server, FaultProxy(server.base_url) as proxy:
        yield server, proxy


def test_failures_are_retried_through_the_proxy_and_counts_pass_through(served):
    server, proxy = served
    proxy.fail_next(1, status=500)
    proxy.fail_next(1, status=429, retry_after=0)
    lm = make_lm(MODEL, api_base=proxy.base_url, cache=False, num_retries=2)
    assert lm(messages=[{"role": "user", "content": "hi"}]) == ["forty two"]
    assert proxy.outcomes() == ["status 500", "status 429", "forwarded"]
    assert server.completion_count() == 1  # the failures never reached the server
    counter = get_token_counter(MODEL)  # counted through the proxy: faults never touch the token endpoints
    proxy.fail_next(5, status=500)
    # the stub's template: "<|user|> a b c <|assistant|>"
    assert counter.count_messages([{"role": "user", "content": "a b c"}]) == 5 and counter.exact
    assert proxy.outcomes() == ["status 500", "status 429", "forwarded"]


def test_a_slow_answer_times_the_client_out_and_is_not_forwarded_after_it_left(served):
    server, proxy = served
    proxy.slow_next(1, seconds=3)
    lm = make_lm(MODEL, api_base=proxy.base_url, cache=False, num_retries=1, timeout=1)
    assert lm(messages=[{"role": "user", "content": "hi"}]) == ["forty two"]  # the retry, while the first waits
    deadline = time.monotonic() + 10
    while proxy.outcomes()[0] == "slow " and time.monotonic() < deadline:  # the held request's 3 s are not over
        time.sleep(0.1)
    outcomes = proxy.outcomes()
    assert outcomes[-1] == "forwarded" and len(outcomes) == 2
    assert outcomes[0] == "slow (client gone)" and server.completion_count() == 1


def test_a_dropped_connection_and_a_dead_server(served):
    server, proxy = served
    proxy.disconnect_next(1)
    lm = make_lm(MODEL, api_base=proxy.base_url, cache=False, num_retries=1)
    assert lm(messages=[{"role": "user", "content": "hi"}]) == ["forty two"]
    server.stop()
    with pytest.raises(Exception) as raised:
        make_lm(MODEL, api_base=proxy.base_url, cache=False, num_retries=0)(messages=[{"role": "user", "content": "x"}])
    from knapsack_dspy.llm.errors import lm_error_kind

    assert lm_error_kind(raised.value) == "transient" and proxy.outcomes()[-1] == "upstream 502"
