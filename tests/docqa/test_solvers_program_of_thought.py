"""ProgramOfThoughtAnswerer with dspy.utils.DummyLM: execution, the one retry, recorded failures, demos per call."""

import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import dspy
import pytest
from dspy.utils import DummyLM
from helpers import WordCounter

from knapsack_dspy.docqa.data.loader import load_examples
from knapsack_dspy.docqa.solvers import ProgramOfThoughtAnswerer
from knapsack_dspy.modules.prompt_cost import PromptCostModel

FIXTURE = Path(__file__).parents[1] / "fixtures" / "solvers_tatqa_contexts.json"
TABLE = [["", "2019", "2018"], ["Revenue", "$1,200.5", "$1,000.0"], ["Cost of sales", "(450)", "(400)"]]
GOOD = 'table_query_0 = table["Revenue", "2019"]\ntable_query_1 = table["Revenue", "2018"]\n' \
       'ans = table_query_0 - table_query_1\nscale = "million"'
BAD = 'ans = table["Revenue", "2020"]'


@pytest.fixture(scope="module")
def pool():
    return load_examples("tatqa", path=FIXTURE)


def configure(answers):
    lm = DummyLM(answers)
    dspy.configure(lm=lm, adapter=dspy.ChatAdapter())
    return lm


def user_messages(lm, call):
    return [m["content"] for m in lm.history[call]["messages"] if m["role"] == "user"]


def test_a_correct_program_is_executed():
    lm = configure([{"program": GOOD}])
    pred = ProgramOfThoughtAnswerer(scale_from="program")(question="What is the change in revenue?", table=TABLE,
                                                          paragraphs=["Revenue rose."])
    assert pred.answer == pytest.approx(200.5) and pred.scale == "million"
    assert pred.error is None and pred.attempts == 1 and pred.errors == []
    assert pred.program == GOOD
    prompt = user_messages(lm, 0)[-1]
    assert "| Revenue | $1,200.5 | $1,000.0 |" in prompt and "Revenue rose." in prompt
    assert len(lm.history) == 1


def test_the_document_decides_the_scale_not_the_program():
    configure([{"program": GOOD}] * 3)
    solver = ProgramOfThoughtAnswerer()
    # the table states no unit and the text says the amounts are in thousands: the program's "million" is overruled
    pred = solver(question="What is the change in revenue?", table=TABLE,
                  paragraphs=["Revenue (in thousands) rose."])
    assert pred.scale == "thousand" and pred.model_scale == "million" and "unit" in pred.scale_reason
    # nothing states a unit: no scale (a scale word the model copied from its demos is not evidence)
    assert solver(question="What is the change in revenue?", table=TABLE, paragraphs=["Revenue rose."]).scale == ""
    # the question asks for a percentage
    assert solver(question="What is the percentage change in revenue?", table=TABLE).scale == "percent"


def test_repair_is_off_by_default():
    lm = configure([{"program": BAD}, {"program": GOOD}])
    pred = ProgramOfThoughtAnswerer()(question="q", table=TABLE)
    assert pred.answer is None and pred.attempts == 1 and len(lm.history) == 1


def test_a_fenced_program_is_unwrapped():
    configure([{"program": "```python\n" + GOOD + "\n```"}])
    pred = ProgramOfThoughtAnswerer()(question="q", table=TABLE)
    assert pred.answer == pytest.approx(200.5) and pred.program == GOOD


def test_a_failing_program_is_retried_with_its_error_shown():
    lm = configure([{"program": BAD}, {"program": GOOD}])
    pred = ProgramOfThoughtAnswerer(retry=True)(question="What is the change in revenue?", table=TABLE)
    assert pred.answer == pytest.approx(200.5) and pred.attempts == 2 and pred.error is None
    assert len(pred.errors) == 1 and "no table column '2020'" in pred.errors[0]
    first, repair = lm.history[0]["messages"], lm.history[1]["messages"]
    # the repair continues the writer's conversation: its prompt, the failed reply, then the error
    assert repair[: len(first)] == first and len(repair) == len(first) + 2
    assert repair[-2]["role"] == "assistant" and "[[ ## program ## ]]\n" + BAD in repair[-2]["content"]
    assert repair[-1]["role"] == "user" and pred.errors[0] in repair[-1]["content"]
    assert "`[[ ## program ## ]]`" in repair[-1]["content"]  # the output format, reminded


