"""async (``acall`` / ``aforward``) and threads: a knapsack-compiled program awaited, many at once, and under
``dspy.Evaluate(num_threads=8)``; every prompt holds exactly its own question's demos."""

import asyncio
import re
from pathlib import Path

import dspy
import pytest
from dspy.utils import DummyLM
from helpers import HashingEmbedder, WordCounter
from test_knapsack_any_program import TwoStep, qa_examples

from knapsack_dspy.modules.selection_context import selection_hints, selection_log
from knapsack_dspy.teleprompt import KnapsackFewShot

QUESTIONS = [f"What is the {topic} of {country}?" for topic, country in
             [("river", "Peru"), ("anthem", "Kenya"), ("capital", "Japan"), ("currency", "Chile"),
              ("language", "Norway"), ("mountain", "Egypt")]]


@pytest.fixture(scope="module")
def embedder():
    return HashingEmbedder()


def compile_cot(embedder):
    return KnapsackFewShot(token_counter=WordCounter(), embedder=embedder, progress=False, budget=1500,
                           selector="seer", attributes=(), max_exemplars=3).compile(
        dspy.ChainOfThought("question -> answer"), trainset=qa_examples())


def shown_questions(messages) -> tuple[str, list[str]]:
    users = [m["content"] for m in messages if m["role"] == "user"]
    ask = [re.search(r"\[\[ ## question ## \]\]\n(.*)", u).group(1).strip() for u in users]
    return ask[-1], ask[:-1]


def expected_demos(program, question) -> list[str]:
    selection = program.predict.selection
    ids = program.predict.select_demos(question=question).info["ids"]
    return [selection.demos[selection.pool_ids.index(i)]["question"] for i in ids]


def test_acall_selects_and_calls_the_lm_asynchronously(embedder):
    program = compile_cot(embedder)
    lm = DummyLM([{"reasoning": "r", "answer": "a"}] * 3)

    async def ask():
        with dspy.context(lm=lm), selection_log() as log:
            prediction = await program.acall(question=QUESTIONS[0])
        return prediction, log

    prediction, log = asyncio.run(ask())
    assert prediction.answer == "a" and len(log) == 1
    question, shown = shown_questions(lm.history[-1]["messages"])
    assert question == QUESTIONS[0] and shown == expected_demos(program, QUESTIONS[0]) and len(shown) == 3


def test_concurrent_acalls_each_send_their_own_demos(embedder):
    program = compile_cot(embedder)
    lm = DummyLM([{"reasoning": "r", "answer": "a"}] * 20)

    async def ask(question):
        with dspy.context(lm=lm), selection_log() as log:
            await program.acall(question=question)
        return log[0].info["ids"]

    async def everything():
        return await asyncio.gather(*(ask(q) for q in QUESTIONS))

    ids = asyncio.run(everything())
    assert len(lm.history) == len(QUESTIONS)
    for entry in lm.history:
        question, shown = shown_questions(entry["messages"])
        assert shown == expected_demos(program, question)
    assert ids == [program.predict.select_demos(question=q).info["ids"] for q in QUESTIONS]


def test_threaded_evaluate_keeps_every_prompt_to_its_own_demos(embedder):
    program = KnapsackFewShot(token_counter=WordCounter(), embedder=embedder, progress=False, budget=1500,
                              selector="seer", attributes=(), max_exemplars=3).compile(TwoStep(),
                                                                                         trainset=qa_examples())
    devset = [dspy.Example(question=q, id=f"d{i}", answer="a").with_inputs("question", "id")
              for i, q in enumerate(QUESTIONS * 4)]
    lm = DummyLM([{"label": "river", "reasoning": "r", "answer": "a"}] * 100)
    with dspy.context(lm=lm):
        result = dspy.Evaluate(devset=devset, metric=lambda e, p, t=None: p.answer == "a", num_threads=8,
                               display_progress=False)(program)
    assert result.score == 100.0
    classify = program.classify.selection
    for entry in lm.history:
        if "`label`" not in entry["messages"][0]["content"].split("Your output fields are:")[1][:40]:
            continue  # the answer step
        question, shown = shown_questions(entry["messages"])
        with selection_hints(id=None):
            ids = program.classify.select_demos(question=question).info["ids"]
        assert shown == [classify.demos[classify.pool_ids.index(i)]["question"] for i in ids]
    assert program.classify.demos == [] and program.answer.predict.demos == []  # nothing shared was changed


DATA = Path(__file__).parents[1] / "fixtures"


def test_a_pipeline_answers_through_acall(embedder):
    from knapsack_dspy.docqa.data import load_examples
    from knapsack_dspy.docqa.tasks import build_pipeline

    examples = list(load_examples("tatqa", path=DATA / "data_tatqa_small.json"))
    student = build_pipeline("tatqa", "pot", route=None, selector="kate", max_exemplars=2, embedder=embedder,
                             token_counter=WordCounter(), attributes=())
    program = KnapsackFewShot(budget=3000, token_counter=WordCounter(), progress=False).compile(student,
                                                                                               trainset=examples)
    query = examples[0]
    lm = DummyLM([{"program": 'ans = 7\nscale = ""'}])

    async def ask():
        with dspy.context(lm=lm):
            return await program.acall(**program.example_inputs(query))

    prediction = asyncio.run(ask())
    assert prediction.answer == 7 and prediction.error is None
    assert prediction.exemplar_ids == program.select_for(query)["ids"] and len(prediction.exemplar_ids) == 2
    assert sum(m["role"] == "assistant" for m in lm.history[-1]["messages"]) == 2
