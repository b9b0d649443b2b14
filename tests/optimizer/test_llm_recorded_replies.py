"""Recorded replies answer LM calls whose prompt fingerprint they know (``llm.recorded_replies``): through a real
``dspy.LM`` (LiteLLM, an OpenAI-compatible stub server), the replay returns the recorded text without a call, a
prompt it does not know goes to the model, or with ``only=True`` fails with one line."""

import dspy
import pytest

from knapsack_dspy.llm import counting_calls, make_lm
from knapsack_dspy.llm.prompt_fingerprint import messages_sha256
from knapsack_dspy.llm.recorded_replies import NotRecordedError, replaying
from knapsack_dspy.testing.openai_stub_server import StubOpenAIServer, chat_adapter_reply


class Sent(dspy.utils.callback.BaseCallback):
    def __init__(self):
        self.messages = []

    def on_lm_start(self, call_id, instance, inputs):
        self.messages.append(inputs["messages"])


def ask(lm, question, callbacks=()):
    with dspy.context(lm=lm, adapter=dspy.ChatAdapter(), callbacks=list(callbacks)):
        return dspy.Predict("question -> answer")(question=question)


def test_a_recorded_prompt_is_answered_without_the_model_and_others_reach_it():
    sent = Sent()
    with StubOpenAIServer(reply=chat_adapter_reply(answer="from the server")) as server:
        lm = make_lm("openai/stub-model", api_base=server.base_url, cache=False)
        ask(lm, "What is recorded?", [sent])  # the prompt whose fingerprint we record
        recorded = {messages_sha256(sent.messages[0]): chat_adapter_reply(answer="from the recording")}
        before = server.completion_count()
        with replaying(recorded), counting_calls() as counts:
            assert ask(lm, "What is recorded?").answer == "from the recording"
            assert ask(lm, "What is new?").answer == "from the server"
        assert server.completion_count() == before + 1
        assert (counts.calls, counts.replayed) == (1, 1)
        assert ask(lm, "What is recorded?").answer == "from the server"  # outside the block: the model again


def test_only_recorded_replies_fails_an_unknown_prompt_with_one_line():
    lm = make_lm("openai/stub-model", api_base="http://127.0.0.1:9", cache=False, num_retries=0)
    with replaying({}, only=True), pytest.raises(Exception) as caught:
        ask(lm, "Never recorded?")
    chain = [caught.value, caught.value.__cause__, caught.value.__context__]
    assert any(isinstance(e, NotRecordedError) or "no recorded reply" in str(e) for e in chain if e is not None)


def test_blocks_do_not_nest():
    with replaying({}), pytest.raises(RuntimeError, match="do not nest"), replaying({}):
        pass