def test_two_failures_are_recorded_not_raised():
    lm = configure([{"program": BAD}, {"program": "ans = 1 / 0"}])
    pred = ProgramOfThoughtAnswerer(retry=True)(question="q", table=TABLE)
    assert pred.answer is None and pred.attempts == 2
    assert "ZeroDivisionError" in pred.error and pred.errors[-1] == pred.error
    assert pred.program == "ans = 1 / 0"
    assert len(lm.history) == 2


def test_no_retry_when_disabled():
    lm = configure([{"program": BAD}])
    pred = ProgramOfThoughtAnswerer(retry=False)(question="q", table=TABLE)
    assert pred.answer is None and pred.attempts == 1 and len(lm.history) == 1


def test_an_unreadable_reply_is_a_recorded_failure():
    configure([{"wrong_field": "x"}] * 4)  # neither the chat format nor the JSON fallback can read it
    pred = ProgramOfThoughtAnswerer(retry=True)(question="q", table=TABLE)
    assert pred.answer is None and pred.attempts == 2
    assert "output format" in pred.error


def test_an_empty_program_is_a_failure_the_retry_sees():
    lm = configure([{"program": "  "}, {"program": GOOD}])
    pred = ProgramOfThoughtAnswerer(retry=True)(question="q", table=TABLE)
    assert pred.answer == pytest.approx(200.5)
    assert "no program" in pred.errors[0]
    assert "[[ ## program ## ]]\n(empty)" in lm.history[1]["messages"][-2]["content"]


class BrokenTransportLM(DummyLM):
    def forward(self, prompt=None, messages=None, **kwargs):
        raise ConnectionError("LM server unreachable")


def test_lm_transport_errors_propagate():
    dspy.configure(lm=BrokenTransportLM([]))
    with pytest.raises(ConnectionError, match="unreachable"):
        ProgramOfThoughtAnswerer()(question="q", table=TABLE)
    assert dspy.settings.get("knapsack_selection_logs") is None  # the answer's selection log was left


def test_finqa_dsl_programs():
    lm = configure([{"program": "subtract(1200.5, 1000.0), divid(#0, 1000.0)"},
                    {"program": "subtract(1200.5, 1000.0), divide(#0, 1000.0)"}])
    pred = ProgramOfThoughtAnswerer(language="finqa", retry=True)(question="q", table=TABLE)
    assert pred.answer == pytest.approx(0.2005) and pred.scale == "" and pred.attempts == 2
    assert "divid" in pred.errors[0]
    assert lm.history[1]["messages"][0] == lm.history[0]["messages"][0]  # the writer's FinQA instructions


def test_nested_finqa_calls_run_as_flat_steps_without_a_repair_call():
    lm = configure([{"program": "divide(subtract(1200.5, 1000.0), 1000.0)"},
                    {"program": "unused"}])
    pred = ProgramOfThoughtAnswerer(language="finqa", retry=True)(question="q", table=TABLE)
    assert pred.program == "subtract(1200.5, 1000.0), divide(#0, 1000.0)"
    assert pred.answer == pytest.approx(0.2005) and pred.attempts == 1 and len(lm.history) == 1


def test_demos_are_passed_per_call_and_never_stored(pool):
    solver = ProgramOfThoughtAnswerer()
    demo_a, demo_b = solver.as_demo(pool[0]), solver.as_demo(pool[5])
    lm = configure([{"program": GOOD}, {"program": GOOD}])
    solver(question="first?", table=TABLE, demos=[demo_a])
    solver(question="second?", table=TABLE, demos=[demo_b])
    assert solver.predictor.demos == []
    first, second = user_messages(lm, 0), user_messages(lm, 1)
    assert len(first) == 2 and len(second) == 2  # one demo + the query each
    assert pool[0].question in first[0] and pool[5].question not in "".join(first)
    assert pool[5].question in second[0] and pool[0].question not in "".join(second)
    assert demo_a.program in lm.history[0]["messages"][2]["content"]  # the demo's gold program is the reply


def test_zero_shot_sends_no_demos(pool):
    solver = ProgramOfThoughtAnswerer(mode="zero_shot")
    lm = configure([{"program": GOOD}])
    solver(question="q", table=TABLE, demos=[solver.as_demo(ex) for ex in pool[:3]])
    roles = [m["role"] for m in lm.history[0]["messages"]]
    assert roles == ["system", "user"]


def test_zero_shot_also_ignores_demos_stored_by_an_optimizer(pool):
    solver = ProgramOfThoughtAnswerer(mode="zero_shot")
    solver.predictor.demos = [solver.as_demo(pool[0])]
    lm = configure([{"program": GOOD}])
    solver(question="q", table=TABLE)
    assert [m["role"] for m in lm.history[0]["messages"]] == ["system", "user"]


