"""KnapsackFewShot on ordinary DSPy programs: a ChainOfThought, several predictors with their own selection, the
compile hooks, fixed demos of another optimizer as a shared prefix, exact budgets after instructions change,
user value and attribute functions, hints and the selection log."""

import json
import re

import dspy
import pytest
from dspy.utils import DummyLM
from helpers import HashingEmbedder, WordCounter

from knapsack_dspy.modules.compiled_programs import load_compiled
from knapsack_dspy.modules.select_exemplars import NotCompiledError
from knapsack_dspy.modules.selecting_predict import SelectingPredict
from knapsack_dspy.modules.selection_context import selection_hints, selection_log
from knapsack_dspy.selection import SelectionConfig
from knapsack_dspy.teleprompt import KnapsackFewShot
from knapsack_dspy.teleprompt.knapsack_few_shot import CompileError

TOPICS = ["capital", "river", "mountain", "currency", "language", "president", "population", "anthem"]
COUNTRIES = ["France", "Peru", "Japan", "Kenya", "Norway", "Chile", "Egypt", "India", "Italy", "Spain"]


def qa_examples(n=40, prefix="t"):
    out = []
    for i in range(n):
        topic, country = TOPICS[i % len(TOPICS)], COUNTRIES[i % len(COUNTRIES)]
        padding = " ".join(["detail"] * (i % 7 * 9))  # varied token costs
        out.append(dspy.Example(id=f"{prefix}{i}", question=f"What is the {topic} of {country}? {padding}".strip(),
                                answer=f"{topic}-{country}-{i}", label=topic,
                                parity="even" if i % 2 == 0 else "odd").with_inputs("question"))
    return out


def asked(message: str, field: str = "question") -> str:
    return re.search(rf"\[\[ ## {field} ## \]\]\n(.*)", message).group(1).strip()


@pytest.fixture(scope="module")
def embedder():
    return HashingEmbedder()


def teleprompter(embedder, **settings):
    options = dict(token_counter=WordCounter(), embedder=embedder, progress=False, budget=1500,
                   reserve_output_tokens=100, selector="kate", max_exemplars=3, attributes=())
    options.update(settings)
    return KnapsackFewShot(**options)


def test_a_plain_chain_of_thought_compiles_and_selects_per_question(embedder):
    trainset = qa_examples()
    student = dspy.ChainOfThought("question -> answer")
    program = teleprompter(embedder).compile(student, trainset=trainset)
    assert isinstance(program.predict, SelectingPredict) and type(student.predict) is dspy.Predict
    assert [name for name, _ in program.named_predictors()] == ["predict"]
    selection = program.predict.selection
    assert len(selection.pool_ids) == 40
    assert set(selection.demos[0]) == {"question", "answer"}  # no "reasoning": the trainset does not supply it
    lm = DummyLM([{"reasoning": "r", "answer": "a"}] * 10)
    questions = ["What is the river of Peru?", "What is the currency of Japan?"]
    with dspy.context(lm=lm), selection_log() as log:
        for question in questions:
            assert program(question=question).answer == "a"
    assert [r.predictor for r in log] == ["predict", "predict"]
    for entry, record, question in zip(lm.history, log, questions, strict=True):
        users = [m["content"] for m in entry["messages"] if m["role"] == "user"]
        assert asked(users[-1]) == question
        shown = [asked(u) for u in users[:-1]]
        assert shown == [selection.demos[selection.pool_ids.index(i)]["question"] for i in record.info["ids"]]
        assert len(shown) == 3
        similarity = selection.pool().similarities(embedder.encode([question])[0])
        ranks = [similarity[selection.pool_ids.index(i)] for i in record.info["ids"]]
        assert ranks == sorted(ranks)  # the most similar exemplar sits next to the question
    assert log[0].info["ids"] != log[1].info["ids"]


