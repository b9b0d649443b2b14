"""Strict verification of gold programs: derivation roles, the structural rules, the perturbation check, and the
synthesis that follows them (two terms of one sum are two cells; divisors, "* 100" and counts are constants)."""

import ast

import pytest

from knapsack_dspy.docqa.data.derivation_roles import align_positions, derivation_roles, parse_folded
from knapsack_dspy.docqa.data.gold_program_checks import (
    finding_kind,
    perturbation_finding,
    strict_findings,
    structural_findings,
)
from knapsack_dspy.docqa.data.gold_programs import synthesise_python_program
from knapsack_dspy.docqa.sandbox import execute_program

RATES = [["", "2019", "2018", "2017"],
         ["Salaries and fees", "4", "4", "3"],
         ["Incentive schemes", "2", "3", "5"],
         ["Tax rate", "21.0%", "21.0%", "35.0%"],
         ["Offices", "2", "2", "2"]]


def arithmetic(question, derivation, answer, *, table=RATES, scale="", modality="table", **extra):
    return {"id": "t1", "question": question, "derivation": derivation, "answer": answer, "answer_value": answer,
            "answer_type": "arithmetic", "scale": scale, "table": table, "paragraphs": [], "modality": modality,
            **extra}


def roles_of(derivation, question=""):
    expression, literals = parse_folded(derivation)
    roles = derivation_roles(expression, literals, question)
    written = {name: literal.written for name, literal in literals.items()}
    return roles, written


def test_terms_of_one_sum_are_siblings_and_a_repeated_base_is_not():
    roles, written = roles_of("(4+4+3)/3")
    four_a, four_b = [p for p, w in written.items() if w == "4"]
    assert roles.are_siblings(four_a, four_b)
    assert [written[p] for p in roles.constants] == ["3"] and set(roles.constants.values()) == {"average divisor"}
    roles, written = roles_of("(890 - 567) / 567")
    first, second = [p for p, w in written.items() if w == "567"]
    assert not roles.are_siblings(first, second)  # one quantity in two roles
    assert roles.constants == {}


def test_a_sum_regrouped_on_the_right_is_a_term_of_its_own():
    roles, written = roles_of("(5 + 7) - (7 + 9)")
    first, second = [p for p, w in written.items() if w == "7"]
    assert not roles.are_siblings(first, second)
    roles, written = roles_of("7 / 7")
    assert roles.are_siblings(*written)


def test_constant_roles():
    assert set(roles_of("(10 - 8) / 8 * 100")[0].constants.values()) == {"percent factor"}
    assert set(roles_of("5000 / 1000")[0].constants.values()) == {"unit factor"}
    assert set(roles_of("1400 / 1", "What is the average fair value?")[0].constants.values()) == {"count"}
    assert roles_of("1400 / 2", "What is the fair value?")[0].constants == {}  # not an average: a quantity


def test_alignment_accepts_the_synthesis_forms_and_rejects_other_shapes():
    expression, _ = parse_folded("(1-15%)*(2.2/15%)")
    program = ast.parse("(1 - t / 100) * (x / (t / 100)) * 100", mode="eval").body
    aligned = align_positions(expression, program)
    assert sorted(ast.unparse(node) for node in aligned.values()) == ["1", "t", "t", "x"]
    assert align_positions(expression, ast.parse("t * x", mode="eval").body) is None


def test_two_equal_terms_of_an_average_read_two_cells():
    example = arithmetic("What is the average salaries and fees between 2018 and 2019?", "(4+4)/2", 4.0,
                         scale="million")
    gold = synthesise_python_program(example)
    assert gold.verified, gold.reason
    assert gold.code.splitlines() == ['table_query_0 = table["Salaries and fees", "2019"]',
                                      'table_query_1 = table["Salaries and fees", "2018"]',
                                      "ans = (table_query_0 + table_query_1) / 2"]


def test_an_average_divisor_is_never_a_cell_even_in_a_row_the_question_names():
    # "2" is held by the 2019 incentive-schemes cell, a row the question names; it is still the divisor
    example = arithmetic("What is the average incentive schemes between 2018 and 2019?", "(2+3)/2", 2.5)
    gold = synthesise_python_program(example)
    assert gold.code.splitlines()[-1] == "ans = (table_query_0 + table_query_1) / 2"
    assert strict_findings(gold.code, example) == []


def test_a_change_between_two_equal_rates_reads_both_years():
    example = arithmetic("What was the change in the tax rate from 2018 to 2019?", "21.0% - 21.0%", 0.0,
                         scale="percent")
    code = synthesise_python_program(example).code
    assert 'table["Tax rate", "2019"]' in code and 'table["Tax rate", "2018"]' in code
    assert code.splitlines()[-1] == "ans = table_query_0 - table_query_1"


def test_a_second_equal_term_without_a_named_cell_is_a_text_variable():
    table = [["", "2019"], ["Revenue", "40.5"], ["Other", "40.5"]]
    example = arithmetic("What is the average revenue?", "(40.5 + 40.5) / 2", 40.5, table=table)
    code = synthesise_python_program(example).code
    assert code.splitlines() == ['table_query_0 = table["Revenue", "2019"]', "text_variable_0 = 40.5",
                                 "ans = (table_query_0 + text_variable_0) / 2"]


def test_a_text_only_answer_reads_no_cell():
    example = arithmetic("How much were the expenses?", "(1-15%)*(2.2/15%)", 12.47, modality="text",
                         table=[["", "2019"], ["Gross margin", "15%"]], scale="billion")
    gold = synthesise_python_program(example)
    assert gold.verified and "table[" not in gold.code


