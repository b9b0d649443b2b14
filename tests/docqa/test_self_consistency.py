"""Self-consistency in the program-of-thought solver: n sampled programs with their own rollout ids (DSPy's cache
keeps them apart), executed, majority vote; its settings in pipelines and suites; its cost in the bench report."""

from __future__ import annotations

import knapsack_dspy  # noqa: F401  # isort: skip  (offline env defaults before dspy / litellm are imported)
import types
from pathlib import Path

import dspy
import pytest
from dspy.utils import DummyLM
from helpers import HashingEmbedder, WordCounter

from knapsack_dspy.bench.execution.runner import run_suite
from knapsack_dspy.bench.results.store import load_rows
from knapsack_dspy.bench.suites.suite import SuiteError, suite_from_dict
from knapsack_dspy.docqa.data import load_examples
from knapsack_dspy.docqa.pipelines.pipeline import load_program, save_program
from knapsack_dspy.docqa.solvers.answer_vote import majority_vote
from knapsack_dspy.docqa.solvers.program_of_thought_answerer import ProgramOfThoughtAnswerer
from knapsack_dspy.docqa.tasks import build_pipeline
from knapsack_dspy.llm.cache import configure_cache
from knapsack_dspy.llm.lm_factory import make_lm
from knapsack_dspy.testing.openai_stub_server import StubOpenAIServer, chat_adapter_reply

TABLE = [["", "2019", "2018"], ["Revenue", "120", "100"]]
FINQA_DOCS = Path(__file__).parents[1] / "fixtures" / "finqa_docs_small.json"


def test_majority_vote_rules():
    assert majority_vote([1, 2, 2]) == (1, 2)
    assert majority_vote([1, 2]) == (0, 1)  # a tie: the first sample's answer
    assert majority_vote([None, 3, 4, 4.00001]) == (2, 2)  # failed samples do not vote; 4 and 4.00001 are one
    assert majority_vote([None, 3, 4]) == (1, 1)  # a tie without the first sample: the earliest voter
    assert majority_vote([None, None]) == (None, 0)
    assert majority_vote(["Cloud ", "cloud", ["a", "b"]]) == (0, 2)
    assert majority_vote([True, 1.0, 1]) == (1, 2)  # a boolean is not the number 1


def programs(*codes):
    return DummyLM([{"program": code} for code in codes])


def solve(lm, samples, **kw):
    solver = ProgramOfThoughtAnswerer(samples=samples, scale_from="program", **kw)
    with dspy.context(lm=lm):
        return solver(question="What was the revenue?", table=TABLE)


def test_the_majority_answer_and_its_program_win():
    lm = programs("ans = 1", "ans = 2", "ans = 1 + 1")
    pred = solve(lm, 3)
    assert pred.answer == 2 and pred.program == "ans = 2" and pred.votes == 2
    assert pred.sample_answers == [1, 2, 2] and pred.attempts == 3 and len(lm.history) == 3
    assert pred.sample_programs == ["ans = 1", "ans = 2", "ans = 1 + 1"]
    # each sample went out with its own rollout id at the sampling temperature
    sent = [entry["kwargs"] for entry in lm.history]
    assert [k.get("rollout_id") for k in sent] == [0, 1, 2]
    assert {k.get("temperature") for k in sent} == {0.7}
    assert "seed" not in sent[0]  # not an embedded model: no seed is sent


def test_failed_programs_do_not_vote_and_all_failing_is_an_error():
    pred = solve(programs("ans = 1 / 0", "ans = 3", "ans = 4"), 3)
    assert pred.answer == 3 and pred.sample_answers == [None, 3, 4] and pred.votes == 1
    assert len(pred.errors) == 1 and "ZeroDivisionError" in pred.errors[0]
    pred = solve(programs("ans = 1 / 0", "ans = undefined"), 2)
    assert pred.answer is None and pred.error and pred.votes == 0 and len(pred.errors) == 2
    # with retry on, the first failed sample gets the one repair call
    pred = solve(programs("ans = 1 / 0", "ans = undefined", "ans = 5"), 2, retry=True)
    assert pred.answer == 5 and pred.attempts == 3


def test_one_sample_is_todays_call():
    lm = programs("ans = 7")
    pred = solve(lm, 1)
    assert pred.answer == 7 and pred.attempts == 1 and "sample_answers" not in pred
    assert "rollout_id" not in lm.history[0]["kwargs"] and "temperature" not in lm.history[0]["kwargs"]


def test_bad_settings_are_refused():
    with pytest.raises(ValueError, match="samples must be an integer >= 1"):
        ProgramOfThoughtAnswerer(samples=0)
    with pytest.raises(ValueError, match="temperature must be a number from 0 to 2"):
        ProgramOfThoughtAnswerer(samples=3, temperature=5)
    with pytest.raises(ValueError, match="self-consistency votes over executed programs"):
        build_pipeline("tatqa", "cot", samples=3, embedder=HashingEmbedder(), token_counter=WordCounter())
    with pytest.raises(SuiteError, match="samples: must be an integer >= 1, got 0"):
        suite_from_dict({"samples": 0})