def test_few_shot_without_demos_uses_the_predictors_own(pool):
    solver = ProgramOfThoughtAnswerer(mode="few_shot")
    solver.predictor.demos = [solver.as_demo(pool[0])]
    lm = configure([{"program": GOOD}])
    solver(question="q", table=TABLE)
    assert len(user_messages(lm, 0)) == 2


def test_cot_mode_reasons_first_and_demos_carry_reasoning(pool):
    solver = ProgramOfThoughtAnswerer(mode="cot")
    assert list(solver.signature.output_fields) == ["reasoning", "program"]
    demo = solver.as_demo(pool[1])
    assert demo.reasoning == "The answer is calculated as (1,200.5-1,000.0)/1,000.0 = 20.05%."
    lm = configure([{"reasoning": "Revenue went from 1,000.0 to 1,200.5.", "program": GOOD}])
    pred = solver(question="q", table=TABLE, demos=[demo])
    assert pred.reasoning.startswith("Revenue went") and pred.answer == pytest.approx(200.5)
    assert "20.05%" in lm.history[0]["messages"][2]["content"]


def test_retry_demos_can_be_left_out(pool):
    solver = ProgramOfThoughtAnswerer(retry=True, retry_with_demos=False)
    lm = configure([{"program": BAD}, {"program": GOOD}])
    solver(question="q", table=TABLE, demos=[solver.as_demo(pool[0])])
    first, repair = lm.history[0]["messages"], lm.history[1]["messages"]
    assert len(user_messages(lm, 0)) == 2  # the demo and the question
    assert [m["role"] for m in repair] == ["system", "user", "assistant", "user"]  # no demo: question, reply, error
    assert repair[0] == first[0] and repair[1] == first[-1]


def test_as_demo_matches_the_signature_and_the_query_rendering(pool):
    solver = ProgramOfThoughtAnswerer()
    for example in pool:
        demo = solver.as_demo(example)
        assert set(demo.keys()) == set(solver.signature.fields)
        inputs = solver.prompt_inputs(example)
        assert {k: demo[k] for k in inputs} == inputs  # a demo shows its document exactly as a query would
        assert solver.as_demo(example) == demo  # deterministic
        assert execute_ok(demo.program, example)


def execute_ok(code, example):
    from knapsack_dspy.docqa.sandbox import execute_program

    return execute_program(code, [list(r) for r in example.table]).ok


def test_gold_paragraph_demos_show_only_the_evidence(pool):
    solver = ProgramOfThoughtAnswerer(demo_paragraphs="gold")
    demo = solver.as_demo(pool[2])  # evidence: paragraph 1 only
    assert demo.text == pool[2].paragraphs[0]
    assert solver.prompt_inputs(pool[2])["text"] != demo.text  # queries still show all paragraphs


def test_finqa_language_demos_need_a_program(pool):
    solver = ProgramOfThoughtAnswerer(language="finqa")
    assert solver.as_demo(pool[0]).program == "subtract(1200.5, 1000)"
    with pytest.raises(ValueError, match=r"s-q6.*language='python'"):
        solver.as_demo(pool[5])


def test_demo_costs_in_the_real_prompt_format(pool):
    solver = ProgramOfThoughtAnswerer()
    model = PromptCostModel(solver.signature, WordCounter(), adapter=dspy.ChatAdapter())
    demos = [solver.as_demo(ex) for ex in pool[:4]]
    costs = [model.demo_cost(d) for d in demos]
    assert all(c > 0 for c in costs) and len(set(costs)) > 1
    inputs = solver.prompt_inputs(pool[5])
    assert model.prompt_tokens(inputs, demos) == model.base_tokens(inputs) + sum(costs)


def test_bad_arguments_are_rejected_clearly():
    with pytest.raises(ValueError, match="language"):
        ProgramOfThoughtAnswerer(language="sql")
    with pytest.raises(ValueError, match="mode"):
        ProgramOfThoughtAnswerer(mode="many_shot")
    with pytest.raises(ValueError, match="demo_paragraphs"):
        ProgramOfThoughtAnswerer(demo_paragraphs="some")
    with pytest.raises(ValueError, match="question"):
        ProgramOfThoughtAnswerer().prompt_inputs({"question": "", "table": TABLE})


