"""Saving and loading a knapsack-compiled program the DSPy ways: state JSON into a fresh student, the whole program
(``save_program=True`` + ``dspy.load``), and an MLflow model (``mlflow.dspy``) when MLflow is installed."""

import json
import os
from pathlib import Path

import dspy
import pytest
from dspy.utils import DummyLM
from helpers import HashingEmbedder, WordCounter
from test_knapsack_any_program import TwoStep, qa_examples

from knapsack_dspy.llm.token_counter import get_token_counter
from knapsack_dspy.modules.selection_context import selection_hints, selection_log
from knapsack_dspy.teleprompt import KnapsackFewShot

DATA = Path(os.environ.get("KDSPY_DATA_DIR", Path(__file__).resolve().parents[3] / "shared" / "data"))
QUESTIONS = ["What is the river of Peru?", "What is the anthem of Kenya?", "What is the capital of Japan?"]


@pytest.fixture(scope="module")
def compiled():
    return KnapsackFewShot(token_counter=WordCounter(), embedder=HashingEmbedder(), progress=False, budget=1500,
                           selector="seer", attributes=("label",)).compile(TwoStep(), trainset=qa_examples())


def selections(program) -> list:
    out = []
    for question in QUESTIONS:
        with selection_hints(id="t3"):
            out.append([program.classify.select_demos(question=question).info["ids"],
                        program.answer.predict.select_demos(question=question, label="river").info["ids"]])
    return out


def answers(program) -> list:
    lm = DummyLM([{"label": "river"}, {"reasoning": "r", "answer": "a"}] * len(QUESTIONS))
    with dspy.context(lm=lm), selection_log() as log:
        for question in QUESTIONS:
            program(question=question)
    return [record.info["ids"] for record in log]


def test_the_whole_program_saves_and_loads_with_dspy_load(tmp_path, compiled):
    compiled.save(str(tmp_path / "program"), save_program=True)
    assert json.loads((tmp_path / "program" / "metadata.json").read_text())["dependency_versions"]
    loaded = dspy.load(str(tmp_path / "program"), allow_pickle=True)
    assert type(loaded) is TwoStep and loaded is not compiled
    selection = loaded.answer.predict.selection
    assert selection._pool_obj is None and selection._selector_obj is None  # rebuilt lazily, not pickled
    assert selections(loaded) == selections(compiled)
    assert answers(loaded) == answers(compiled)
    with pytest.raises(ValueError, match="allow_pickle"):
        dspy.load(str(tmp_path / "program"))  # DSPy's own guard stays


@pytest.mark.skipif(not (DATA / "tatqa" / "dev_pool.json.gz").exists(), reason="TAT-QA data not found")
def test_a_pipeline_with_a_real_tokenizer_pickles_its_counter_as_the_model(tmp_path):
    from knapsack_dspy.docqa.data import load_examples
    from knapsack_dspy.docqa.tasks import build_pipeline

    examples = list(load_examples("tatqa", path=Path(__file__).parents[1] / "fixtures" / "data_tatqa_small.json"))
    counter = get_token_counter("openai/gpt-4o-mini")  # LiteLLM's offline tokenizer: a memo with a lock
    student = build_pipeline("tatqa", "pot", route=None, selector="seer", max_exemplars=2, embedder=HashingEmbedder(),
                             model="openai/gpt-4o-mini")
    program = KnapsackFewShot(budget=3000, token_counter=counter, progress=False).compile(student, trainset=examples)
    program.save(str(tmp_path / "pipeline"), save_program=True)
    loaded = dspy.load(str(tmp_path / "pipeline"), allow_pickle=True)
    assert loaded.solve.write.token_counter is counter  # the process's shared counter, not a pickled copy
    def kept(info):
        return {k: v for k, v in info.items() if k != "selection_ms"}

    assert [kept(loaded.select_for(e)) for e in examples] == [kept(program.select_for(e)) for e in examples]


@pytest.mark.slow  # MLflow's import and its store's migrations take ~15 s
def test_an_mlflow_model_round_trips(tmp_path, compiled, mlflow_state_restored):
    mlflow = pytest.importorskip("mlflow")
    pytest.importorskip("mlflow.dspy")
    mlflow.set_tracking_uri(f"sqlite:///{tmp_path}/mlflow.db")
    # the artifacts (the pickled model) go under tmp_path too, not into ./mlruns of the working directory
    mlflow.set_experiment(experiment_id=mlflow.create_experiment(
        "knapsack", artifact_location=(tmp_path / "artifacts").as_uri()))
    try:
        with mlflow.start_run():
            info = mlflow.dspy.log_model(compiled, name="program")
        loaded = mlflow.dspy.load_model(info.model_uri)
    finally:  # loading makes the model the process's active one: later metrics would be logged against it
        mlflow.clear_active_model()
        mlflow.set_tracking_uri(None)
    assert type(loaded) is TwoStep
    assert selections(loaded) == selections(compiled)
    assert answers(loaded) == answers(compiled)