def test_the_reported_prompt_tokens_are_the_tokens_sent(embedder):
    program = teleprompter(embedder, max_exemplars=4).compile(dspy.Predict("question -> answer"),
                                                              trainset=qa_examples())
    assert isinstance(program, SelectingPredict)
    lm = DummyLM([{"answer": "a"}] * 10)
    counter = WordCounter()
    for question in ["What is the anthem of Chile?", "What is the language of Egypt?"]:
        with dspy.context(lm=lm), selection_log() as log:
            program(question=question)
        sent = counter.count_messages(lm.history[-1]["messages"])
        assert abs(log[0].info["prompt_tokens"] - sent) <= 2  # only the adapter's fixed overhead may differ
        assert log[0].info["within_budget"] and sent <= 1500 - 100


class TwoStep(dspy.Module):
    """Classify the question, then answer it: two predictors, each with its own exemplars."""

    def __init__(self):
        super().__init__()
        self.classify = dspy.Predict("question -> label")
        self.answer = dspy.ChainOfThought("question, label -> answer")

    def forward(self, question, id=None):
        with selection_hints(id=id):
            label = self.classify(question=question).label
            return self.answer(question=question, label=label)


def test_several_predictors_each_with_their_own_pool_and_settings(embedder):
    trainset = qa_examples()
    tele = KnapsackFewShot(token_counter=WordCounter(), embedder=embedder, progress=False, config={
        "classify": SelectionConfig(selector="kate", max_exemplars=2, attributes=(), budget=1500),
        "answer.predict": SelectionConfig(selector="seer_gold", max_exemplars=4, attributes=("label",), alpha=1.0,
                                          budget=1500)})
    program = tele.compile(TwoStep(), trainset=trainset)
    classify, answer = program.classify.selection, program.answer.predict.selection
    assert classify.config.max_exemplars == 2 and answer.config.max_exemplars == 4
    assert set(classify.demos[0]) == {"question", "label"}  # each pool in its predictor's own fields
    assert set(answer.demos[0]) == {"question", "label", "answer"}
    assert classify.config.embed_fields == ("question",) and answer.config.embed_fields == ("question", "label")
    assert set(program.compile_report["predictors"]) == {"classify", "answer.predict"}
    lm = DummyLM([{"label": "river"}, {"reasoning": "r", "answer": "x"}] * 3)
    with dspy.context(lm=lm), selection_log() as log, selection_hints(attributes={"label": "river"}):
        program(question="What is the river of Kenya?", id="t1")
    first, second = log
    assert (first.predictor, second.predictor) == ("classify", "answer.predict")
    assert len(first.info["ids"]) == 2 and len(second.info["ids"]) == 4
    assert "t1" not in first.info["ids"] + second.info["ids"]  # the hint's id is never its own exemplar
    labels = dict(zip(answer.pool_ids, answer.pool_attributes["label"], strict=True))
    assert {labels[i] for i in second.info["ids"]} == {"river"}  # alpha = 1: all share the gold label
    assert second.info["predicted_attributes"] == {"label": "river"}


def test_a_config_for_a_predictor_the_student_lacks_is_an_error(embedder):
    with pytest.raises(CompileError, match=r"config names predictors the student does not have: \['answer'\]"):
        teleprompter(embedder, config={"answer": SelectionConfig()}).compile(TwoStep(), trainset=qa_examples())


def test_the_demo_for_hook_decides_each_predictors_pool(embedder):
    class Hooked(TwoStep):
        def demo_for(self, predictor_name, example):
            if predictor_name == "classify":
                return None  # no exemplars for the classifier
            if int(example.id[1:]) % 2:
                return None
            return dspy.Example(question=example.question.upper(), label=example.label, answer=example.answer)

    program = teleprompter(embedder).compile(Hooked(), trainset=qa_examples())
    assert type(program.classify) is dspy.Predict  # an empty pool: left as it was
    assert program.compile_report["skipped"] == {"classify": "no trainset example fits its signature"}
    pool = program.answer.predict.selection
    assert pool.pool_ids == [f"t{i}" for i in range(0, 40, 2)]
    assert pool.demos[0]["question"].startswith("WHAT IS THE")
    with pytest.raises(CompileError, match=r"empty exemplar pool for \['classify'\]"):
        teleprompter(embedder, predictors=["classify"]).compile(Hooked(), trainset=qa_examples())


