"""Answer-type routing: extraction for span questions, a program for the rest, each with its own exemplar selection."""

import itertools
import json
import os
from pathlib import Path

import dspy
import numpy as np
import pytest
from dspy.utils import DummyLM
from helpers import HashingEmbedder, WordCounter

from knapsack_dspy.docqa.pipelines.answer_type_router import AnswerTypeRouter
from knapsack_dspy.docqa.pipelines.pipeline import load_program, save_program
from knapsack_dspy.docqa.solvers.extract_answerer import ExtractAnswerer, read_spans, span_answer_text
from knapsack_dspy.docqa.tasks import build_pipeline
from knapsack_dspy.teleprompt.knapsack_few_shot import KnapsackFewShot

DATA = Path(os.environ.get("KDSPY_DATA_DIR", Path(__file__).resolve().parents[3] / "shared" / "data"))
pytestmark = pytest.mark.skipif(not (DATA / "tatqa" / "dev_pool.json.gz").exists(), reason="TAT-QA data not found")
TABLE = [["", "2019", "2018"], ["", "$'000", "$'000"], ["Revenue", "4,411", "4,044"], ["Segment", "Retail", "Retail"]]


@pytest.mark.parametrize(("reply", "value"), [
    ('["2019", "2018"]', ["2019", "2018"]), ('["2019"]', "2019"), ("Answer: $9.6 million", "$9.6 million"),
    ('"Retail"', "Retail"), ("[2019, 2018]", ["2019", "2018"]), ("", None), (None, None),
    # numbers with comma thousands separators, items separated by ", " (JSON would read four numbers)
    ("[423,209, 428,501]", ["423,209", "428,501"]), ("[$1,200, $3,400]", ["$1,200", "$3,400"]),
    ("[1,234]", ["1", "234"]), ("[1,2,3]", ["1", "2", "3"]),  # no ", ": JSON's reading stands
    ("['Debtors, net', 'Cash']", ["Debtors, net", "Cash"]),  # a Python-style list keeps its commas
])
def test_replies_are_read_as_spans(reply, value):
    assert read_spans(reply) == value


def test_a_bracketed_number_is_one_span_when_one_is_expected():
    assert read_spans("[4,411]", expect_list=False) == "4,411"
    assert read_spans("[$1,234,567]", expect_list=False) == "$1,234,567"
    assert read_spans("[4,411]", expect_list=True) == ["4", "411"] == read_spans("[4,411]")
    assert read_spans('["Retail", "Other"]', expect_list=False) == ["Retail", "Other"]


def test_the_scale_reads_units_from_the_whole_document_not_only_the_prompts_paragraphs():
    table = [["", "2019", "2018"], ["Deferred tax assets", "$19,795", "$22,201"]]
    stated = "The following table (in thousands, except share data) shows our deferred taxes."
    dspy.configure(lm=DummyLM([{"answer": "22,201"}] * 2), adapter=dspy.ChatAdapter())
    extractor = ExtractAnswerer()
    shown = ["Deferred taxes are recorded for temporary differences."]
    question = "What were the deferred tax assets in 2018?"
    assert extractor(question=question, table=table, paragraphs=shown, demos=[]).scale == ""
    pred = extractor(question=question, table=table, paragraphs=shown, demos=[], unit_paragraphs=[stated, *shown])
    assert pred.answer == "22,201" and pred.scale == "thousand"


def test_the_pipeline_gives_its_solvers_the_whole_documents_paragraphs():
    program = build_pipeline("tatqa", "pot", route="extract_compute")
    paragraphs = ["one (in thousands)", "two", "three", "four"]
    for solver, route in ((program.extract, {"route": "extract", "routed_answer_type": "span"}),
                          (program.solve, {"route": "compute", "routed_answer_type": "arithmetic"})):
        extra = program._solver_extras(solver, route, paragraphs)
        assert extra["unit_paragraphs"] == paragraphs
    assert "unit_paragraphs" not in build_pipeline("tatqa", "cot")._solver_extras(
        build_pipeline("tatqa", "cot").solve, {}, paragraphs)


def test_span_answers_are_shown_as_written():
    assert span_answer_text(["$1,200"]) == "$1,200"
    assert span_answer_text(["a", "b"]) == '["a", "b"]'


def test_the_extractor_copies_and_the_document_decides_the_scale():
    dspy.configure(lm=DummyLM([{"answer": "4,411"}, {"answer": '["Retail", "Retail"]'}]), adapter=dspy.ChatAdapter())
    extractor = ExtractAnswerer()
    pred = extractor(question="What was the revenue in 2019?", table=TABLE, paragraphs=["Revenue grew."], demos=[])
    assert pred.answer == "4,411" and pred.scale == "thousand" and pred.error is None
    pred = extractor(question="Which segments?", table=TABLE, demos=[])
    assert pred.answer == ["Retail", "Retail"] and pred.scale == ""


