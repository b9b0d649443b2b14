"""Errors early and clear (issue 22, item 7): a bad setting fails when ``KnapsackFewShot(...)`` is built, a student
that is not a DSPy program, an empty pool and an LM no provider is known for fail at compile in one line, naming
what was given and what was expected; ``DummyLM`` and custom LMs keep working."""

import logging

import dspy
import pytest
from dspy.utils import DummyLM
from helpers import HashingEmbedder, WordCounter

from knapsack_dspy.selection import SelectionConfig
from knapsack_dspy.teleprompt import KnapsackFewShot
from knapsack_dspy.teleprompt.knapsack_few_shot import CompileError

QA = [("What is the capital of France?", "Paris"), ("What is the capital of Peru?", "Lima"),
      ("How many legs does a spider have?", "8"), ("How many legs does an ant have?", "6")]


def trainset():
    return [dspy.Example(id=f"t{i}", question=q, answer=a).with_inputs("question") for i, (q, a) in enumerate(QA)]


def teleprompter(**settings):
    return KnapsackFewShot(token_counter=WordCounter(), embedder=HashingEmbedder(), progress=False, attributes=(),
                           **settings)


@pytest.mark.parametrize(("settings", "message"), [
    ({"budget": -5}, "budget must be a positive number of tokens or None, got -5"),
    ({"budget": 0}, "budget must be a positive number of tokens or None, got 0"),
    ({"max_exemplars": -1}, "max_exemplars must be a non-negative integer, got -1"),
    ({"max_exemplars": "4"}, "max_exemplars must be a non-negative integer, got '4'"),
    ({"alpha": 2}, r"alpha must be a number in \[0, 1\], got 2"),
    ({"beta": float("nan")}, r"beta must be a number in \[0, 1\], got nan"),
    ({"selector": "nope"}, "unknown selector 'nope'"),
    ({"reserve_output_tokens": -3}, "reserve_output_tokens must be a non-negative integer"),
    ({"demo_order": "random"}, "demo_order must be one of"),
    ({"selector_params": {"budget": 3}}, r"selector_params \['budget'\] are SelectionConfig settings"),
    ({"search_space": {"max_exemplars": [2, -1]}},
     r"search_space point \{'max_exemplars': -1\}: max_exemplars must be a non-negative integer"),
    ({"num_threads": 0}, "num_threads must be a positive integer, got 0"),
    ({"mode": "static", "selector": "kate"}, "selector 'kate' selects 'per_query', not in mode 'static'"),
    ({"config": SelectionConfig(max_exemplars=2), "selector": "hybrid", "core_size": 3},
     "core_size"),  # with a config given here, how the settings go together is checked too
])
def test_bad_settings_fail_when_the_teleprompter_is_built(settings, message):
    with pytest.raises(CompileError, match=message) as raised:
        KnapsackFewShot(**settings)
    assert "\n" not in str(raised.value)


def test_every_setting_is_checked_on_its_own():
    import dataclasses

    from knapsack_dspy.selection import config

    assert set(config._CHECKS) == {f.name for f in dataclasses.fields(SelectionConfig)}  # a new setting gets a check
    assert SelectionConfig.check_settings(attributes=["modality"], budget=None) == {"attributes": ("modality",),
                                                                                   "budget": None}
    with pytest.raises(ValueError, match="unknown selection setting 'budgt'"):
        SelectionConfig.check_settings(budgt=3)


def test_settings_that_depend_on_the_students_config_wait_for_compile():
    KnapsackFewShot(selector="hybrid", core_size=3)  # the student's own config may have M >= 3


@pytest.mark.parametrize("student", ["question -> answer", None, 42, dspy.Predict])
def test_a_student_that_is_not_a_program_is_named(student):
    with pytest.raises(CompileError) as raised:
        teleprompter().compile(student, trainset=trainset())
    message = str(raised.value)
    assert "the student must be a DSPy program (a dspy.Module" in message
    assert f"got {type(student).__name__}" in message and "\n" not in message
    if isinstance(student, str):
        assert "dspy.Predict('question -> answer')" in message