def test_another_optimizers_demos_are_a_prefix_counted_in_the_budget(embedder):
    trainset = qa_examples()
    program = teleprompter(embedder, max_exemplars=3).compile(dspy.ChainOfThought("question -> answer"),
                                                              trainset=trainset)
    with_prefix = dspy.LabeledFewShot(k=2).compile(program, trainset=trainset)
    assert isinstance(with_prefix.predict, SelectingPredict) and len(with_prefix.predict.demos) == 2
    fixed_ids = [d.id for d in with_prefix.predict.demos]
    lm = DummyLM([{"reasoning": "r", "answer": "a"}] * 20)
    counter = WordCounter()
    for question in [d.question for d in with_prefix.predict.demos]:  # the prefix's own questions
        with dspy.context(lm=lm), selection_log() as log:
            with_prefix(question=question)
        users = [m["content"] for m in lm.history[-1]["messages"] if m["role"] == "user"]
        shown = [asked(u) for u in users[:-1]]
        assert shown[:2] == [d.question for d in with_prefix.predict.demos]  # the prefix first, in its order
        assert len(shown) == 2 + len(log[0].info["ids"]) and len(log[0].info["ids"]) == 3
        assert not set(fixed_ids) & set(log[0].info["ids"])  # a prefix exemplar is never selected again
        assert log[0].info["fixed_demos"] == 2
        assert abs(log[0].info["prompt_tokens"] - counter.count_messages(lm.history[-1]["messages"])) <= 2
    assert program.predict.demos == []  # the compiled program itself is unchanged


def test_explicit_demos_are_sent_as_given(embedder):
    program = teleprompter(embedder).compile(dspy.Predict("question -> answer"), trainset=qa_examples())
    lm = DummyLM([{"answer": "a"}] * 3)
    mine = [dspy.Example(question="Who?", answer="me")]
    with dspy.context(lm=lm), selection_log() as log:
        program(question="What is the capital of Peru?", demos=mine)
    assert log == []
    assert [m["role"] for m in lm.history[-1]["messages"]] == ["system", "user", "assistant", "user"]


def test_changed_instructions_are_measured_at_call_time(embedder):
    program = teleprompter(embedder, selector="seer", max_exemplars=6, budget=1000).compile(
        dspy.ChainOfThought("question -> answer"), trainset=qa_examples())
    lm = DummyLM([{"reasoning": "r", "answer": "a"}] * 10)
    counter = WordCounter()
    question = "What is the population of Norway?"
    with dspy.context(lm=lm), selection_log() as before:
        program(question=question)
    long = " ".join(["Think about the question very carefully."] * 80)  # what MIPROv2 or GEPA may write
    program.predict.signature = program.predict.signature.with_instructions(long)
    with dspy.context(lm=lm), selection_log() as after:
        program(question=question)
    sent = counter.count_messages(lm.history[-1]["messages"])
    assert after[0].info["base_tokens"] > before[0].info["base_tokens"] + 300
    assert len(after[0].info["ids"]) < len(before[0].info["ids"])  # fewer exemplars fit beside the instructions
    assert abs(after[0].info["prompt_tokens"] - sent) <= 2 and sent <= 1000 - 100
    program.predict.signature = program.predict.signature.append("source", dspy.OutputField())
    with pytest.raises(ValueError, match="fields may not: compile again"), dspy.context(lm=lm):
        program(question=question)


