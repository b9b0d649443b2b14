"""FinQA answered in Python (issue 37): FinQA's answer rules in the Python writer's instructions, what a Python
row can honestly say (operations, failure classes), the mechanical fixes, and the LM-free scripts around the run
(pre-check, Python against the DSL by page, failure classes and replay). No real LM: DummyLM and recorded rows."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import numpy as np
import pytest
from dspy.utils import DummyLM
from helpers import HashingEmbedder, WordCounter

from knapsack_dspy.bench.results.row_schema import as_row
from knapsack_dspy.bench.scoring.example_scores import score_prediction
from knapsack_dspy.docqa.data import load_examples
from knapsack_dspy.docqa.metrics.finqa_python import (
    FAILURE_CLASSES,
    apply_fixes,
    dsl_numbers,
    dsl_operations,
    failure_class,
    python_operations,
    result_expression,
    same_operations,
)
from knapsack_dspy.docqa.pipelines.pipeline import DocumentQA, program_state_json
from knapsack_dspy.docqa.solvers.program_of_thought_answerer import ProgramOfThoughtAnswerer
from knapsack_dspy.docqa.tasks import build_pipeline
from knapsack_dspy.selection.exemplar_pool import ExemplarPool, SelectionRequest

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = Path(__file__).parents[1] / "fixtures" / "finqa_docs_small.json"


def _script(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "experiments" / "finqa_python" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def records():
    return list(load_examples("finqa", path=FIXTURE))


# -- the pipeline ---------------------------------------------------------------------------------------------

def _instructions(program) -> str:
    return program.solve.predictor.signature.instructions


def test_finqa_python_writer_states_finqa_answer_rules_and_tatqa_keeps_its_own():
    finqa = build_pipeline("finqa", "python_pot", embedder=HashingEmbedder(), token_counter=WordCounter())
    tatqa = build_pipeline("tatqa", "python_pot", embedder=HashingEmbedder(), token_counter=WordCounter())
    assert finqa.spec.spec["conventions"] == "finqa" and "conventions" not in tatqa.spec.spec
    assert "A percentage is a ratio, not multiplied" in _instructions(finqa)
    assert _instructions(finqa).endswith("ans = (revenue_2019 - revenue_2018) / revenue_2018")
    assert '"yes" or "no"' in _instructions(finqa)
    assert "* 100" in _instructions(tatqa) and "ratio" not in _instructions(tatqa)  # TAT-QA's prompt unchanged
    # FinQA's default pipeline is Python (measured better); the DSL stays selectable, untouched
    default = build_pipeline("finqa", "pot", embedder=HashingEmbedder(), token_counter=WordCounter())
    assert default.spec.spec["conventions"] == "finqa" and default.spec.spec["pipeline"] == "python_pot"
    assert "conventions" not in build_pipeline("finqa", "finqa_pot", embedder=HashingEmbedder()).spec.spec
    # the look-up style gets FinQA's rules too
    lookup = ProgramOfThoughtAnswerer(conventions="finqa", program_style="lookup")
    assert "table_query_0" in lookup.predictor.signature.instructions
    assert "A percentage is a ratio" in lookup.predictor.signature.instructions


def test_conventions_are_checked_and_saved_with_the_program():
    with pytest.raises(ValueError, match="conventions must be one of"):
        ProgramOfThoughtAnswerer(conventions="seer")
    with pytest.raises(ValueError, match="writes none"):
        DocumentQA(pipeline="cot", conventions="finqa", embedder=HashingEmbedder())
    program = build_pipeline("finqa", "python_pot", embedder=HashingEmbedder(), token_counter=WordCounter())
    spec = json.loads(program_state_json(program))["spec"]
    assert spec["conventions"] == "finqa"  # load_program rebuilds the writer with FinQA's rules


def test_a_finqa_python_answer_is_the_executed_value_scored_officially(records):
    example = records[0]
    program = build_pipeline("finqa", "python_pot", embedder=HashingEmbedder(), token_counter=WordCounter(),
                             selector="no_demos", attributes=())
    lm = DummyLM([{"program": "a = 1200  # revenue, 2018\nb = 1000  # revenue, 2017\nans = (a - b) / b"}])
    import dspy
    with dspy.context(lm=lm):
        prediction = program(**program.example_inputs(example))
    assert prediction.language == "python" and prediction.answer == pytest.approx(0.2)
    scores = score_prediction(example, prediction)
    assert scores["correct"] and scores["program_correct"] is None  # no program accuracy for Python
    assert "A percentage is a ratio" in lm.history[-1]["messages"][0]["content"]


def test_a_finqa_python_answer_goes_through_the_frozen_fixes_and_says_which():
    question = "what was the percentage change in revenue from 2017 to 2018?"
    percent = "a = 1200  # revenue, 2018\nb = 1000  # revenue, 2017\nstep_0 = (a - b) / b\nans = step_0 * 100"
    import dspy
    with dspy.context(lm=DummyLM([{"program": percent}, {"program": percent}]), adapter=dspy.ChatAdapter()):
        finqa = ProgramOfThoughtAnswerer(conventions="finqa")(question=question, table=[["", "2018"]])
        general = ProgramOfThoughtAnswerer()(question=question, table=[["", "2018"]])
    assert finqa.answer == pytest.approx(0.2) and finqa.answer_fixes == ["percent_as_ratio"]
    assert general.answer == pytest.approx(20.0) and general.answer_fixes == []  # TAT-QA's answers stay percents


# -- operations, classes, fixes ------------------------------------------------------------------------------

def test_operations_of_python_and_dsl_programs_compare_without_the_unit_of_a_percentage():
    code = "a = 5\nb = 4\nans = (a - b) / b * 100"
    assert python_operations(code) == {"subtract": 1, "divide": 1, "multiply": 1}
    assert python_operations(code, units=False) == {"subtract": 1, "divide": 1}
    assert dsl_operations("subtract(5, 4), divide(#0, 4)") == {"subtract": 1, "divide": 1}
    assert same_operations(code, "subtract(5, 4), divide(#0, 4)") is True
    assert same_operations("ans = 5 + 4", "subtract(5, 4)") is False
    assert same_operations("ans = (", "subtract(5, 4)") is None  # nothing to compare
    assert python_operations('ans = "yes" if a > b else "no"') == {"greater": 1}
    assert dsl_operations("divide(5, 4), multiply(#0, const_100)", units=False) == {"divide": 1}
    assert dsl_numbers("subtract(5.3%, const_100), add(#0, 1234)") == [5.3, 1234.0]


@pytest.mark.parametrize(("answer", "program", "expected"), [
    (None, "ans = (", "invalid program"),
    (0.20001, "ans = 0.20001", "right value judged wrong"),  # within 0.5 %, not equal to 5 decimals
    (20.0, "a = 1200\nb = 1000\nans = (a - b) / b * 100", "scale or sign"),
    (-0.2, "a = 1200\nb = 1000\nans = (b - a) / b", "scale or sign"),
    (2200, "a = 1200\nb = 1000\nans = a + b", "wrong operation"),  # the gold's numbers, another computation
    (0.25, "a = 1250\nb = 1000\nans = (a - b) / b", "wrong cell"),  # 1250 is not what the gold reads
    (0.2, "ans = 0.2", None),  # right
])
def test_failure_classes_of_a_wrong_answer(answer, program, expected):
    table = [["", "2018", "2017"], ["revenue", "1200", "1000"]]
    assert failure_class(answer, 0.2, program=program, gold_program="subtract(1200, 1000), divide(#0, 1000)",
                         table=table) == expected
    assert expected is None or expected in FAILURE_CLASSES


def test_yes_no_answers_classify_and_a_boolean_is_fixed_mechanically():
    assert failure_class(True, "yes", program="ans = 5 > 4") == "right value judged wrong"
    assert failure_class(False, "yes", program="ans = 5 > 4") == "wrong operation"
    assert apply_fixes("is revenue greater than costs?", "ans = a > b", True) == ("yes", ["yes_no"])


def test_percent_fix_reads_the_question_and_program_never_the_gold():
    program = "a = 1200\nb = 1000\nans = (a - b) / b * 100  # percent"
    assert apply_fixes("what is the percentage change in revenue?", program, 20.0) == (pytest.approx(0.2),
                                                                                     ["percent_as_ratio"])
    # not a percentage question, or no "* 100" at the end of the answer: left alone
    assert apply_fixes("what is the change in revenue?", program, 20.0) == (20.0, [])
    assert apply_fixes("what percent of revenue?", "ans = a * 100 / b", 20.0) == (20.0, [])
    assert apply_fixes("what percent?", "ans = (", None) == (None, [])


def test_percent_fix_follows_the_answer_to_where_it_was_computed():
    question = "what percentage of the class a stock is outstanding?"
    aliased = "a = 339235\nb = 1000000\nstep_0 = a / b\nstep_1 = step_0 * 100\nans = step_1"
    assert apply_fixes(question, aliased, 33.9235) == (pytest.approx(0.339235), ["percent_as_ratio"])
    # no ``ans``: the sandbox answers with the last assignment
    assert apply_fixes(question, "share = (6.1 / 39.0) * 100", 15.64) == (pytest.approx(0.1564), ["percent_as_ratio"])
    assert apply_fixes(question, "ans = 100 * 0.3392", 33.92) == (pytest.approx(0.3392), ["percent_as_ratio"])
    # the ``* 100`` of an earlier step that the answer does not come from, or a comparison, is not the answer's
    assert apply_fixes(question, "x = a * 100\nans = x / b", 3.0) == (3.0, [])
    assert result_expression("a = 1\nok = a == 1\nans = a") == "1"
    assert result_expression("# nothing assigned") == ""


# -- the pre-check -------------------------------------------------------------------------------------------

def test_precheck_runs_each_demo_program_to_exe_ans_officially(records):
    precheck = _script("finqa_python_precheck")
    program = build_pipeline("finqa", "python_pot", embedder=HashingEmbedder(), token_counter=WordCounter(),
                             top_n_paragraphs=2)
    report = precheck.demo_report(program, records)
    assert report["total"] == len(records) and report["rendered_differs"] == []
    assert report["written"] == report["literal"] == report["lookup"] == report["dsl"] == len(records)
    # verified by the 2-decimal rule of gold-program synthesis, but 0.2002 is not exe_ans 0.2 officially
    off = records[0].copy(id="off", program="subtract(1200, 1000), divide(#0, 999)")
    check = precheck.check_demo(off, program._demo_retrieved(off))
    assert check["written"] and not check["literal"] and not check["dsl"] and "gives 0.2002" in check["why"]
    unwritable = records[0].copy(id="unwritable", program="subtract(1200, 1000")
    check = precheck.check_demo(unwritable, program._demo_retrieved(unwritable))
    assert not check["written"] and check["why"].startswith("no Python program: no program could be written")


def test_given_exemplars_selector_counts_the_named_set_as_the_bench_does():
    precheck = _script("finqa_python_precheck")
    pool = ExemplarPool(["a", "b", "c"], np.eye(3, dtype=np.float32), np.array([10.0, 20.0, 40.0]), {},
                        np.array(["d1", "d2", "d3"]))
    given = precheck.GivenExemplars()
    given.ids = ["c", "a"]
    selection = given.select(pool, SelectionRequest(embedding=np.array([1.0, 0.0, 0.0]), capacity=30.0))
    assert sorted(selection.indices) == [0, 2] and selection.total_cost == 50.0
    assert not selection.within_budget  # counted, not cut to the budget
    dsl = [{"prompt_tokens": 100, "ids": ["a", "b"], "within_budget": True}]
    same = [{"prompt_tokens": 130, "ids": ["a", "b"], "within_budget": False}]
    own = [{"prompt_tokens": 110, "ids": ["a"], "within_budget": True}]
    tokens = precheck.token_report(dsl, same, own)
    assert tokens["python_minus_dsl_same_exemplars"] == 30 and tokens["python_over_dsl_same_exemplars"] == 1.3
    assert tokens["python_own_selection"]["exemplars"] == 1 and tokens["python_own_same_set"] == 0


# -- Python against the DSL, failure classes and replay on recorded rows -------------------------------------

def _first_questions(n: int) -> list:
    from knapsack_dspy.docqa.data.seeded_order import in_seeded_order
    try:
        evalset = load_examples("finqa", "dev_docs_tune")
    except Exception as exc:  # noqa: BLE001 -- the data set is not on this machine
        pytest.skip(f"FinQA dev_docs_tune not available: {exc}")
    return in_seeded_order(evalset, 26)[:n]


def _row(example, pipeline: str, selector: str, correct: bool, **fields) -> dict:
    spec = {"dataset": "finqa", "pipeline": pipeline, "selector": selector, "budget": 2048, "max_exemplars": 4,
            "pool_split": "docs_pool", "eval_split": "dev_docs_tune", "order_seed": 26, "limit": 150,
            "model": "m"}
    run = f"{pipeline}|{selector}|{fields.get('exemplar_budget')}"
    if fields.get("exemplar_budget"):
        spec["exemplar_budget"] = fields.pop("exemplar_budget")
    return {"run": run, "example_id": example.id, "doc_id": example.doc_id, "correct": correct,
            "answer": fields.pop("answer", 1.0), "spec": spec, **fields}


def _write(directory: Path, rows: list[dict]) -> Path:
    directory.mkdir()
    (directory / "predictions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return directory


def test_python_against_dsl_pairs_by_question_with_intervals_by_page(tmp_path):
    script = _script("finqa_python_vs_dsl")
    questions = _first_questions(6)
    python = [_row(q, "python_pot", "kate_within_budget", i < 4, output="ans = 1") for i, q in enumerate(questions)]
    python += [_row(q, "python_pot", "no_demos", False, answer=None) for q in questions]
    dsl = [_row(q, "finqa_pot", "kate_within_budget", i in (0, 5), program_correct=i == 0)
           for i, q in enumerate(questions)]
    dsl += [_row(q, "finqa_pot", "no_demos", False, answer=None) for q in questions]
    dsl += [_row(q, "finqa_pot", "kate_within_budget", True, exemplar_budget=1024) for q in questions]  # not read
    out = tmp_path / "out.json"
    assert script.main([str(_write(tmp_path / "py", python)), str(_write(tmp_path / "dsl", dsl)),
                        "--questions", "1:6", "3:6", "--json", str(out)]) == 0
    figures = json.loads(out.read_text())
    kate = figures["1:6"]["kate_within_budget:kate_within_budget"]
    assert kate["n"] == 6 and kate["python"]["execution_accuracy"] == pytest.approx(400 / 6)
    assert kate["dsl"]["execution_accuracy"] == pytest.approx(200 / 6)
    assert kate["dsl"]["program_accuracy"] == pytest.approx(100 / 6) and "program_accuracy" not in kate["python"]
    d = kate["difference"]
    assert (d["wins"], d["losses"]) == (3, 1) and d["difference"] == pytest.approx(200 / 6)
    assert d["clusters"] == kate["pages"] and d["cluster_low"] <= d["difference"] <= d["cluster_high"]
    assert figures["3:6"]["kate_within_budget:kate_within_budget"]["n"] == 4
    assert figures["1:6"]["no_demos:no_demos"]["python"]["no_value"] == 6


def test_failure_classes_and_replay_of_recorded_python_rows():
    script = _script("finqa_python_failures")
    table = [["", "2018", "2017"], ["revenue", "1200", "1000"]]
    examples = {"q1": {"id": "q1", "question": "what is the percentage change in revenue?", "table": table,
                       "answer": 0.2, "program": "subtract(1200, 1000), divide(#0, 1000)"},
                "q2": {"id": "q2", "question": "what is the total revenue?", "table": table, "answer": 2200.0,
                       "program": "add(1200, 1000)"}}
    spec = {"dataset": "finqa", "pipeline": "python_pot", "selector": "kate_within_budget", "eval_split": "t"}
    rows = [as_row({"run": "r", "example_id": "q1", "answer": 20.0, "correct": False, "spec": spec,
                    "output": "a = 1200  # revenue, 2018\nb = 1000  # revenue, 2017\nans = (a - b) / b * 100"}),
            as_row({"run": "r", "example_id": "q2", "answer": 200, "correct": False, "spec": spec,
                    "output": "a = 1200\nb = 1000\nans = a - b"})]
    classes = script.classify(rows, examples)["kate_within_budget"]
    assert classes["classes"] == {"scale or sign": 1, "wrong operation": 1}
    replayed = script.replay(rows, examples, lambda ex: ex["table"])["kate_within_budget"]
    assert (replayed["right before"], replayed["right after"]) == (0, 1)
    assert replayed["fixes"] == {"percent_as_ratio": 1} and replayed["not exact"] == []
    assert replayed["classes after"] == {"wrong operation": 1}


@pytest.mark.parametrize("name", ["FINQA_PYTHON_CONVENTIONS", "FINQA_PYTHON_LOOKUP_CONVENTIONS"])
def test_the_finqa_python_example_in_the_instructions_runs_to_a_ratio(name):
    from knapsack_dspy.docqa.metrics.answer_matching import finqa_exact_match
    from knapsack_dspy.docqa.sandbox import execute_program
    from knapsack_dspy.docqa.signatures import program_conventions

    example = getattr(program_conventions, name).split("Example:\n", 1)[1]
    table = [["", "2019", "2018"], ["Revenue", "$4,411", "$4,044"]]
    result = execute_program(example, table, kind="python")
    assert result.ok and finqa_exact_match(result.answer, round((4411 - 4044) / 4044, 5))
