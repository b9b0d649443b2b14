"""A query never selects itself: a pool demo whose inputs equal the query's (up to case and whitespace) is left out,
with or without ``selection_hints(id=...)``, in threads (``dspy.Evaluate(num_threads=N)``) and in the compile's
own LM-scored search when the valset overlaps the trainset."""

import dspy
import pytest
from dspy.utils import DummyLM
from helpers import HashingEmbedder, WordCounter

from knapsack_dspy.modules.select_exemplars import inputs_key
from knapsack_dspy.modules.selection_context import selection_log
from knapsack_dspy.teleprompt import KnapsackFewShot

QUESTIONS = ["What is the capital of France?", "What is the capital of Peru?", "How many legs has a spider?",
             "How many legs has an ant?", "What colour is the sky?", "What colour is grass?", "What is 12 + 30?",
             "What is 7 * 6?", "Who wrote Hamlet?", "Who painted the Mona Lisa?", "What is the largest ocean?",
             "What is the longest river?", "Which planet is red?", "Which planet has rings?",
             "What gas do plants absorb?", "What gas do we breathe?"]


def trainset():
    return [dspy.Example(id=f"q{i}", question=q, answer=f"a{i}").with_inputs("question")
            for i, q in enumerate(QUESTIONS)]


@pytest.fixture(scope="module")
def embedder():
    return HashingEmbedder()


def compile_qa(embedder, **settings):
    options = dict(token_counter=WordCounter(), embedder=embedder, progress=False, budget=2000,
                   selector="kate_within_budget", max_exemplars=3, attributes=())
    options.update(settings)
    return KnapsackFewShot(**options).compile(dspy.ChainOfThought("question -> answer"), trainset=trainset())


def test_inputs_key_ignores_case_and_whitespace():
    assert inputs_key({"question": "  What is   THE capital?\n"}, ["question"]) == \
        inputs_key({"question": "what is the capital?"}, ["question"])
    assert inputs_key({"question": "What is a capital?"}, ["question"]) != \
        inputs_key({"question": "What is the capital?"}, ["question"])


@pytest.mark.parametrize("selector", ["kate", "kate_within_budget", "seer", "random"])
def test_a_trainset_question_never_gets_its_own_demo_without_hints(embedder, selector):
    program = compile_qa(embedder, selector=selector)
    for example in trainset():
        record = program.predict.select_demos(question=example.question)
        assert example.id not in record.info["ids"]
        assert record.info["ids"]  # the others still take its place
        variant = "  " + example.question.upper().replace(" ", "  ") + " "
        assert example.id not in program.predict.select_demos(question=variant).info["ids"]


def test_dspy_evaluate_in_threads_never_shows_a_question_its_own_answer(embedder):
    program = compile_qa(embedder)
    shown = []

    def metric(example, prediction, trace=None):
        return True

    def run(**inputs):
        with selection_log() as log:
            prediction = program(**inputs)
        shown.append((inputs["question"], [i for record in log for i in record.info["ids"]]))
        return prediction

    with dspy.context(lm=DummyLM([{"reasoning": "r", "answer": "x"}] * 64)):
        dspy.Evaluate(devset=trainset(), metric=metric, num_threads=4, display_progress=False)(run)
    own = {example.question: example.id for example in trainset()}
    assert len(shown) == len(QUESTIONS)
    assert all(own[question] not in ids and len(ids) == 3 for question, ids in shown)


def test_the_compile_search_scores_configurations_without_self_selection(embedder):
    sent = []

    class Recording(DummyLM):
        def forward(self, prompt=None, messages=None, **kwargs):
            sent.append(messages)
            return super().forward(prompt=prompt, messages=messages, **kwargs)

    data = trainset()
    tele = KnapsackFewShot(metric=lambda example, prediction, trace=None: 1.0, token_counter=WordCounter(),
                           embedder=embedder, progress=False, budget=2000, selector="kate_within_budget",
                           attributes=(), search_space={"max_exemplars": [2, 3]}, max_lm_configs=2)
    with dspy.context(lm=Recording([{"reasoning": "r", "answer": "x"}] * 400)):
        tele.compile(dspy.ChainOfThought("question -> answer"), trainset=data, valset=data)
    assert sent
    for messages in sent:
        asked = messages[-1]["content"]
        question = next(q for q in QUESTIONS if q in asked)
        answer = f"a{QUESTIONS.index(question)}"
        demos = "\n".join(m["content"] for m in messages[1:-1])
        assert question not in demos and f"[[ ## answer ## ]]\n{answer}\n" not in demos
