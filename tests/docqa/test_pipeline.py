"""The TAT-QA pipeline end to end with DummyLM: compile, answer, save/load, bench (resume, selection-only)."""

import json
from pathlib import Path

import dspy
import pytest
from dspy.utils import DummyLM
from helpers import DATA, HashingEmbedder, WordCounter, needs_tatqa

from knapsack_dspy.bench.execution.runner import run_suite
from knapsack_dspy.bench.results.store import load_rows
from knapsack_dspy.bench.suites.suite import suite_from_dict
from knapsack_dspy.docqa.pipelines.pipeline import load_program, save_program
from knapsack_dspy.docqa.tasks import build_pipeline
from knapsack_dspy.modules.compile_hooks import (
    CompileHooks,
    DemoFor,
    FitsOnTrainset,
    HasEmbedder,
    InputsFor,
    SelectionConfigFor,
)
from knapsack_dspy.teleprompt.knapsack_few_shot import KnapsackFewShot

pytestmark = needs_tatqa


@pytest.fixture(scope="module")
def embedder():
    return HashingEmbedder()


def compiled(data, embedder, **kw):
    pool, _ = data
    student = build_pipeline("tatqa", "pot", route=None, selector=kw.pop("selector", "seer"), max_exemplars=3,
                             embedder=embedder, token_counter=WordCounter(), attributes=("modality", "answer_type"))
    tele = KnapsackFewShot(max_exemplars=3, budget=kw.pop("budget", 2500), token_counter=student.token_counter,
                           attributes=("modality", "answer_type"), progress=False, **kw)
    return tele.compile(student, trainset=pool)


def test_pipeline_answers_with_selected_demos(data, embedder):
    program = compiled(data, embedder)
    query = data[1][0]
    lm = DummyLM([{"program": "ans = 42\nscale = \"\""}] * 5)
    with dspy.context(lm=lm):
        pred = program(**program.example_inputs(query))
    assert pred.answer == 42 and pred.error is None
    assert 1 <= len(pred.exemplar_ids) <= 3
    sel = pred.selection
    assert sel["within_budget"] and sel["prompt_tokens"] <= 2500 - 256
    # the prompt holds exactly the selected demos, in order, and the query's retrieved table
    messages = lm.history[0]["messages"]
    assert sum(m["role"] == "assistant" for m in messages) == len(pred.exemplar_ids)
    assert query.question in messages[-1]["content"]
    # every demo carries a program that reproduces its gold answer or a literal answer
    assert all("ans =" in m["content"] for m in messages if m["role"] == "assistant")


def test_a_repair_keeps_the_writers_prompt_as_its_prefix(data, embedder):
    program = compiled(data, embedder)
    program.solve.retry = True  # off by default
    query = data[1][0]
    lm = DummyLM([{"program": "ans = table['nowhere', 'x']"}, {"program": "ans = 42\nscale = \"\""}])
    with dspy.context(lm=lm):
        pred = program(**program.example_inputs(query))
    assert pred.answer == 42 and pred.attempts == 2
    first, repair = lm.history[0]["messages"], lm.history[1]["messages"]
    assert len(pred.exemplar_ids) >= 1 and sum(m["role"] == "assistant" for m in first) == len(pred.exemplar_ids)
    # the selected demos, the writer's system message and the question, then the failed reply and the error
    assert repair[: len(first)] == first and [m["role"] for m in repair[len(first):]] == ["assistant", "user"]



def test_an_awaited_repair_sends_the_same_prompts_as_a_called_one(data, embedder):
    import asyncio

    program = compiled(data, embedder)
    program.solve.retry = True
    query = data[1][0]
    replies = [{"program": "ans = table['nowhere', 'x']"}, {"program": "ans = 42\nscale = \"\""}]
    sync_lm, async_lm = DummyLM(list(replies)), DummyLM(list(replies))
    with dspy.context(lm=sync_lm):
        called = program(**program.example_inputs(query))
    with dspy.context(lm=async_lm):
        awaited = asyncio.run(program.acall(**program.example_inputs(query)))
    assert (awaited.answer, awaited.attempts) == (called.answer, called.attempts) == (42, 2)
    assert [h["messages"] for h in async_lm.history] == [h["messages"] for h in sync_lm.history]
    first, repair = async_lm.history[0]["messages"], async_lm.history[1]["messages"]
    assert repair[: len(first)] == first and [m["role"] for m in repair[len(first):]] == ["assistant", "user"]

