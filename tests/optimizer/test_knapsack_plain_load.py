"""The usual DSPy load of a knapsack-compiled program: ``MyProgram().load(path)`` / ``load_state`` cannot give the
plain predictors their per-query selection (DSPy's ``Predict.load_state`` has no hook), so they refuse the state
with one line saying what to call, instead of silently becoming a zero-shot program. ``KnapsackFewShot.load`` and
``dspy.load`` keep working."""

import json

import dspy
import pytest
from helpers import HashingEmbedder, WordCounter

from knapsack_dspy import KnapsackFewShot
from knapsack_dspy.modules.selecting_predict import PLAIN_LOAD_MESSAGE, SelectingPredict


class Program(dspy.Module):
    def __init__(self):
        super().__init__()
        self.answer = dspy.ChainOfThought("question -> answer")

    def forward(self, question):
        return self.answer(question=question)


def trainset():
    return [dspy.Example(id=f"t{i}", question=f"What is item {i} of group {i % 3}?", answer=f"a{i}")
            .with_inputs("question") for i in range(10)]


@pytest.fixture
def saved(tmp_path):
    embedder = HashingEmbedder()
    program = KnapsackFewShot(token_counter=WordCounter(), embedder=embedder, progress=False, budget=2000,
                              selector="kate", max_exemplars=2, attributes=()).compile(Program(), trainset=trainset())
    path = tmp_path / "program.json"
    program.save(str(path))
    return program, path, embedder


def test_a_plain_load_refuses_the_state_with_one_line_naming_the_loader(saved):
    _, path, _ = saved
    fresh = Program()
    with pytest.raises(ValueError) as caught:
        fresh.load(str(path))
    message = str(caught.value)
    assert "\n" not in message and "KnapsackFewShot.load" in message and PLAIN_LOAD_MESSAGE in message
    assert type(fresh.answer.predict) is dspy.Predict and not hasattr(fresh.answer.predict, "selection")
    with pytest.raises(ValueError, match=r"KnapsackFewShot\.load"):
        Program().load_state(json.loads(path.read_text()))
    with pytest.raises(ValueError, match=r"KnapsackFewShot\.load"):
        dspy.Predict("question -> answer").load_state(json.loads(path.read_text())["answer.predict"])


def test_knapsack_load_restores_the_selection(saved):
    program, path, embedder = saved
    loaded = KnapsackFewShot.load(Program(), str(path), embedder=embedder, token_counter=WordCounter())
    assert isinstance(loaded.answer.predict, SelectingPredict)
    question = "What is item 4 of group 1?"
    assert loaded.answer.predict.select_demos(question=question).info["ids"] == \
        program.answer.predict.select_demos(question=question).info["ids"]
    assert loaded.answer.predict.fields == {}  # the marker is not a decision field of the loaded predictor
    loaded.save(str(path.with_name("again.json")))  # and saving again writes the same state
    assert json.loads(path.with_name("again.json").read_text())["answer.predict"] == \
        json.loads(path.read_text())["answer.predict"]


def test_dspy_load_of_a_whole_saved_program_keeps_selecting(saved, tmp_path):
    program, _, _ = saved
    folder = tmp_path / "whole"
    program.save(str(folder), save_program=True)
    loaded = dspy.load(str(folder), allow_pickle=True)
    assert isinstance(loaded.answer.predict, SelectingPredict)