def test_the_issue_patterns_are_found_and_fall_back_to_the_next_candidate():
    example = arithmetic("What is the average salaries and fees between 2018 and 2019?", "(4+4)/2", 4.0)
    findings = structural_findings('table_query_0 = table["Salaries and fees", "2019"]\n'
                                   "ans = (table_query_0 + table_query_0) / 2", example)
    assert [finding_kind(f) for f in findings] == ["one variable for two terms"]
    example = arithmetic("What is the average incentive schemes between 2018 and 2019?", "(2+3)/2", 2.5)
    findings = structural_findings('table_query_0 = table["Incentive schemes", "2019"]\n'
                                   'table_query_1 = table["Incentive schemes", "2018"]\n'
                                   "ans = (table_query_0 + table_query_1) / table_query_0", example)
    assert [finding_kind(f) for f in findings] == ["a constant read as a quantity"]
    findings = structural_findings('table_query_0 = table["Incentive", "2019"]\nans = table_query_0', example)
    assert {finding_kind(f) for f in findings} == {"a label not shown", "the expression is not the gold one"}
    gold = synthesise_python_program(example)
    assert gold.verified and not gold.rejected  # the synthesis itself writes no coincidental candidate


def test_a_rejected_candidate_falls_back_and_is_recorded(monkeypatch):
    from knapsack_dspy.docqa.data import gold_programs

    example = arithmetic("What is the average salaries and fees between 2018 and 2019?", "(4+4)/2", 4.0)
    shared = 'table_query_0 = table["Salaries and fees", "2019"]\nans = (table_query_0 + table_query_0) / 2'
    monkeypatch.setattr(gold_programs, "tatqa_python_candidates", lambda ex: [(shared, "derivation")])
    gold = synthesise_python_program(example)
    assert not gold.verified and gold.code == "ans = 4"
    assert "coincidence" in gold.reason and finding_kind(gold.rejected[0]) == "one variable for two terms"
    lenient = synthesise_python_program(example, strict=False)
    assert lenient.verified and lenient.code == shared


def test_perturbation_rejects_cells_that_give_the_answer_by_coincidence():
    # 6 + 2 == 5 + 3: the cells read are not the derivation's numbers; moving them moves the answer differently
    table = [["", "2019", "2018"], ["Revenue", "6", "2"], ["Cost", "5", "3"]]
    example = arithmetic("What is the sum?", "5 + 3", 8.0, table=table)
    wrong = 'table_query_0 = table["Revenue", "2019"]\ntable_query_1 = table["Revenue", "2018"]\n' \
            "ans = table_query_0 + table_query_1"
    assert execute_program(wrong, table).answer == 8.0
    assert structural_findings(wrong, example) == []
    assert finding_kind(perturbation_finding(wrong, example)) == "moves differently when perturbed"
    right = wrong.replace("Revenue", "Cost")
    assert perturbation_finding(right, example) is None


def finqa(program, answer, table, question="q"):
    return {"id": "f1", "dataset": "finqa", "question": question, "program": program, "answer": answer,
            "answer_value": answer, "answer_type": "arithmetic", "scale": "", "derivation": "", "table": table,
            "paragraphs": []}


def test_perturbation_checks_finqa_table_operations_against_the_official_executor():
    table = [["", "2019", "2018"], ["revenue", "1", "2"], ["cost", "2", "1"]]
    example = finqa("table_sum(revenue, none)", 3.0, table)
    assert perturbation_finding('ans = table_sum("revenue")', example) is None
    wrong = 'ans = table_sum("cost")'  # also sums to 3
    assert execute_program(wrong, table).answer == 3.0
    assert finding_kind(perturbation_finding(wrong, example)) == "moves differently when perturbed"


def test_finqa_programs_bind_equal_arguments_to_two_quantities_and_keep_constants():
    table = [["", "2019", "2018"], ["revenue", "4", "4"], ["cost", "100", "7"]]
    gold = synthesise_python_program(finqa("add(4, 4), divide(#0, 2), multiply(#1, 100)", 400.0, table,
                                           question="What is the average revenue in 2018 and 2019?"))
    assert gold.verified, gold.reason
    assert gold.code.splitlines() == ['table_query_0 = table["revenue", "2019"]',
                                      'table_query_1 = table["revenue", "2018"]',
                                      "step_0 = table_query_0 + table_query_1", "step_1 = step_0 / 2",
                                      "ans = step_1 * 100"]
    findings = structural_findings('table_query_0 = table["revenue", "2019"]\nstep_0 = table_query_0 + '
                                   'table_query_0\nstep_1 = step_0 / 2\nans = step_1 * 100',
                                   finqa("add(4, 4), divide(#0, 2), multiply(#1, 100)", 400.0, table))
    assert [finding_kind(f) for f in findings] == ["one variable for two terms"]


@pytest.mark.parametrize("derivation, answer", [("(4+4+3)/3", 3.67), ("21.0% - 35.0%", -14.0),
                                                ("(2 - 3) / 3", -0.33)])
def test_synthesised_programs_pass_the_strict_checks(derivation, answer):
    example = arithmetic("What is the average salaries and fees from 2017 to 2019?", derivation, answer)
    gold = synthesise_python_program(example)
    assert gold.verified, gold.reason
    assert strict_findings(gold.code, example) == []