def test_save_load_program_round_trip(tmp_path, data, embedder):
    program = compiled(data, embedder)
    path = save_program(program, tmp_path / "prog.json")
    assert path.with_suffix(".report.json").exists()
    loaded = load_program(path, embedder=embedder, token_counter=WordCounter())
    for ex in data[1]:
        assert program.select_for(ex)["ids"] == loaded.select_for(ex)["ids"]


def test_a_saved_program_holds_the_selection_settings_once(tmp_path, data, embedder):
    program = compiled(data, embedder)
    path = save_program(program, tmp_path / "prog.json")
    saved = json.loads(path.read_text())
    assert saved["spec"] == {"version": 3, "kind": "document", "pipeline": "pot", "top_n_paragraphs": 3,
                             "model": None, "demo_table": "gold_rows", "demo_table_rows": 4,
                             "demo_paragraphs": "gold"}  # TAT-QA's default demo cut, saved with the program
    assert "select" not in saved  # the writer alone selects (a repair continues its conversation)
    selection = saved["solve.write"]["selection"]
    assert selection["config"]["max_exemplars"] == 3
    assert selection["config"]["attributes"] == ["modality", "answer_type"]
    # a version-1 program repeated selector / M / attributes in its spec, and kept the selection in a module
    # of its own ("select"): the spec's settings are dropped on load, the selection goes to the writer
    saved["spec"] = {**saved["spec"], "version": 1, "selector": "kate", "max_exemplars": 8, "attributes": []}
    saved["select"] = saved["solve.write"].pop("selection")
    path.write_text(json.dumps(saved))
    loaded = load_program(path, embedder=embedder, token_counter=WordCounter())
    assert loaded.select.config == program.select.config
    assert "selector" not in loaded.spec.spec
    assert [loaded.select_for(ex)["ids"] for ex in data[1]] == [program.select_for(ex)["ids"] for ex in data[1]]


def test_a_program_saved_by_the_previous_layout_loads_and_selects_the_same():
    """tests/fixtures/program_main_ddea150.json was compiled and saved by commit ddea150 (spec version 2: the
    selection in a "select" module of its own), with the selections it made recorded beside it."""
    from knapsack_dspy.docqa.data import load_examples

    fixtures = Path(__file__).parents[1] / "fixtures"
    program = load_program(fixtures / "program_main_ddea150.json", embedder=HashingEmbedder(),
                           token_counter=WordCounter())
    expected = json.loads((fixtures / "program_main_ddea150.expected.json").read_text())
    for example in load_examples("tatqa", path=fixtures / "data_tatqa_small.json"):
        got = program.select_for(example)
        # the same exemplars; prompt sizes are measured at call time with the current instructions and rendering,
        # so capacity / prompt_tokens follow the code, not the file
        for key in ("ids", "within_budget"):
            assert got[key] == expected[example.id][key], (example.id, key)
    assert program.select.config.selector == "seer" and program.demo_predictor_name == "solve.write"


def test_pipelines_reject_unknown_keywords(embedder):
    with pytest.raises(ValueError, match="DocumentQA: unknown selection setting 'selectr'"):
        build_pipeline("tatqa", "pot", route=None, selectr="kate", embedder=embedder)
    with pytest.raises(ValueError, match="StatuteQA: unknown selection setting 'top_n'"):
        build_pipeline("sara", "cot", top_n=3, embedder=embedder, data_dir=DATA)
    statute = build_pipeline("sara", "cot", top_n_paragraphs=5, embedder=embedder, data_dir=DATA)
    assert statute.selection_settings.selector == "kate"
    assert statute.selection_settings.resolved_attribute_source == "none"
    document = build_pipeline("finqa", "finqa_pot", retrieval="references", selector="csp", embedder=embedder)
    assert document.spec.spec["pipeline"] == "finqa_pot" and document.selection_settings.selector == "csp"
    assert build_pipeline("finqa", "pot", embedder=embedder).spec.spec["pipeline"] == "python_pot"  # the default


def test_the_pipelines_offer_every_compile_hook_and_a_plain_program_none(embedder):
    document = build_pipeline("tatqa", "pot", route=None, embedder=embedder)
    routed = build_pipeline("tatqa", "pot", route="extract_compute", embedder=embedder)
    statute = build_pipeline("sara", "cot", embedder=embedder, data_dir=DATA)
    assert all(isinstance(p, CompileHooks) for p in (document, routed, statute))
    assert isinstance(routed.router, FitsOnTrainset)
    plain = dspy.ChainOfThought("question -> answer")
    assert not any(isinstance(plain, hook) for hook in (DemoFor, InputsFor, SelectionConfigFor, HasEmbedder))


