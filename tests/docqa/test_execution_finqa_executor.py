"""FinQA DSL execution with the official ``eval_program`` semantics (expected values worked out by hand)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import knapsack_dspy  # noqa: F401
from knapsack_dspy.docqa.sandbox import execute_finqa_program, execute_program, run_official_tokens
from knapsack_dspy.docqa.sandbox.finqa_executor import official_cell_number, official_number

TABLE = [
    ["", "2019", "2018", "2017"],
    ["net sales", "$ 1,200", "$ 1,000", "$ 800"],
    ["operating margin", "12%", "10%", "8%"],
    ["restructuring", "-", "5", "6"],
    ["net income ( loss )", "$ 150", "$ 250", "$ 30"],
    ["net loss", "$ 150", "$ 250", "( 30 )"],
    ["notes", "12 ( a )", "10", "8"],
    ["empty", ],
    ["net sales", "1", "2", "3"],
]


def run(program, table=TABLE):
    return execute_finqa_program(program, table)


# -- arithmetic, references, constants, rounding --------------------------------------------------------
def test_two_step_program_rounds_to_five_decimals():
    result = run("subtract(5829, 5735), divide(#0, 5735)")
    assert result.ok and result.answer == 0.01639  # 94 / 5735 = 0.0163905...
    assert result.variables == {"#0": 94.0, "#1": pytest.approx(94 / 5735)}
    assert result.error is None and result.scale == ""


@pytest.mark.parametrize("program, answer", [
    ("add(1, 2)", 3.0),
    ("subtract(1, 2)", -1.0),
    ("multiply(1.5, 4)", 6.0),
    ("divide(1, 3)", 0.33333),
    ("exp(2, 10)", 1024.0),
    ("exp(1.5, 0.5)", 1.22474),
    ("multiply(10086, 42%)", 4236.12),      # percent literal -> /100
    ("divide(5, const_100)", 0.05),
    ("multiply(7, const_m1)", -7.0),
    ("add(const_1000000, const_1)", 1000001.0),
    ("add(1e3, 1)", 1001.0),                # Python float() syntax, as in the official str_to_num
    ("greater(2, 1)", "yes"),
    ("greater(1, 1)", "no"),
    ("subtract(3, 1), subtract(#0, 5), greater(#0, #1)", "yes"),
])
def test_operations(program, answer):
    result = run(program)
    assert result.ok, result.error
    assert result.answer == answer


def test_greater_can_compare_two_yes_no_results_as_strings():
    # the official code compares the strings "yes" > "no" (True)
    assert run("greater(2, 1), greater(1, 2), greater(#0, #1)").answer == "yes"


def test_arithmetic_on_a_yes_no_result_is_an_error():
    result = run("greater(2, 1), add(#0, 1)")
    assert not result.ok and "yes/no" in result.error


# -- table operations -------------------------------------------------------------------------------------
@pytest.mark.parametrize("program, answer", [
    ("table_max(operating margin, none)", 0.12),      # "12%" -> 0.12
    ("table_min(operating margin, none)", 0.08),
    ("table_sum(notes, none)", 30.0),                 # "12 ( a )" -> text before "(" -> 12
    ("table_average(net sales, none)", 2.0),          # duplicate row name: the later row wins
])
def test_table_operations(program, answer):
    result = run(program)
    assert result.ok, result.error
    assert result.answer == pytest.approx(answer)


def test_table_sum_of_a_row_without_cells_is_zero_but_max_fails():
    assert run("table_sum(empty, none)").answer == 0.0
    result = run("table_max(empty, none)")
    assert not result.ok and "no cells" in result.error
    assert not run("table_average(empty, none)").ok


@pytest.mark.parametrize("row, cell", [("restructuring", "'-'"), ("net loss", "'( 30 )'")])
def test_unreadable_cells_invalidate_the_step(row, cell):
    result = run(f"table_max({row}, none)")
    assert not result.ok
    assert cell in result.error and "not a number" in result.error


def test_table_row_lookup_is_exact_and_suggests_near_rows():
    result = run("table_max(Net Sales, none)")
    assert not result.ok
    assert "no table row named 'Net Sales'; near: 'net sales'" in result.error


def test_row_names_with_parentheses_cannot_be_used_officially():
    # the official code splits steps at "(" / ")", so such a step is invalid
    result = run("table_max(net income ( loss ), none)")
    assert not result.ok and "more than one '('" in result.error


def test_commas_inside_number_tokens_are_removed():
    assert execute_finqa_program(["multiply(", "1,000", "2", ")", "EOF"]).answer == 2000.0


def test_table_operation_without_a_table():
    result = execute_finqa_program("table_max(net sales, none)", None)
    assert not result.ok and "needs a table" in result.error


def test_table_reference_argument_reuses_the_previous_row():
    # official quirk: a "#n" row argument keeps the row of the previous table step
    result = run("table_max(net sales, none), table_min(#0, none)")
    assert result.ok and result.answer == 1.0
    assert not run("add(1, 2), table_min(#0, none)").ok


def test_header_row_is_a_row_too():
    table = [["year", "2019", "2018"], ["sales", "1", "2"]]
    assert execute_finqa_program("table_sum(year, none)", table).answer == 2019 + 2018
    # an empty row name leaves only one argument after the official splitting
    assert not run_official_tokens(["table_sum(", "", "none", ")", "EOF"], TABLE).ok


# -- failures -------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("program, fragment", [
    ("divide(1, 0)", "division by zero"),
    ("exp(10, 1000)", "too large"),
    ("exp(-8, 0.5)", "not a real number"),
    ("multiply(1e200, 1e200)", "not a finite number"),
    ("subtract(nan, 1)", "is not a number"),           # the parser rejects it before execution
    ("add(1, 2), divide(#0, #0), subtract(#1, 1), divide(#0, #2)", "division by zero"),
])
def test_failures_have_clear_errors(program, fragment):
    result = run(program)
    assert not result.ok and result.answer is None
    assert fragment in result.error


def test_non_finite_results_from_token_lists_fail():
    result = run_official_tokens(["add(", "inf", "1", ")", "EOF"])
    assert not result.ok and "not a finite number" in result.error


# -- official token-level behaviour ------------------------------------------------------------------
def test_token_structure_check():
    result = run_official_tokens(["add(", "1", "2", "3", "EOF"])
    assert not result.ok and "token 3: expected ')'" in result.error
    result = run_official_tokens(["plus(", "1", "2", ")", "EOF"])
    assert not result.ok and "expected an operation" in result.error


def test_last_token_is_dropped_unseen_by_the_official_runner():
    # without "EOF" the official code drops the ")" and with it the only step
    result = run_official_tokens(["add(", "1", "2", ")"])
    assert not result.ok and "no complete step" in result.error
    # execute_finqa_program appends the missing EOF instead
    assert execute_finqa_program(["add(", "1", "2", ")"]).answer == 3.0


def test_trailing_incomplete_step_is_ignored_officially():
    result = run_official_tokens(["add(", "1", "2", ")", "subtract(", "#0", "EOF"])
    assert result.ok and result.answer == 3.0


def test_official_tokenization_of_a_comma_without_space_is_invalid():
    from knapsack_dspy.docqa.sandbox import program_to_tokens

    assert not run_official_tokens(program_to_tokens("add(1,2)")).ok
    assert execute_finqa_program("add(1,2)").answer == 3.0  # the tolerant parser reads it


def test_operation_token_without_parenthesis_passes_the_structure_check():
    # official: token.strip("(") is checked, so "add" passes; the step then has no "(" and is invalid
    result = run_official_tokens(["add", "1", "2", ")", "EOF"])
    assert not result.ok and "has no '('" in result.error


def test_malformed_string_program_reports_the_parser_error():
    result = execute_finqa_program("add(1, 2), foo(#0, 1)")
    assert not result.ok and result.error.startswith("ProgramError: step 1: unknown operation 'foo'")


def test_bad_program_types_fail_cleanly():
    assert not execute_finqa_program(None).ok
    assert not execute_finqa_program(["add(", 1, 2, ")", "EOF"]).ok
    assert not execute_finqa_program("table_max(net sales, none)", table="not a table").ok


def test_number_reading_matches_str_to_num():
    assert official_number("1,234.5") == 1234.5
    assert official_number("5%") == 0.05
    assert official_number("const_m1") == -1.0
    assert official_number("const_100") == 100.0
    assert official_number("const_x") is None
    assert official_number("abc") is None
    assert official_cell_number("$ 1,234") == 1234.0
    assert official_cell_number("( 30 )") is None
    assert official_cell_number("7.5 ( b )") == 7.5


def test_dispatch():
    assert execute_program("add(1, 2)", kind="finqa").answer == 3.0
    assert execute_program("ans = 1 + 2", kind="python").answer == 3
    with pytest.raises(ValueError, match="unknown program kind 'sql'"):
        execute_program("x", kind="sql")


_operands = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False, allow_infinity=False)


@settings(max_examples=80, deadline=None)
@given(op=st.sampled_from(["add", "subtract", "multiply", "divide"]), a=_operands, b=_operands)
def test_single_step_matches_python_arithmetic_rounded_to_5(op, a, b):
    expected = {"add": lambda: a + b, "subtract": lambda: a - b, "multiply": lambda: a * b,
                "divide": lambda: a / b if b else None}[op]()
    result = execute_finqa_program([f"{op}(", repr(a), repr(b), ")", "EOF"])
    if expected is None or not math.isfinite(expected):
        assert not result.ok
    else:
        assert result.ok and math.isclose(result.answer, round(expected, 5), rel_tol=0, abs_tol=0)