def test_a_value_function_replaces_the_similarity_and_must_be_given_again_after_loading(tmp_path, embedder):
    def shortest_first(query, demo):
        return -len(demo["question"])

    trainset = qa_examples()
    program = teleprompter(embedder, value=shortest_first).compile(dspy.Predict("question -> answer"),
                                                                   trainset=trainset)
    shortest = sorted(trainset, key=lambda ex: len(ex.question))[:3]
    assert isinstance(program, SelectingPredict)  # a bare dspy.Predict compiles into a SelectingPredict
    record = program.select_demos(question="What is the anthem of Italy?")
    assert set(record.info["ids"]) == {ex.id for ex in shortest}
    assert record.info["ids"][-1] == shortest[0].id  # the best value sits next to the question
    path = tmp_path / "p.json"
    program.save(str(path))
    assert json.loads(path.read_text())["selection"]["value"].endswith("shortest_first")
    forgot = load_compiled(dspy.Predict("question -> answer"), path, embedder=embedder, token_counter=WordCounter())
    with pytest.raises(NotCompiledError, match=r"value function .*shortest_first.* give it again"):
        forgot.select_demos(question="What is the anthem of Italy?")
    loaded = load_compiled(dspy.Predict("question -> answer"), path, embedder=embedder, token_counter=WordCounter(),
                           value=shortest_first)
    assert isinstance(loaded, SelectingPredict)
    assert loaded.select_demos(question="What is the anthem of Italy?").info["ids"] == record.info["ids"]


def test_attribute_functions_give_pool_attributes(embedder):
    tele = teleprompter(embedder, selector="seer_gold", alpha=1.0, max_exemplars=4,
                        attributes={"size": lambda ex: "long" if len(ex.question) > 40 else "short"})
    program = tele.compile(dspy.Predict("question -> answer"), trainset=qa_examples())
    selection = program.selection
    assert selection.config.attributes == ("size",)
    sizes = dict(zip(selection.pool_ids, selection.pool_attributes["size"], strict=True))
    with selection_hints(attributes={"size": "long"}):
        record = program.select_demos(question="What is the capital of France?")
    assert record.info["ids"] and {sizes[i] for i in record.info["ids"]} == {"long"}
    with pytest.raises(CompileError, match="map names to functions"):
        KnapsackFewShot(attributes={"size": "long"})


def test_modules_that_learn_from_the_trainset_are_fitted(embedder):
    class Router(dspy.Module):
        def __init__(self):
            super().__init__()
            self.seen = None

        def fit_on_trainset(self, trainset, embedder):
            self.seen = (len(trainset), embedder)

        def forward(self, question):
            return dspy.Prediction(route="answer")

    class Routed(dspy.Module):
        def __init__(self):
            super().__init__()
            self.route = Router()
            self.answer = dspy.Predict("question -> answer")

    student = Routed()
    program = teleprompter(embedder).compile(student, trainset=qa_examples())
    assert program.route.seen == (40, embedder) and student.route.seen is None
    assert program.compile_report["fitted_modules"] == ["self.route"]


def test_save_and_load_the_dspy_way_round_trips_selections(tmp_path, embedder):
    trainset = qa_examples()
    program = teleprompter(embedder, selector="seer", attributes=("label",)).compile(TwoStep(), trainset=trainset)
    path = tmp_path / "two.json"
    program.save(str(path))
    loaded = KnapsackFewShot.load(TwoStep(), str(path), embedder=embedder, token_counter=WordCounter())
    assert isinstance(loaded.classify, SelectingPredict) and isinstance(loaded.answer.predict, SelectingPredict)
    for question in ["What is the mountain of Chile?", "What is the language of Spain?"]:
        for name in ("classify", "answer.predict"):
            inputs = {"question": question, "label": "x"}
            ours = dict(program.named_predictors())[name]
            theirs = dict(loaded.named_predictors())[name]
            fields = {k: v for k, v in inputs.items() if k in ours.signature.input_fields}
            assert theirs.select_demos(**fields).info["ids"] == ours.select_demos(**fields).info["ids"]
    assert set(loaded.compile_report["predictors"]) == {"classify", "answer.predict"}
    with pytest.raises(ValueError, match="which the student does not have"):
        load_compiled(dspy.ChainOfThought("question -> answer"), path, embedder=embedder)