def test_a_misspelled_input_is_an_error_not_a_silent_wrong_answer(data, embedder):
    program = compiled(data, embedder)
    with pytest.raises(TypeError, match=r"DocumentQA\(\) got unexpected keyword 'tables'; it takes question, table, "
                                        r"paragraphs, id, doc_id and gold values of answer_type, modality"):
        program(question="What was the revenue?", tables=[["a", "b"]])


def test_load_program_rejects_foreign_json(tmp_path):
    bad = tmp_path / "x.json"
    bad.write_text(json.dumps({"predict": {}}))
    with pytest.raises(ValueError, match="no pipeline spec"):
        load_program(bad)
    bad.write_text("{not json")
    with pytest.raises(ValueError, match="not a program JSON"):
        load_program(bad)


def _suite(**over):
    raw = {"name": "t", "dataset": "tatqa", "pipeline": "pot", "route": "", "selector": ["seer", "kate"],
           "budget": 2500,
           "max_exemplars": 3, "model": "openai/dummy", "attributes": ["modality", "answer_type"]}
    raw.update(over)
    return suite_from_dict(raw)


class _Factories:
    def __init__(self, embedder):
        self.embedder = embedder
        self.lms = []

    def counter(self, model):
        return WordCounter()

    def lm(self, spec):
        lm = DummyLM([{"program": "ans = 1"}] * 200)
        self.lms.append(lm)
        return lm


def _run(tmp_path, data, embedder, suite, monkeypatch, **kw):
    from knapsack_dspy.bench.programs import run_program
    pool, tune = data

    monkeypatch.setattr(run_program, "load_split", lambda spec, which, data_dir: pool if which == "pool" else tune)
    f = _Factories(embedder)
    metrics = run_suite(suite, tmp_path, embedder=embedder, token_counter_factory=f.counter, lm_factory=f.lm,
                        progress=False, log=lambda msg: None, **kw)
    return metrics, f


def test_bench_resumes_without_duplicates_and_reuses_programs(tmp_path, data, embedder, monkeypatch):
    metrics, f = _run(tmp_path, data, embedder, _suite(), monkeypatch, limit=3)
    rows = load_rows(tmp_path)
    assert len(rows) == 6
    assert sum(len(lm.history) for lm in f.lms) == 6
    programs = sorted((tmp_path / "programs").glob("*.json"))
    # the second invocation continues: only the 5 missing examples per run are answered
    metrics, f2 = _run(tmp_path, data, embedder, _suite(), monkeypatch, limit=8)
    rows = load_rows(tmp_path)
    assert len(rows) == 16
    assert len({(r["run"], r["example_id"]) for r in rows}) == 16
    assert sum(len(lm.history) for lm in f2.lms) == 10
    assert sorted((tmp_path / "programs").glob("*.json")) == programs  # compiled once, reloaded
    # a third run has nothing to do
    _, f3 = _run(tmp_path, data, embedder, _suite(), monkeypatch, limit=8)
    assert f3.lms == []
    report = (tmp_path / "report.md").read_text()
    assert "| seer |" in report and "| kate |" in report
    for row in rows:
        assert {"exemplar_ids", "prompt_tokens", "answer", "correct", "latency_s", "error", "em", "f1"} <= set(row)
        assert 0 <= row["lm_seconds"] <= row["latency_s"]
    assert set(metrics) == {r["run"] for r in rows}


def test_bench_selection_only_reports_selection_quality(tmp_path, data, embedder, monkeypatch):
    suite = _suite(selector=["seer", "seer_gold", "kate", "random"], selection_only=True)
    metrics, f = _run(tmp_path, data, embedder, suite, monkeypatch)
    assert f.lms == []  # no LM at all
    for m in metrics.values():
        assert m["n"] == 8
        assert 0 <= m["within_budget"] <= 100
        assert "attribute_match.modality" in m
    seer_gold = next(m for m in metrics.values() if m["spec"]["selector"] == "seer_gold")
    kate = next(m for m in metrics.values() if m["spec"]["selector"] == "kate")
    # oracle attributes + alpha=0.75 constraint: exemplars mostly share the query's modality
    assert seer_gold["attribute_match.modality"] >= kate["attribute_match.modality"]
    assert seer_gold["within_budget"] == 100.0


