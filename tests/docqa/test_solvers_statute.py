"""StatuteAnswerer (SARA) with DummyLM: label / dollar normalisation, kinds, demos."""

import dspy
import pytest
from dspy.utils import DummyLM

from knapsack_dspy.docqa.solvers import StatuteAnswerer
from knapsack_dspy.docqa.solvers.statute_answerer import infer_kind

ENTAILMENT_CASE = dspy.Example(
    id="s151_a_pos", dataset="sara",
    question="Alice's total exemption for 2015 under section 151(a) is equal to $4000.",
    paragraphs=["Alice's income in 2015 is $100000. She gets one exemption of $2000 for the year 2015."],
    answer="Entailment", answer_value=None, answer_type="entailment", table=[], derivation="", program="")
NUMERICAL_CASE = dspy.Example(
    id="tax_case_1", dataset="sara", question="How much tax does Alice have to pay in 2019?",
    paragraphs=["Alice was paid $1200 in 2019."], answer="$0", answer_value=0.0, answer_type="numerical",
    table=[], derivation="", program="")


def configure(answers):
    lm = DummyLM(answers)
    dspy.configure(lm=lm, adapter=dspy.ChatAdapter())
    return lm


def test_kind_is_inferred_from_the_question():
    assert infer_kind(NUMERICAL_CASE.question) == "numerical"
    assert infer_kind(ENTAILMENT_CASE.question) == "entailment"


@pytest.mark.parametrize("reply, expected", [("Entailment", "Entailment"), ("not entailed", "Contradiction"),
                                             ("**Contradiction**", "Contradiction")])
def test_labels_are_normalised(reply, expected):
    configure([{"reasoning": "r", "answer": reply}])
    pred = StatuteAnswerer()(question=ENTAILMENT_CASE.question, statute="§151 ...", facts="facts")
    assert pred.answer == expected and pred.kind == "entailment" and pred.error is None


def test_amounts_are_whole_dollars():
    configure([{"reasoning": "r", "answer": "$68,844.60 (no, not less)"}])
    pred = StatuteAnswerer()(question=NUMERICAL_CASE.question, statute=["§1 ...", "§63 ..."], facts="facts")
    assert pred.answer == 68845 and pred.kind == "numerical"


def test_an_explicit_kind_wins_and_a_missing_answer_is_recorded():
    configure([{"reasoning": "r", "answer": "I am not sure"}])
    pred = StatuteAnswerer()(question="Is it so?", statute="s", facts="f", kind="entailment")
    assert pred.answer is None and "label" in pred.error
    with pytest.raises(ValueError, match="kind"):
        StatuteAnswerer()(question="q", kind="amount")


def test_prompt_carries_statutes_facts_and_question():
    lm = configure([{"reasoning": "r", "answer": "$0"}])
    StatuteAnswerer()(question=NUMERICAL_CASE.question, statute=["§1 first", "§63 second"],
                      paragraphs=NUMERICAL_CASE.paragraphs)
    prompt = lm.history[-1]["messages"][-1]["content"]
    assert "§1 first\n\n§63 second" in prompt and "Alice was paid $1200 in 2019." in prompt


def test_demos_leave_the_statute_out_by_default():
    solver = StatuteAnswerer(mode="few_shot")
    demo = solver.as_demo(ENTAILMENT_CASE)
    assert dict(demo) == {"facts": ENTAILMENT_CASE.paragraphs[0], "question": ENTAILMENT_CASE.question,
                          "answer": "Entailment"}
    assert solver.as_demo(NUMERICAL_CASE).answer == "$0"
    with_statute = StatuteAnswerer(demo_statute=True).as_demo(NUMERICAL_CASE.copy(statute="§1 text"))
    assert with_statute.statute == "§1 text"
    lm = configure([{"answer": "Contradiction"}])
    solver(question="Bob's exemption is $0.", statute="s", facts="f", demos=[demo])
    assert [m["role"] for m in lm.history[-1]["messages"]] == ["system", "user", "assistant", "user"]
    assert solver.predictor.demos == []


def test_cot_demos_of_entailment_cases_reason_from_the_cited_rule():
    rule = '151(a) Allowance of deductions: "The exemptions shall be allowed as deductions."'
    solver = StatuteAnswerer(mode="cot")
    entailed = solver.as_demo(ENTAILMENT_CASE.copy(cited_rules=[rule]))
    assert entailed.reasoning.startswith(f"The statement applies section {rule}\n")
    assert entailed.reasoning.endswith("so the statement is entailed.")
    contradicted = solver.as_demo(ENTAILMENT_CASE.copy(cited_rules=[rule], answer="Contradiction"))
    assert contradicted.reasoning.endswith("so the statement is contradicted.")
    assert contradicted.answer == "Contradiction"
    two = solver.as_demo(ENTAILMENT_CASE.copy(cited_rules=[rule, "151(b) Taxpayer and spouse"], answer="Contradiction"))
    assert "section 151(b) Taxpayer and spouse\n" in two.reasoning
    assert two.reasoning.endswith("the rules do not give what the statement says, so the statement is contradicted.")
    assert "reasoning" not in solver.as_demo(ENTAILMENT_CASE)  # no cited rule: nothing to reason from
    assert "reasoning" not in solver.as_demo(NUMERICAL_CASE.copy(cited_rules=[rule]))
    assert "reasoning" not in StatuteAnswerer(mode="few_shot").as_demo(ENTAILMENT_CASE.copy(cited_rules=[rule]))
    lm = configure([{"reasoning": "r", "answer": "Entailment"}])
    solver(question="Bob's exemption is $0.", statute="s", facts="f", demos=[entailed])
    demo_reply = lm.history[-1]["messages"][2]["content"]
    assert "section 151(a)" in demo_reply and "Not supplied" not in demo_reply


def test_zero_shot_sends_no_demos():
    solver = StatuteAnswerer(mode="zero_shot")
    lm = configure([{"answer": "Entailment"}])
    solver(question="x.", statute="s", facts="f", demos=[solver.as_demo(ENTAILMENT_CASE)])
    assert [m["role"] for m in lm.history[-1]["messages"]] == ["system", "user"]