def test_a_trainset_that_is_not_a_list_of_examples_is_named():
    student = dspy.Predict("question -> answer")
    with pytest.raises(CompileError, match=r"trainset must be a list of dspy\.Example, got str"):
        teleprompter().compile(student, trainset="What is the capital of France?")
    with pytest.raises(CompileError, match=r"trainset\[1\] must be a dspy.Example .*got tuple"):
        teleprompter().compile(student, trainset=[trainset()[0], ("q", "a")])


def test_the_empty_pool_error_names_the_fields_needed_and_the_fields_given():
    rows = [dspy.Example(id=f"t{i}", q=q, a=a).with_inputs("q") for i, (q, a) in enumerate(QA)]
    with pytest.raises(CompileError) as raised:
        teleprompter().compile(dspy.ChainOfThought("question -> answer"), trainset=rows)
    message = str(raised.value)
    assert "empty exemplar pool for ['predict']" in message
    assert "every input field of its signature (question)" in message
    assert "at least one output field (reasoning, answer)" in message
    assert "the trainset's examples have a, id, q (no example has question)" in message
    no_outputs = [dspy.Example(id=f"t{i}", question=q).with_inputs("question") for i, (q, _) in enumerate(QA)]
    with pytest.raises(CompileError, match=r"examples have id, question \(no example has reasoning, answer\)"):
        teleprompter().compile(dspy.ChainOfThought("question -> answer"), trainset=no_outputs)


@pytest.mark.parametrize(("model", "message"), [
    ("foo/bar", "the LM 'foo/bar' cannot be called: unknown LLM provider 'foo' in model 'foo/bar'"),
    ("opnai/gpt-4o-mini", r"unknown LLM provider 'opnai' .*did you mean openai"),
    ("mymodel", "the LM 'mymodel' cannot be called: model 'mymodel' names no provider LiteLLM knows"),
])
def test_an_lm_no_provider_is_known_for_fails_the_compile_in_one_line(model, message):
    with dspy.context(lm=dspy.LM(model)), pytest.raises(CompileError, match=message) as raised:
        teleprompter().compile(dspy.Predict("question -> answer"), trainset=trainset())
    assert "\n" not in str(raised.value)


def test_an_unknown_model_of_a_known_provider_is_only_a_warning(caplog):
    with dspy.context(lm=dspy.LM("openai/gpt-nonexistent-9")), caplog.at_level(logging.WARNING):
        program = teleprompter().compile(dspy.Predict("question -> answer"), trainset=trainset())
    assert program.selection.is_fitted
    assert any("LiteLLM does not know model 'openai/gpt-nonexistent-9'" in r.getMessage() for r in caplog.records)
    with dspy.context(lm=dspy.LM("openai/gpt-4o-mnii")), caplog.at_level(logging.WARNING):
        teleprompter().compile(dspy.Predict("question -> answer"), trainset=trainset())
    assert any("did you mean openai/gpt-4o-mini?" in r.getMessage() for r in caplog.records)


class EchoLM(dspy.BaseLM):
    """A custom LM: its model string means nothing to LiteLLM."""

    def __init__(self):
        super().__init__(model="my-own/echo")

    def forward(self, prompt=None, messages=None, **kwargs):
        raise AssertionError("not called by compile")


class AnsweringLM(dspy.LM):
    """A dspy.LM subclass that answers on its own."""

    def forward(self, prompt=None, messages=None, **kwargs):
        raise AssertionError("not called by compile")


@pytest.mark.parametrize("lm", [DummyLM([{"answer": "Lima"}]), EchoLM(), AnsweringLM("in-house/model"),
                                dspy.LM("in-house/model", custom_llm_provider="openai")])
def test_dummy_and_custom_lms_keep_compiling(lm):
    with dspy.context(lm=lm):
        program = teleprompter().compile(dspy.Predict("question -> answer"), trainset=trainset())
    assert program.selection.is_fitted
