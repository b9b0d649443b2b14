"""Silent zero-shot is not silent: a compile whose predictor would send no exemplar to most queries warns with the
numbers (a budget the output reserve leaves no room in, a value function with no positive value), and each empty
selection's reason says which part of the budget does not fit."""

import warnings

import dspy
import pytest
from dspy.utils import DummyLM
from helpers import HashingEmbedder, WordCounter

from knapsack_dspy.modules.selection_context import selection_log
from knapsack_dspy.teleprompt import KnapsackFewShot
from knapsack_dspy.teleprompt.knapsack_few_shot import ZeroShotWarning


def trainset(n=12):
    return [dspy.Example(id=f"t{i}", question=f"What is fact number {i} about the topic {i % 3}?",
                         answer=f"answer {i}").with_inputs("question") for i in range(n)]


def compile_with(**settings):
    options = dict(token_counter=WordCounter(), embedder=HashingEmbedder(), progress=False, max_exemplars=3,
                   attributes=(), selector="kate_within_budget")
    options.update(settings)
    return KnapsackFewShot(**options).compile(dspy.Predict("question -> answer"), trainset=trainset())


def demo_and_prompt_sizes():
    program = compile_with(budget=4000)
    record = program.select_demos(question="What is fact number 99 about the topic 1?")
    return min(program.selection.costs), record.info["base_tokens"]


def test_a_budget_the_output_reserve_fills_warns_with_the_numbers():
    cheapest, base = demo_and_prompt_sizes()
    budget = base + 256 + int(cheapest) - 1  # the query fits; the reserve leaves one token too few for a demo
    with pytest.warns(ZeroShotWarning, match=r"no exemplar to 12 of 12 sample queries") as caught:
        program = compile_with(budget=budget)
    message = str(caught[0].message)
    assert f"budget {budget}" in message and "output reserve 256" in message
    assert f"cheapest costs {cheapest:g}" in message
    with selection_log() as log, dspy.context(lm=DummyLM([{"answer": "x"}])):
        program(question="What is fact number 99 about the topic 1?")
    info = log[0].info
    assert info["ids"] == [] and "output reserve 256" in info["reason"] and "prompt alone" not in info["reason"]
    report = program.compile_report["predictors"]["self"]["empty_selections"]
    assert report["queries"] == 12 and report["empty"] == 12


def test_a_value_function_without_positive_values_warns():
    with pytest.warns(ZeroShotWarning, match=r"value is <= 0"):
        compile_with(budget=4000, selector="seer", value=lambda query, demo: -1.0)


def test_a_budget_with_room_compiles_without_a_warning():
    with warnings.catch_warnings():
        warnings.simplefilter("error", ZeroShotWarning)
        program = compile_with(budget=4000)
    assert program.compile_report["predictors"]["self"]["empty_selections"]["empty"] == 0


def test_no_demos_by_design_is_not_a_warning():
    with warnings.catch_warnings():
        warnings.simplefilter("error", ZeroShotWarning)
        program = compile_with(budget=4000, selector="no_demos")
    assert program.select_demos(question="What is fact number 1 about the topic 1?").info["ids"] == []