def test_one_failing_example_is_recorded_and_the_run_goes_on(tmp_path, data, embedder, monkeypatch):
    from knapsack_dspy.bench.programs import run_program
    pool, tune = data

    monkeypatch.setattr(run_program, "load_split", lambda spec, which, data_dir: pool if which == "pool" else tune)

    class FlakyLM(DummyLM):
        def __init__(self):
            super().__init__([{"program": "ans = 1"}] * 50)
            self.n = 0

        def forward(self, *a, **k):
            self.n += 1
            if self.n == 2:
                raise RuntimeError("server exploded")
            return super().forward(*a, **k)

    run_suite(_suite(selector="kate"), tmp_path, embedder=embedder, token_counter_factory=lambda m: WordCounter(),
              lm_factory=lambda spec: FlakyLM(), progress=False, log=lambda m: None, limit=4)
    rows = load_rows(tmp_path)
    assert len(rows) == 4
    failed = [r for r in rows if r["error"] and "exploded" in r["error"]]
    assert len(failed) == 1 and failed[0]["correct"] is False
    # the failed row still records what its prompt held, so budget / exemplar statistics cover it
    fine = next(r for r in rows if not r["error"])
    assert len(failed[0]["exemplar_ids"]) == len(fine["exemplar_ids"]) == 3
    assert failed[0]["prompt_tokens"] > 0 and failed[0]["within_budget"] is not None
    assert failed[0]["gold"] is not None and failed[0]["em"] == 0.0
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    (m,) = metrics.values()
    assert m["n_selected"] == 4 and m["mean_exemplars"] == 3.0


@pytest.mark.skipif(not (DATA / "sara" / "cases_train.json.gz").exists(), reason="SARA data not found")
@pytest.mark.parametrize("pipeline,retrieval", [("few_shot", "mentioned_only"), ("cot", "references"),
                                                ("zero_shot", "entire_section")])
def test_statute_pipeline_compiles_and_answers(tmp_path, embedder, pipeline, retrieval):
    from knapsack_dspy.docqa.data import load_examples

    cases = list(load_examples("sara", split="train", data_dir=DATA))
    pool, query = cases[:40], next(c for c in cases[40:] if c.answer_type == "entailment")
    student = build_pipeline("sara", pipeline, retrieval=retrieval, selector="kate", max_exemplars=2,
                             embedder=embedder, token_counter=WordCounter(), attributes=(), data_dir=DATA)
    program = KnapsackFewShot(selector="kate", max_exemplars=2, budget=4000, attributes=(),
                              token_counter=student.token_counter, progress=False).compile(student, trainset=pool)
    reply = {"answer": "Entailment"} if pipeline != "cot" else {"reasoning": "by the statute", "answer": "Entailment"}
    lm = DummyLM([reply] * 5)
    with dspy.context(lm=lm):
        pred = program(**program.example_inputs(query))
    assert pred.answer == "Entailment" and pred.error is None
    prompt = lm.history[0]["messages"]
    n_demos = sum(m["role"] == "assistant" for m in prompt)
    assert n_demos == (0 if pipeline == "zero_shot" else 2)
    if pipeline == "cot":  # entailment demos reason from the rule they cite, never DSPy's "Not supplied"
        replies = [m["content"] for m in prompt if m["role"] == "assistant"]
        assert all("The statement applies section" in reply and "Not supplied" not in reply for reply in replies)
        assert "The statement applies section" not in prompt[-1]["content"]  # the query's own label never shows
    statute = program.retrieve(question=query.question).statute_text
    assert statute and statute in prompt[-1]["content"]  # the retrieved statute text is in the prompt
    path = save_program(program, tmp_path / "sara.json")
    loaded = load_program(path, embedder=embedder, token_counter=WordCounter())
    assert loaded.spec.spec["retrieval"] == retrieval


class RecordingSentenceModel:
    """Stands in for the sentence-transformers model inside a real TextEmbedder: records each batch."""

    def __init__(self):
        self.batches: list[list[str]] = []
        self._vectors = HashingEmbedder()

    def encode(self, texts, **_kwargs):
        self.batches.append(list(texts))
        return self._vectors.encode(texts)