def test_threads_each_send_their_own_demos(pool):
    solver = ProgramOfThoughtAnswerer()
    demos = [solver.as_demo(ex) for ex in pool]
    questions = [f"Query number {i}?" for i in range(len(demos))]
    lm = DummyLM({q: {"program": GOOD} for q in questions})
    seen = {}
    lock = threading.Lock()

    def ask(i):
        with dspy.context(lm=lm, adapter=dspy.ChatAdapter()):
            solver(question=questions[i], table=TABLE, demos=[demos[i]])

    with ThreadPoolExecutor(max_workers=4) as executor:
        list(executor.map(ask, range(len(demos))))
    for entry in lm.history:
        users = [m["content"] for m in entry["messages"] if m["role"] == "user"]
        query = next(q for q in questions if q in users[-1])
        with lock:
            seen[query] = users[:-1]
    assert len(seen) == len(questions)
    for i, q in enumerate(questions):
        assert len(seen[q]) == 1 and demos[i].question in seen[q][0]


@pytest.mark.parametrize("reply, language, program", [
    ("```python\nans = 1\n```\nThis computes it.", "python", "ans = 1"),
    ("Program: ans = 2", "python", "ans = 2"),
    ("ans = 3\nscale = \"\"", "python", "ans = 3\nscale = \"\""),
    ("Program: subtract(5, 3),\n divide(#0, 3)", "finqa", "subtract(5, 3), divide(#0, 3)"),
    ("`add(1, 2)`", "finqa", "add(1, 2)"),
    ("Program: divide(add(1, 2, 3),\n 3)", "finqa", "add(1, 2), add(#0, 3), divide(#1, 3)"),
    (None, "python", ""),
])
def test_program_text_is_cleaned(reply, language, program):
    from knapsack_dspy.docqa.solvers.program_of_thought_answerer import clean_program_text

    assert clean_program_text(reply, language) == program


def test_unlabelled_records_cannot_be_demos():
    record = {"id": "test-q", "question": "q?", "table": TABLE, "paragraphs": [], "answer": "", "answer_value": None}
    with pytest.raises(ValueError, match=r"'test-q'.*no gold answer"):
        ProgramOfThoughtAnswerer().as_demo(record)


def test_numbers_copied_from_another_cell_than_the_comment_names_are_the_named_cells():
    swapped = ("revenue_2019 = 1000.0  # Revenue, 2019\nrevenue_2018 = 1200.5  # Revenue, 2018\n"
               "ans = revenue_2019 - revenue_2018")
    configure([{"program": swapped}] * 2)
    pred = ProgramOfThoughtAnswerer()(question="What is the change in revenue?", table=TABLE, paragraphs=[])
    assert pred.answer == pytest.approx(200.5)
    assert pred.cell_fixes == ["revenue_2019: 1000 -> 1200.5 (Revenue, 2019)",
                               "revenue_2018: 1200.5 -> 1000 (Revenue, 2018)"]
    assert pred.program.splitlines()[0] == "revenue_2019 = 1200.5  # Revenue, 2019"  # the program that ran
    as_written = ProgramOfThoughtAnswerer(cited_cells=False)(question="What is the change in revenue?",
                                                             table=TABLE, paragraphs=[])
    assert as_written.answer == pytest.approx(-200.5) and as_written.cell_fixes == []


def test_a_label_the_program_copied_is_answered_as_the_document_writes_it():
    table = [["", "2019"], ["Other", "1"], ["Other", "2"], ["Goodwill", "3"]]
    configure([{"program": 'ans = "Other (2nd)"'}, {"program": 'ans = ["Other (1st)", "Goodwill"]'}])
    solver = ProgramOfThoughtAnswerer()
    assert solver(question="Which item is second?", table=table, paragraphs=[]).answer == "Other"
    assert solver(question="Which items?", table=table, paragraphs=[]).answer == ["Other", "Goodwill"]


def test_the_scale_reads_the_units_of_paragraphs_the_prompt_left_out():
    configure([{"program": "revenue = 1200.5  # Revenue, 2019\nans = revenue"}] * 2)
    solver = ProgramOfThoughtAnswerer()
    question = "What was the revenue in 2019?"
    assert solver(question=question, table=TABLE, paragraphs=["Revenue rose."]).scale == ""
    pred = solver(question=question, table=TABLE, paragraphs=["Revenue rose."],
                  unit_paragraphs=["Revenue rose.", "Amounts are in thousands."])
    assert pred.answer == pytest.approx(1200.5) and pred.scale == "thousand"
