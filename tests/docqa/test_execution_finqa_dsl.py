"""FinQA DSL syntax: parsing (string and official token forms), the official tokenizer, formatting."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import knapsack_dspy  # noqa: F401
from knapsack_dspy.docqa.sandbox.finqa_dsl import (
    ProgramError,
    Step,
    format_program,
    parse_program,
    program_to_tokens,
    steps_to_tokens,
    tokens_to_program,
)

TWO_STEPS = "subtract(5829, 5735), divide(#0, 5735)"
TWO_STEPS_TOKENS = ["subtract(", "5829", "5735", ")", "divide(", "#0", "5735", ")", "EOF"]


def test_parse_string_form():
    assert parse_program(TWO_STEPS) == [Step("subtract", ("5829", "5735")), Step("divide", ("#0", "5735"))]


def test_parse_token_form_with_and_without_eof():
    expected = [Step("subtract", ("5829", "5735")), Step("divide", ("#0", "5735"))]
    assert parse_program(TWO_STEPS_TOKENS) == expected
    assert parse_program(TWO_STEPS_TOKENS[:-1]) == expected


def test_parse_tolerates_whitespace_and_trailing_eof():
    steps = parse_program("  subtract( 5829 ,5735 ) ,divide (#0, 5735), EOF ")
    assert steps == [Step("subtract", ("5829", "5735")), Step("divide", ("#0", "5735"))]


def test_parse_constants_percentages_and_table_rows():
    steps = parse_program("table_max(net income ( loss ), none), multiply(#0, 23.6%), add(#1, const_m1)")
    assert steps[0] == Step("table_max", ("net income ( loss )", "none"))
    assert steps[1].args == ("#0", "23.6%")
    assert steps[2].args == ("#1", "const_m1")


def test_table_row_names_may_contain_commas_in_string_form():
    assert parse_program("table_sum(cash, cash equivalents, none)") == [
        Step("table_sum", ("cash, cash equivalents", "none"))]


@pytest.mark.parametrize("program, message", [
    ("", "empty program"),
    ("EOF", "empty program"),
    ("foo(1, 2)", "unknown operation 'foo'"),
    ("add(1)", "takes 2 arguments, got 1"),
    ("add(1, 2, 3)", "takes 2 arguments, got 3"),
    ("add(1, )", "argument 2 is empty"),
    ("add(1, 2), divide(#1, 2)", "#1 does not refer to an earlier step"),
    ("add(#0, 2)", "refers to a step, but this is the first step"),
    ("add(1, x)", "'x' is not a number"),
    ("add(1, const_pi)", "unknown constant 'const_pi'"),
    ("add(1, 2) divide(#0, 2)", "expected ',' before the next step"),
    ("add(1, 2),", "ends with ','"),
    ("add(1, 2", "'(' is never closed"),
    ("add 1, 2", "expected '(' after the operation name"),
    ("(1, 2)", "expected an operation name"),
    ("add(1, #x)", "is not a step reference"),
])
def test_malformed_strings_raise_clear_errors(program, message):
    with pytest.raises(ProgramError, match=re.escape(message)):
        parse_program(program)


@pytest.mark.parametrize("tokens, message", [
    (["add(", "1", "2", "EOF"], "do not make whole steps"),
    (["add", "1", "2", ")", "EOF"], "should be an operation like 'add('"),
    (["add(", "1", "2", "]", "EOF"], "should be ')'"),
    (["add(", "1", "2", ")", "EOF", "add(", "1", "2", ")"], "'EOF' before the end"),
    (["add(", 1, "2", ")"], "tokens must be strings"),
    (["EOF"], "empty program"),
])
def test_malformed_token_lists_raise_clear_errors(tokens, message):
    with pytest.raises(ProgramError, match=re.escape(message)):
        parse_program(tokens)


def test_parse_rejects_other_types():
    with pytest.raises(ProgramError, match="string or a list of tokens"):
        parse_program(42)


def test_official_tokenizer_on_regular_programs():
    assert program_to_tokens(TWO_STEPS) == TWO_STEPS_TOKENS
    assert program_to_tokens("table_average(net sales, none)") == ["table_average(", "net sales", "none", ")", "EOF"]


def test_official_tokenizer_quirks():
    # only ", " separates arguments: without the space the two numbers stay one token
    assert program_to_tokens("add(1,2)") == ["add(", "1,2", ")", "EOF"]
    # a "(" inside a row name ends a token, as in the official code
    assert program_to_tokens("table_max(net income (loss), none)") == [
        "table_max(", "net income (", "loss", ")", "none", ")", "EOF"]
    assert program_to_tokens("") == ["EOF"]


def test_tokens_to_program_round_trip():
    assert tokens_to_program(TWO_STEPS_TOKENS) == TWO_STEPS
    assert steps_to_tokens(parse_program(TWO_STEPS)) == TWO_STEPS_TOKENS
    assert format_program(parse_program(TWO_STEPS)) == TWO_STEPS


def test_the_dsl_module_knows_nothing_of_execution():
    """The executor imports the DSL, not the other way round (no import cycle)."""
    from knapsack_dspy.docqa.sandbox import execute_finqa_program, finqa_dsl

    assert execute_finqa_program(TWO_STEPS).answer == 0.01639
    assert not hasattr(finqa_dsl, "execute_finqa_program")


_numbers = st.one_of(
    st.integers(min_value=0, max_value=10**6).map(str),
    st.decimals(min_value=0, max_value=10**4, places=2, allow_nan=False).map(str),
    st.integers(min_value=0, max_value=100).map(lambda n: f"{n}%"),
    st.sampled_from(["const_100", "const_1000", "const_m1", "const_2"]),
)


@st.composite
def _programs(draw):
    steps = []
    for index in range(draw(st.integers(min_value=1, max_value=5))):
        op = draw(st.sampled_from(["add", "subtract", "multiply", "divide", "exp", "greater"]))
        args = []
        for _ in range(2):
            if index and draw(st.booleans()):
                args.append(f"#{draw(st.integers(min_value=0, max_value=index - 1))}")
            else:
                args.append(draw(_numbers))
        steps.append(Step(op, tuple(args)))
    return steps


@settings(max_examples=60, deadline=None)
@given(_programs())
def test_round_trips_for_generated_programs(steps):
    text = format_program(steps)
    assert parse_program(text) == steps
    assert program_to_tokens(text) == steps_to_tokens(steps)  # official tokenizer agrees on clean programs
    assert parse_program(steps_to_tokens(steps)) == steps
    assert tokens_to_program(steps_to_tokens(steps)) == text