def test_embeddings_are_prefetched_in_one_batch_then_served_from_the_cache(tmp_path, data):
    from knapsack_dspy.embeddings import TextEmbedder

    pool, tune = data
    model = RecordingSentenceModel()
    embedder = TextEmbedder(model="recording", cache_dir=tmp_path / "embeddings")
    embedder._model = model
    student = build_pipeline("tatqa", "pot", route=None, selector="seer", max_exemplars=3, embedder=embedder,
                             token_counter=WordCounter(), attributes=("modality", "answer_type"))
    tele = KnapsackFewShot(max_exemplars=3, budget=2500, token_counter=student.token_counter,
                           attributes=("modality", "answer_type"), progress=False)
    program = tele.compile(student, trainset=pool)
    assert len(model.batches) == 1  # the whole pool (questions, paragraphs, long tables' rows) in one batch
    assert len(model.batches[0]) > len(pool)
    distinct = program.prefetch_embeddings(tune)
    assert len(model.batches) == 2 and 0 < len(model.batches[1]) <= distinct
    lm = DummyLM([{"program": "ans = 1\nscale = \"\""}] * len(tune))
    with dspy.context(lm=lm):
        for example in tune:
            program.select_for(example)
            program(**program.example_inputs(example))
    assert len(model.batches) == 2  # retrieval and selection were all served from the embedding cache


def test_bench_answers_the_named_questions_only(tmp_path, data, embedder, monkeypatch):
    from knapsack_dspy.bench.suites.suite import SuiteError

    _, tune = data
    wanted = [tune[5].id, tune[2].id]
    _run(tmp_path, data, embedder, _suite(selector="kate", example_ids=wanted), monkeypatch)
    rows = load_rows(tmp_path)
    assert [r["example_id"] for r in rows] == [tune[2].id, tune[5].id]  # in the split's order
    with pytest.raises(SuiteError, match=r"1 example_ids are not in tatqa dev_tune: no-such-question"):
        _run(tmp_path / "other", data, embedder, _suite(selector="kate", example_ids=[tune[0].id, "no-such-question"]),
             monkeypatch)


def test_an_oracle_lm_that_writes_the_gold_programs_scores_100(tmp_path, data, embedder, monkeypatch):
    """End to end through bench scoring: every answer type (span, multi-span, arithmetic, count) counts as
    right when the model writes the verified gold program — a scorer that rejects an answer form fails here."""
    from knapsack_dspy.docqa.data.gold_programs import synthesise_python_program

    pool, tune = data
    queries = list(tune)
    programs = {ex.question: synthesise_python_program(ex) for ex in queries}
    assert all(p.verified for p in programs.values())
    assert {ex.answer_type for ex in queries} >= {"span", "multi-span", "arithmetic"}

    class OracleFactories(_Factories):
        def lm(self, spec):
            lm = DummyLM({question: {"program": p.code} for question, p in programs.items()})
            self.lms.append(lm)
            return lm

    from knapsack_dspy.bench.programs import run_program

    monkeypatch.setattr(run_program, "load_split", lambda spec, which, data_dir: pool if which == "pool" else tune)
    f = OracleFactories(embedder)
    metrics = run_suite(_suite(selector="kate"), tmp_path, embedder=embedder, token_counter_factory=f.counter,
                        lm_factory=f.lm, progress=False, log=lambda msg: None)
    rows = load_rows(tmp_path)
    assert len(rows) == len(queries)
    wrong = [(r["example_id"], r["answer"], r["gold"], r.get("error")) for r in rows if not r["correct"]]
    assert not wrong
    assert all(r["em"] == 1.0 and r["f1"] == 1.0 for r in rows)
    (m,) = metrics.values()
    assert m["em"] == 100.0


def test_an_oracle_lm_scores_100_on_finqa_programs(tmp_path, embedder, monkeypatch):
    """FinQA program of thought (the DSL) through the bench: the gold program is execution- and program-correct."""
    from knapsack_dspy.bench.programs import run_program
    from knapsack_dspy.docqa.data import load_examples

    records = list(load_examples("finqa", path=Path(__file__).parents[1] / "fixtures" / "finqa_small.json"))

    monkeypatch.setattr(run_program, "load_split", lambda spec, which, data_dir: records)

    class OracleFactories(_Factories):
        def lm(self, spec):
            lm = DummyLM({ex.question: {"program": ex.program} for ex in records})
            self.lms.append(lm)
            return lm

    f = OracleFactories(embedder)
    run_suite(_suite(dataset="finqa", pipeline="finqa_pot", selector="kate", attributes=[]), tmp_path,
              embedder=embedder, token_counter_factory=f.counter, lm_factory=f.lm, progress=False, log=lambda msg: None)
    rows = load_rows(tmp_path)
    assert len(rows) == len(records) == 3
    assert all(r["correct"] and r["program_correct"] for r in rows), [
        (r["answer"], r["gold"], r["error"]) for r in rows]
