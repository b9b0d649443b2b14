"""ChainOfThoughtAnswerer with DummyLM: the three prompting modes, answer parsing, demos per call."""

from pathlib import Path

import dspy
import pytest
from dspy.utils import DummyLM

from knapsack_dspy.docqa.data.loader import load_examples
from knapsack_dspy.docqa.solvers import ChainOfThoughtAnswerer

FIXTURE = Path(__file__).parents[1] / "fixtures" / "solvers_tatqa_contexts.json"
TABLE = [["", "2019", "2018"], ["Revenue", "$1,200.5", "$1,000.0"]]


@pytest.fixture(scope="module")
def pool():
    return {ex.id: ex for ex in load_examples("tatqa", path=FIXTURE)}


def configure(answers):
    lm = DummyLM(answers)
    dspy.configure(lm=lm, adapter=dspy.ChatAdapter())
    return lm


def roles(lm, call=-1):
    return [m["role"] for m in lm.history[call]["messages"]]


def test_modes_choose_the_predictor():
    assert isinstance(ChainOfThoughtAnswerer("zero_shot").answer, dspy.Predict)
    assert isinstance(ChainOfThoughtAnswerer("few_shot").answer, dspy.Predict)
    assert isinstance(ChainOfThoughtAnswerer("cot").answer, dspy.ChainOfThought)
    assert list(ChainOfThoughtAnswerer("cot").signature.output_fields) == ["reasoning", "answer", "scale"]
    assert list(ChainOfThoughtAnswerer("few_shot").signature.output_fields) == ["answer", "scale"]


def test_cot_reasons_then_answers_with_demos(pool):
    solver = ChainOfThoughtAnswerer("cot")
    demo = solver.as_demo(pool["s-q2"])
    assert demo.answer == "20.05" and demo.scale == "percent"
    assert demo.reasoning == "The answer is calculated as (1,200.5-1,000.0)/1,000.0 = 20.05%."
    lm = configure([{"reasoning": "1,200.5 - 1,000.0", "answer": "200.5", "scale": "million"}])
    pred = solver(question="What is the change in revenue?", table=TABLE, paragraphs=["x"], demos=[demo])
    assert pred.answer == pytest.approx(200.5) and pred.scale == "million" and pred.reasoning == "1,200.5 - 1,000.0"
    assert roles(lm) == ["system", "user", "assistant", "user"]
    assert "20.05%" in lm.history[-1]["messages"][2]["content"]


def test_few_shot_sends_demos_without_reasoning(pool):
    solver = ChainOfThoughtAnswerer("few_shot")
    demo = solver.as_demo(pool["s-q7"])
    assert "reasoning" not in demo and demo.answer == '["Cloud", "Devices"]' and demo.scale == "none"
    lm = configure([{"answer": '["Cloud", "Devices"]', "scale": "none"}])
    pred = solver(question="Segments?", table=TABLE, demos=[demo])
    assert pred.answer == ["Cloud", "Devices"] and pred.scale == ""
    assert roles(lm) == ["system", "user", "assistant", "user"]
    assert solver.predictor.demos == []


def test_zero_shot_sends_no_demos(pool):
    solver = ChainOfThoughtAnswerer("zero_shot")
    lm = configure([{"answer": "2019", "scale": ""}])
    solver(question="Which year?", table=TABLE, demos=[solver.as_demo(ex) for ex in pool.values()])
    assert roles(lm) == ["system", "user"]


def test_the_scale_comes_from_the_answer_when_the_field_gives_none():
    configure([{"reasoning": "r", "answer": "20.05%", "scale": "none"}])
    pred = ChainOfThoughtAnswerer()(question="q", table=TABLE)
    assert pred.answer == pytest.approx(20.05) and pred.scale == "percent" and pred.raw_answer == "20.05%"


def test_unreadable_replies_are_recorded():
    configure([{"nothing": "x"}] * 2)
    pred = ChainOfThoughtAnswerer()(question="q", table=TABLE)
    assert pred.answer is None and "format" in pred.error


def test_demos_render_inputs_as_queries_do(pool):
    solver = ChainOfThoughtAnswerer("cot")
    for example in pool.values():
        demo = solver.as_demo(example)
        inputs = solver.prompt_inputs(example)
        assert {k: demo[k] for k in inputs} == inputs
        assert set(demo.keys()) <= set(solver.signature.fields)


def test_count_and_span_reasoning(pool):
    solver = ChainOfThoughtAnswerer("cot")
    assert solver.as_demo(pool["s-q8"]).reasoning == "Counting the items: 2019; 2018. That makes 2."
    assert solver.as_demo(pool["s-q6"]).reasoning == "The answer is stated in the text: strong demand."


def test_a_pre_rendered_text_is_used_as_is():
    solver = ChainOfThoughtAnswerer()
    inputs = solver.prompt_inputs({"question": "q", "table": "| a | b |", "text": "retrieved paragraph"})
    assert inputs == {"table": "| a | b |", "text": "retrieved paragraph", "question": "q"}


def test_solvers_by_pipeline_name():
    from knapsack_dspy.docqa.solvers import (
        ProgramOfThoughtAnswerer,
        StatuteAnswerer,
        make_document_solver,
        make_statute_solver,
    )

    pot = make_document_solver("pot")
    assert isinstance(pot, ProgramOfThoughtAnswerer) and pot.language == "python" and pot.mode == "few_shot"
    assert make_document_solver("finqa_pot").language == "finqa"
    assert make_document_solver("cot").mode == "cot" and make_document_solver("zero_shot").mode == "zero_shot"
    assert make_document_solver("pot", demo_paragraphs="gold").demo_paragraphs == "gold"
    statute = make_statute_solver("few_shot")
    assert isinstance(statute, StatuteAnswerer) and statute.mode == "few_shot"
    with pytest.raises(ValueError, match="unknown document solver"):
        make_document_solver("tot")
    with pytest.raises(ValueError, match="unknown statute solver"):
        make_statute_solver("pot")
