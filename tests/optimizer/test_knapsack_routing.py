"""The routing pattern of docs/core.md: one program, a router fitted on the trainset at compile time, two
predictors each with its own pool and settings (span questions: extraction; arithmetic: a program), saved and
loaded whole."""

import dspy
import numpy as np
from dspy.predict.parameter import Parameter
from dspy.utils import DummyLM
from helpers import HashingEmbedder, WordCounter

from knapsack_dspy import KnapsackFewShot, SelectionConfig, load_compiled, selection_hints, selection_log


class AnswerTypeRouter(dspy.Module, Parameter):
    """Nearest centroid of the question embeddings per route; learned by ``fit_on_trainset``, saved as state."""

    def __init__(self):
        super().__init__()
        self.centroids: dict[str, list[float]] = {}
        self.embedder = None

    def fit_on_trainset(self, trainset, embedder):
        self.embedder = embedder
        for kind in ("extract", "compute"):
            questions = [ex.question for ex in trainset if route_of(ex) == kind]
            self.centroids[kind] = embedder.encode(questions).mean(axis=0).tolist()

    def forward(self, question):
        vector = self.embedder.encode([question])[0]
        return dspy.Prediction(kind=max(self.centroids, key=lambda k: float(np.dot(vector, self.centroids[k]))))

    def dump_state(self, json_mode=True):
        return {"centroids": self.centroids}

    def load_state(self, state, *, allow_unsafe_lm_state=False):  # DSPy passes this to a Module parameter
        self.centroids = dict(state["centroids"])
        return self

    def reset(self):
        pass


def route_of(example) -> str:
    return "extract" if example.answer_type == "span" else "compute"


class RoutedQA(dspy.Module):
    def __init__(self, embedder=None):
        super().__init__()
        self.route = AnswerTypeRouter()
        self.route.embedder = embedder
        self.extract = dspy.Predict("question -> answer")
        self.compute = dspy.Predict("question -> program")

    def demo_for(self, name, example):
        if name != route_of(example):
            return None
        out = {"answer": example.answer} if name == "extract" else {"program": f"ans = {example.answer}"}
        return dspy.Example(question=example.question, **out)

    def selection_config(self, name):
        return {"extract": SelectionConfig(selector="kate", max_exemplars=2, budget=800, attributes=()),
                "compute": SelectionConfig(selector="seer", max_exemplars=3, budget=1200, attributes=())}[name]

    def forward(self, question, id=None):
        with selection_hints(id=id):
            step = self.extract if self.route(question=question).kind == "extract" else self.compute
            return step(question=question)


def examples():
    spans = [f"Who wrote the report on {topic}?" for topic in ("tax", "sales", "costs", "risk", "staff")]
    sums = [f"What is the total of {a} and {b} in revenue?" for a, b in ((1, 2), (3, 4), (5, 6), (7, 8), (9, 10))]
    out = [dspy.Example(id=f"s{i}", question=q, answer=f"author {i}", answer_type="span")
           for i, q in enumerate(spans)]
    out += [dspy.Example(id=f"a{i}", question=q, answer=str(i), answer_type="arithmetic")
            for i, q in enumerate(sums)]
    return [ex.with_inputs("question") for ex in out]


def test_a_routed_program_compiles_two_selections_and_a_router(tmp_path):
    embedder = HashingEmbedder()
    program = KnapsackFewShot(token_counter=WordCounter(), embedder=embedder, progress=False).compile(
        RoutedQA(embedder), trainset=examples())
    assert program.compile_report["fitted_modules"] == ["self.route"]
    assert program.extract.selection.pool_ids == [f"s{i}" for i in range(5)]
    assert program.compute.selection.pool_ids == [f"a{i}" for i in range(5)]
    assert (program.extract.selection.config.max_exemplars, program.compute.selection.config.max_exemplars) == (2, 3)
    lm = DummyLM([{"answer": "someone"}, {"program": "ans = 3"}])
    with dspy.context(lm=lm), selection_log() as log:
        program(question="Who wrote the report on growth?", id="s9")
        program(question="What is the total of 11 and 12 in revenue?", id="a1")
    assert [r.predictor for r in log] == ["extract", "compute"]
    assert len(log[0].info["ids"]) == 2 and set(log[0].info["ids"]) <= {f"s{i}" for i in range(5)}
    assert "a1" not in log[1].info["ids"] and set(log[1].info["ids"]) <= {f"a{i}" for i in range(5)}
    path = tmp_path / "routed.json"
    program.save(str(path))
    loaded = load_compiled(RoutedQA(embedder), path, embedder=embedder, token_counter=WordCounter())
    assert loaded.route.centroids == program.route.centroids
    assert loaded.compute.select_demos(question="What is the total of 1 and 9?").info["ids"] == \
        program.compute.select_demos(question="What is the total of 1 and 9?").info["ids"]
