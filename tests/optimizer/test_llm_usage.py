"""UsageLedger and the real-call counter: per-prediction sums stay right under threaded evaluation and a cached
re-run is seen as zero LM calls."""

from __future__ import annotations

import knapsack_dspy  # noqa: F401  # isort: skip  (offline env defaults before dspy / litellm are imported)
import threading

import dspy
import pytest
from dspy.utils import DummyLM

from knapsack_dspy.llm import call_counter
from knapsack_dspy.llm.cache import configure_cache
from knapsack_dspy.llm.call_counter import CallCounts, counting_calls
from knapsack_dspy.llm.lm_factory import make_lm
from knapsack_dspy.llm.usage import UsageLedger, usage_by_model
from knapsack_dspy.testing.openai_stub_server import StubOpenAIServer, chat_adapter_reply


def reply(body):
    question = body["messages"][-1]["content"].split("[[ ## question ## ]]")[-1].split()[0]
    return chat_adapter_reply(answer=question.upper())


@pytest.fixture()
def server():
    with StubOpenAIServer(reply=reply) as stub:
        yield stub


@pytest.fixture()
def lm_cache(tmp_path):
    previous = dspy.cache
    configure_cache(tmp_path)
    yield
    dspy.cache = previous


def served_usage(server) -> tuple[int, int]:
    """What the stub reported as usage over all its successful answers (its own arithmetic)."""
    prompt = completion = 0
    for request in server.completion_requests():
        words = sum(len(str(m["content"]).split()) for m in request.body["messages"])
        prompt += words + 1
        completion += len(reply(request.body).split())
    return prompt, completion


def make_devset(n):
    return [dspy.Example(question=f"q{i}", answer=f"Q{i}").with_inputs("question") for i in range(n)]


def metric(example, prediction, trace=None):
    return example.answer == prediction.answer


def test_record_sums_prediction_usage():
    ledger = UsageLedger()
    for prompt, completion in [(10, 2), (30, 5)]:
        pred = dspy.Prediction(answer="x")
        pred.set_lm_usage({"openai/m": {"prompt_tokens": prompt, "completion_tokens": completion,
                                        "total_tokens": prompt + completion, "prompt_tokens_details": None}})
        ledger.record(pred, seconds=0.5, counts=CallCounts(calls=1, cost=0.25))
    ledger.record(dspy.Prediction(answer="y"), error=True)  # no usage at all (e.g. failed)
    totals = ledger.totals()
    assert (totals.predictions, totals.errors, totals.lm_calls) == (3, 1, 2)
    assert (totals.prompt_tokens, totals.completion_tokens, totals.total_tokens) == (40, 7, 47)
    assert totals.by_model == {"openai/m": {"prompt_tokens": 40, "completion_tokens": 7}}
    assert totals.cost == pytest.approx(0.5) and totals.seconds == pytest.approx(1.0)
    summary = ledger.summary()
    assert summary["total_tokens"] == 47 and summary["by_model"]["openai/m"]["prompt_tokens"] == 40


def test_record_falls_back_to_counted_tokens_without_track_usage():
    ledger = UsageLedger()
    ledger.record(dspy.Prediction(answer="x"), counts=CallCounts(calls=2, prompt_tokens=11, completion_tokens=4))
    assert (ledger.totals().prompt_tokens, ledger.totals().completion_tokens) == (11, 4)


def test_usage_by_model_reads_get_lm_usage_with_dummy_lm():
    lm = DummyLM([{"answer": "1"}])
    with dspy.context(lm=lm, track_usage=True):
        pred = dspy.Predict("question -> answer")(question="a")
    assert set(usage_by_model(pred)) == {"dummy"}
    assert usage_by_model(object()) == {}


def test_ledger_call_records_errors_and_reraises():
    ledger = UsageLedger()

    def broken(**kwargs):
        raise ValueError("boom")

    with pytest.raises(ValueError, match="boom"):
        ledger.call(broken, question="x")
    assert (ledger.totals().predictions, ledger.totals().errors) == (1, 1)


def test_threaded_evaluate_is_counted_per_prediction(server, lm_cache):
    lm = make_lm("openai/stub-model", api_base=server.base_url, api_key="x")
    program = dspy.Predict("question -> answer")
    devset = make_devset(12)
    ledger = UsageLedger()
    evaluate = dspy.Evaluate(devset=devset, metric=metric, num_threads=4, display_progress=False)
    with dspy.context(lm=lm):
        result = evaluate(ledger.wrap(program))
    assert result.score == 100.0
    totals = ledger.totals()
    assert (totals.predictions, totals.lm_calls, totals.cache_hits, totals.errors) == (12, 12, 0, 0)
    assert server.completion_count() == 12
    assert (totals.prompt_tokens, totals.completion_tokens) == served_usage(server)
    assert totals.by_model == {"openai/stub-model": {"prompt_tokens": totals.prompt_tokens,
                                                     "completion_tokens": totals.completion_tokens}}

    # A cached re-run: zero real calls, every answer a cache hit, no tokens spent.
    rerun = UsageLedger()
    before = call_counter.real_call_count()
    with dspy.context(lm=lm):
        assert evaluate(rerun.wrap(program)).score == 100.0
    assert call_counter.real_call_count() == before
    assert server.completion_count() == 12
    totals = rerun.totals()
    assert (totals.predictions, totals.lm_calls, totals.cache_hits, totals.prompt_tokens) == (12, 0, 12, 0)


def test_counting_calls_is_per_thread(server, lm_cache):
    lm = make_lm("openai/stub-model", api_base=server.base_url, api_key="x", cache=False)
    program = dspy.Predict("question -> answer")
    results: dict[int, CallCounts] = {}

    def work(index: int, calls: int):
        with dspy.context(lm=lm), counting_calls() as counts:
            for j in range(calls):
                program(question=f"t{index}x{j}")
        results[index] = counts

    before = call_counter.call_counts()
    threads = [threading.Thread(target=work, args=(i, i + 1)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert {i: c.calls for i, c in results.items()} == {0: 1, 1: 2, 2: 3}
    assert all(c.prompt_tokens > 0 for c in results.values())
    delta = call_counter.call_counts() - before
    assert delta.calls == 6 and delta.prompt_tokens == sum(c.prompt_tokens for c in results.values())


def test_merge_and_reset():
    a, b = UsageLedger(), UsageLedger()
    a.record(counts=CallCounts(calls=1, prompt_tokens=5))
    b.record(counts=CallCounts(calls=2, prompt_tokens=7))
    a.merge(b)
    assert (a.totals().predictions, a.totals().lm_calls, a.totals().prompt_tokens) == (2, 3, 12)
    a.reset()
    assert a.totals().predictions == 0