def test_the_router_leans_to_computation(data):
    pool, _ = data
    router = AnswerTypeRouter().fit_on_trainset(pool, HashingEmbedder())
    embedder = HashingEmbedder()
    for question in ("What was the change in revenue from 2018 to 2019?", "What is the average cost?",
                     "How many years are shown?"):
        route = router.route(question, embedder.encode([question])[0])
        assert route.route == "compute" or route.p_extract >= router.cue_override
    state = json.loads(json.dumps(router.dump_state()))
    again = AnswerTypeRouter().load_state(state)
    vector = embedder.encode(["What does the company sell?"])[0]
    assert again.route("What does the company sell?", vector) == router.route("What does the company sell?", vector)
    with pytest.raises(RuntimeError, match="not fitted"):
        AnswerTypeRouter().route("q", vector)


@pytest.fixture(scope="module")
def data():
    from knapsack_dspy.docqa.data import load_examples

    pool = list(load_examples("tatqa", split="dev_pool", data_dir=DATA))[:120]
    tune = list(load_examples("tatqa", split="dev_tune", data_dir=DATA))[:12]
    return pool, tune


@pytest.fixture(scope="module")
def routed(data):
    pool, _ = data
    student = build_pipeline("tatqa", "pot", route="extract_compute", max_exemplars=3, embedder=HashingEmbedder(),
                             token_counter=WordCounter(), attributes=("modality", "answer_type"))
    tele = KnapsackFewShot(budget=2500, token_counter=student.token_counter, progress=False)
    return tele.compile(student, trainset=pool)


def test_each_route_has_its_own_selection_and_pool(routed, data):
    pool, _ = data
    extract = routed.selection_of("extract.answer")
    compute = routed.selection_of("solve.write")
    spans = {ex.id for ex in pool if ex.answer_type in ("span", "multi-span")}
    assert set(extract.pool_ids) == spans
    assert set(compute.pool_ids) == {ex.id for ex in pool}  # the program writer can answer any question
    assert isinstance(extract.config.build_selector(), type(compute.config.build_selector()))  # one config for both
    assert routed.router.is_fitted


def test_questions_are_answered_by_their_route(routed, data):
    _, tune = data
    lm = DummyLM([{"answer": "Retail", "program": "ans = 1"}] * 40)
    with dspy.context(lm=lm, adapter=dspy.ChatAdapter()):
        for example in tune:
            pred = routed(**routed.example_inputs(example))
            assert pred.route in ("extract", "compute") and 0.0 <= pred.p_extract <= 1.0
            selection = routed.select_for(example)
            assert selection["route"] == pred.route and selection["ids"] == pred.exemplar_ids
            if pred.route == "extract":
                extract_pool = set(routed.selection_of("extract.answer").pool_ids)
                assert pred.answer == "Retail" and set(pred.exemplar_ids) <= extract_pool
            else:
                assert pred.answer == 1
    routes = {routed(**routed.example_inputs(ex)).route for ex in tune}
    assert routes == {"extract", "compute"}  # twelve TAT-QA questions of both kinds


def test_a_routed_program_saves_and_loads(routed, data, tmp_path):
    _, tune = data
    path = save_program(routed, tmp_path / "routed.json")
    saved = json.loads(path.read_text())
    assert saved["spec"]["route"] == "extract_compute" and saved["router"]["classifier"] is not None
    loaded = load_program(path, embedder=HashingEmbedder(), token_counter=WordCounter())
    for example in tune:
        before, after = routed.select_for(example), loaded.select_for(example)
        assert (after["route"], after["ids"]) == (before["route"], before["ids"])


def test_routing_needs_a_program_pipeline():
    with pytest.raises(ValueError, match="route"):
        build_pipeline("tatqa", "cot", route="extract_compute", embedder=HashingEmbedder())
    with pytest.raises(ValueError, match="route must be one of"):
        build_pipeline("tatqa", "pot", route="sideways", embedder=HashingEmbedder())


def test_route_classifier_probabilities_are_a_distribution(routed):
    dimension = routed.router.classifier.coef_.shape[1]
    probabilities = routed.router.classifier.predict_proba(np.ones((1, dimension)) / np.sqrt(dimension))
    assert probabilities.shape[1] >= 2 and abs(probabilities.sum() - 1) < 1e-9


def test_the_bench_groups_questions_by_route_keeping_the_split_order(routed, data):
    from knapsack_dspy.bench.execution.question_order import cache_friendly_order

    _, tune = data
    ordered = cache_friendly_order(routed, tune, key=lambda example: ())  # no shared demos: the split's order
    routes = [routed.prompt_group(ex) for ex in ordered]
    assert sorted(ex.id for ex in ordered) == sorted(ex.id for ex in tune)
    assert sum(a != b for a, b in itertools.pairwise(routes)) == len(set(routes)) - 1  # one block per route
    for route in set(routes):
        block = [ex.id for ex in ordered if routed.prompt_group(ex) == route]
        assert block == [ex.id for ex in tune if routed.prompt_group(ex) == route]
    chained = cache_friendly_order(routed, tune)  # by the selections: the same blocks
    assert [routed.prompt_group(ex) for ex in chained] == routes
    assert cache_friendly_order(object(), tune) == tune