def test_embedded_models_get_a_seed_per_sample():
    solver = ProgramOfThoughtAnswerer(samples=3, temperature=0.5)
    with dspy.context(lm=types.SimpleNamespace(model="local/qwen2.5-coder-0.5b-instruct")):
        assert solver.sample_config(2) == {"rollout_id": 2, "temperature": 0.5, "seed": 2}
    with dspy.context(lm=types.SimpleNamespace(model="openai/gpt-4o-mini")):
        assert solver.sample_config(2) == {"rollout_id": 2, "temperature": 0.5}


@pytest.fixture()
def lm_cache(tmp_path):
    previous = dspy.cache
    configure_cache(tmp_path / "lm-cache")
    yield
    dspy.cache = previous


def test_the_lm_cache_keeps_samples_apart_and_serves_them_again(lm_cache):
    """Through LiteLLM and DSPy's cache: one prompt sampled three times reaches the server three times (the rollout
    id is in the cache key, not in the request); asking again is served from the cache, sample by sample."""
    replies = iter(["ans = 10", "ans = 20", "ans = 20", "ans = 99"])
    with StubOpenAIServer(reply=lambda body: chat_adapter_reply(program=next(replies))) as server:
        lm = make_lm("openai/stub-model", api_base=server.base_url, api_key="x")
        first = solve(lm, 3)
        assert first.sample_answers == [10, 20, 20] and first.answer == 20
        bodies = [r.body for r in server.completion_requests()]
        assert len(bodies) == 3 and all(b["temperature"] == 0.7 and "rollout_id" not in b for b in bodies)
        again = solve(lm, 3)
        assert again.sample_answers == [10, 20, 20] and server.completion_count() == 3


def test_pipelines_and_suites_carry_the_setting(tmp_path):
    program = build_pipeline("finqa", "python_pot", samples=3, temperature=0.4, embedder=HashingEmbedder(),
                             token_counter=WordCounter(), selector="kate", attributes=())
    assert program.solve.samples == 3 and program.solve.temperature == 0.4
    path = save_program(program, tmp_path / "p.json")
    reloaded = load_program(path, embedder=HashingEmbedder(), token_counter=WordCounter())
    assert reloaded.solve.samples == 3 and reloaded.solve.temperature == 0.4
    plain = build_pipeline("finqa", "python_pot", embedder=HashingEmbedder(), token_counter=WordCounter())
    assert "samples" not in plain.spec.spec  # programs saved without the setting stay as they were
    default = suite_from_dict({"selector": "seer"}).runs[0]
    assert suite_from_dict({"selector": "seer", "samples": 1, "temperature": 0.7}).runs[0].key == default.key
    assert suite_from_dict({"selector": "seer", "samples": 5}).runs[0].key != default.key


def test_the_bench_records_the_votes_and_reports_what_samples_cost(tmp_path, monkeypatch):
    from knapsack_dspy.bench.programs import run_program
    records = list(load_examples("finqa", path=FINQA_DOCS))
    monkeypatch.setattr(run_program, "load_split", lambda spec, which, data_dir: records[:4] if which == "pool"
                        else records[4:])
    previous = dspy.cache
    configure_cache(enabled=False)
    try:
        with StubOpenAIServer(reply=lambda body: chat_adapter_reply(program="ans = 0.25")) as server:
            suite = suite_from_dict({"name": "sc", "dataset": "finqa", "pipeline": "python_pot", "selector": "kate",
                                     "budget": 3000, "max_exemplars": 2, "attributes": [], "samples": 3,
                                     "model": "openai/stub-model", "api_base": server.base_url})
            monkeypatch.setenv("OPENAI_API_KEY", "x")
            metrics = run_suite(suite, tmp_path, embedder=HashingEmbedder(),
                                token_counter_factory=lambda model: WordCounter(), progress=False,
                                log=lambda msg: None)
            assert server.completion_count() == 3 * 2
    finally:
        dspy.cache = previous
    rows = load_rows(tmp_path)
    assert [r["sample_answers"] for r in rows] == [[0.25] * 3] * 2 and [r["votes"] for r in rows] == [3, 3]
    assert [r["lm_calls"] for r in rows] == [3, 3] and all(r["prompt_tokens_used"] > 0 for r in rows)
    assert rows[0]["correct"] and not rows[1]["correct"]  # DDD's answer is 0.25, EEE's "yes"
    (m,) = metrics.values()
    assert m["lm_calls_per_question"] == 3.0 and m["mean_votes"] == 3.0 and m["tokens_per_question"] > 0
    report = (tmp_path / "report.md").read_text()
    assert "| LM calls / q | tokens used / q | votes of the answer |" in report
