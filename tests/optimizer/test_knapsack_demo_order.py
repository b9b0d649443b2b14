"""Another optimizer's demos are a prefix in every adapter: DSPy's adapters send incomplete demos (a pool example
without a ChainOfThought's reasoning) before complete ones (a bootstrapped demo), which would move the prefix next to
the question; a selecting predictor's adapter keeps the given order, and prompts whose demos are all complete or all
incomplete are exactly DSPy's."""

import dspy
import pytest
from dspy.utils import DummyLM
from helpers import HashingEmbedder, WordCounter

from knapsack_dspy.modules.demo_order import OrderedChatAdapter, in_given_order, keeps_demo_order
from knapsack_dspy.modules.selecting_predict import adapter_from_state, adapter_state
from knapsack_dspy.teleprompt import KnapsackFewShot

ADAPTERS = [dspy.ChatAdapter, dspy.JSONAdapter, dspy.XMLAdapter]
BOOTSTRAPPED = dspy.Example(question="What is the prefix question?", reasoning="Because it was bootstrapped.",
                            answer="prefix answer")


def trainset():
    return [dspy.Example(id=f"t{i}", question=f"What is the capital of country {i}?", answer=f"city {i}")
            .with_inputs("question") for i in range(12)]


def sent_messages(adapter_class):
    class Recording(DummyLM):
        def forward(self, prompt=None, messages=None, **kwargs):
            sent.append(messages)
            return super().forward(prompt=prompt, messages=messages, **kwargs)

    sent = []
    lm = Recording([{"reasoning": "r", "answer": "x"}] * 4, adapter=adapter_class())
    with dspy.context(lm=lm, adapter=adapter_class()):
        program = KnapsackFewShot(token_counter=WordCounter(), embedder=HashingEmbedder(), progress=False,
                                  budget=3000, selector="kate", max_exemplars=2, attributes=()).compile(
            dspy.ChainOfThought("question -> answer"), trainset=trainset())
        program.predict.demos = [BOOTSTRAPPED]
        program(question="What is the capital of country 5?")
    return program, sent[0]


@pytest.mark.parametrize("adapter_class", ADAPTERS)
def test_the_fixed_prefix_opens_the_prompt_in_every_adapter(adapter_class):
    program, messages = sent_messages(adapter_class)
    assert keeps_demo_order(program.predict.adapter)
    demo_users = [m["content"] for m in messages[1:-1] if m["role"] == "user"]
    assert len(demo_users) == 3
    assert "What is the prefix question?" in demo_users[0]  # the bootstrapped (complete) demo comes first
    assert "country 5" not in "".join(demo_users)  # the query itself is never its own demo
    assert all("What is the capital of country" in d for d in demo_users[1:])


@pytest.mark.parametrize("adapter_class", ADAPTERS)
def test_demos_all_of_one_kind_are_formatted_exactly_as_dspy_does(adapter_class):
    signature = dspy.ChainOfThought("question -> answer").predict.signature
    incomplete = [dict(question=f"q{i}", answer=f"a{i}") for i in range(3)]
    complete = [dict(question=f"q{i}", reasoning=f"r{i}", answer=f"a{i}") for i in range(3)]
    ordered = in_given_order(adapter_class())
    for demos in (incomplete, complete):
        assert ordered.format_demos(signature, demos) == adapter_class().format_demos(signature, demos)
        assert ordered.format(signature, demos, {"question": "q"}) == \
            adapter_class().format(signature, demos, {"question": "q"})


def test_dspy_reorders_mixed_demos_which_is_why_the_ordered_twin_exists():
    signature = dspy.ChainOfThought("question -> answer").predict.signature
    demos = [dict(question="first", reasoning="r", answer="a"), dict(question="second", answer="b")]
    plain = [m["content"] for m in dspy.ChatAdapter().format_demos(signature, demos) if m["role"] == "user"]
    ordered = [m["content"] for m in OrderedChatAdapter().format_demos(signature, demos) if m["role"] == "user"]
    assert "second" in plain[0] and "first" in plain[1]  # DSPy: the incomplete demo first
    assert "first" in ordered[0] and "second" in ordered[1]


def test_settings_carry_over_and_saved_adapters_round_trip():
    chat = dspy.ChatAdapter(use_native_function_calling=True)
    twin = in_given_order(chat)
    assert isinstance(twin, OrderedChatAdapter) and twin.use_native_function_calling is True
    assert in_given_order(twin) is twin
    rebuilt = adapter_from_state(adapter_state(twin))
    assert type(rebuilt) is OrderedChatAdapter

    class Custom(dspy.ChatAdapter):
        pass

    custom = Custom()
    assert in_given_order(custom) is custom and not keeps_demo_order(custom)
