"""A query never selects itself: a pool demo whose inputs equal the query's (up to case and whitespace) is left out,
with or without ``selection_hints(id=...)``, in threads (``dspy.Evaluate(num_threads=N)``) and in the compile's
own LM-scored search when the valset overlaps the trainset; also when demos show less than their queries (the
``inputs_for`` hook: inline, saved, updated and store-backed pools)."""

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


class CutDemos(dspy.Module):
    """A program whose demos show less than its queries (``context`` cut to its first sentence), as a document-QA
    program's demos are cut to their evidence: its ``inputs_for`` hook says what a query shows."""

    def __init__(self):
        super().__init__()
        self.answer = dspy.Predict("context, question -> answer")

    def forward(self, context, question):
        return self.answer(context=context, question=question)

    def demo_for(self, predictor_name, example):
        return {"context": cut(example.context), "question": example.question, "answer": example.answer}

    def inputs_for(self, predictor_name, example):
        return {"context": example.context, "question": example.question}


def cut(context: str) -> str:
    return context.split(". ")[0] + "."


def documents():
    return [dspy.Example(id=f"q{i}", question=q, context=f"Fact {i} about it. More on {q} here. And more.",
                         answer=f"a{i}").with_inputs("context", "question")
            for i, q in enumerate(QUESTIONS)]


def compile_cut(embedder, **settings):
    options = dict(token_counter=WordCounter(), embedder=embedder, progress=False, budget=2000,
                   selector="kate_within_budget", max_exemplars=3, attributes=())
    options.update(settings)
    return KnapsackFewShot(**options).compile(CutDemos(), trainset=documents())


def own_demo_selected(program) -> list[str]:
    """The pool questions that get their own demo when asked as a query shows them (no id)."""
    return [ex.id for ex in documents()
            if ex.id in program.answer.select_demos(context=ex.context, question=ex.question).info["ids"]]


def test_a_query_never_gets_its_own_demo_when_demos_show_less_than_queries(embedder):
    program = compile_cut(embedder)
    assert program.answer.selection.demos[0]["context"] == "Fact 0 about it."  # the demos are cut
    assert own_demo_selected(program) == []
    # the rest still fill its place, and a demo's own (cut) inputs still name it
    first = documents()[0]
    assert len(program.answer.select_demos(context=first.context, question=first.question).info["ids"]) == 3
    assert "q0" not in program.answer.select_demos(context=cut(first.context), question=first.question).info["ids"]


def test_without_the_query_inputs_a_cut_demo_would_select_itself(embedder, monkeypatch):
    """The check above can fail: the same program, its pool fitted without the query inputs."""
    from knapsack_dspy.teleprompt import predictor_pools

    monkeypatch.setattr(predictor_pools, "InputsFor", type("Never", (), {}))
    assert own_demo_selected(compile_cut(embedder))


def test_the_query_inputs_survive_save_load_and_a_pool_update(embedder, tmp_path):
    program = compile_cut(embedder)
    state = program.answer.selection.dump_state()
    assert len(state["pool"]["query_digests"]) == len(QUESTIONS)
    path = tmp_path / "p.json"
    program.save(str(path))
    loaded = CutDemos()
    KnapsackFewShot.load(loaded, path, embedder=embedder, token_counter=WordCounter())
    assert own_demo_selected(loaded) == []
    extra = dspy.Example(id="q-new", question="What is the tallest mountain?", context="Everest. High. Cold.",
                         answer="Everest").with_inputs("context", "question")
    select = loaded.answer.selection
    select.update_pool([extra], [loaded.demo_for("answer", extra)], ["q0"],
                       measure=lambda demos: [10.0] * len(demos), add_inputs=[loaded.inputs_for("answer", extra)])
    assert "q-new" not in loaded.answer.select_demos(context=extra.context, question=extra.question).info["ids"]
    assert own_demo_selected(loaded) == []
    loaded.save(str(path))
    again = CutDemos()
    KnapsackFewShot.load(again, path, embedder=embedder, token_counter=WordCounter())
    assert "q-new" not in again.answer.select_demos(context=extra.context, question=extra.question).info["ids"]
    assert own_demo_selected(again) == []


class WholeDemos(CutDemos):
    """The same hooks, but demos that show what their queries show."""

    def demo_for(self, predictor_name, example):
        return {"context": example.context, "question": example.question, "answer": example.answer}


def test_demos_that_show_what_queries_show_save_no_query_inputs(embedder, tmp_path, monkeypatch):
    """A program with the hook whose demos equal its queries' inputs keeps the saved program and the pool store as
    they were without the hook (no column, the same store hash), also after adding such exemplars."""
    from knapsack_dspy.selection import pool_store
    from knapsack_dspy.teleprompt import predictor_pools

    settings = dict(token_counter=WordCounter(), embedder=embedder, progress=False, budget=2000,
                    selector="kate_within_budget", max_exemplars=3, attributes=())
    program = KnapsackFewShot(**settings).compile(WholeDemos(), trainset=documents())
    state = program.answer.selection.dump_state()
    assert "query_digests" not in state["pool"] and own_demo_selected(program) == []
    extra = dspy.Example(id="q-new", question="What is the tallest mountain?", context="Everest. High. Cold.",
                         answer="Everest").with_inputs("context", "question")
    program.answer.selection.update_pool([extra], [program.demo_for("answer", extra)],
                                         measure=lambda demos: [10.0] * len(demos),
                                         add_inputs=[program.inputs_for("answer", extra)])
    assert "query_digests" not in program.answer.selection.dump_state()["pool"]

    monkeypatch.setenv("KDSPY_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(pool_store, "INLINE_POOL_LIMIT", 4)
    with_hook = KnapsackFewShot(**settings).compile(WholeDemos(), trainset=documents()).answer.selection.store
    monkeypatch.setattr(predictor_pools, "InputsFor", type("Never", (), {}))
    without = KnapsackFewShot(**settings).compile(WholeDemos(), trainset=documents()).answer.selection.store
    assert with_hook.hash == without.hash


def test_a_plain_program_saves_no_query_inputs(embedder):
    """Demos that show what their queries show keep the saved program as it was (no column)."""
    assert "query_digests" not in compile_qa(embedder).predict.selection.dump_state()["pool"]


def test_a_store_backed_pool_knows_both_inputs_of_each_exemplar(embedder, tmp_path, monkeypatch):
    from knapsack_dspy.selection import pool_store

    monkeypatch.setenv("KDSPY_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(pool_store, "INLINE_POOL_LIMIT", 4)
    program = compile_cut(embedder)
    select = program.answer.selection
    assert select.store is not None
    assert own_demo_selected(program) == []
    first = documents()[0]
    assert "q0" not in program.answer.select_demos(context=cut(first.context), question=first.question).info["ids"]
    extra = dspy.Example(id="q-new", question="What is the tallest mountain?", context="Everest. High. Cold.",
                         answer="Everest").with_inputs("context", "question")
    select.update_pool([extra], [program.demo_for("answer", extra)], measure=lambda demos: [10.0] * len(demos),
                       add_inputs=[program.inputs_for("answer", extra)])
    assert select.store is not None and len(select.pool_ids) == len(QUESTIONS) + 1
    assert "q-new" not in program.answer.select_demos(context=extra.context, question=extra.question).info["ids"]
    assert own_demo_selected(program) == []
