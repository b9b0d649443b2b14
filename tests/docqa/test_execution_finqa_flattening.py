"""Flattening nested / many-argument FinQA programs into DSL steps (what each computes worked out by hand)."""

from __future__ import annotations

import pytest

import knapsack_dspy  # noqa: F401
from knapsack_dspy.docqa.sandbox import execute_finqa_program
from knapsack_dspy.docqa.sandbox.finqa_dsl import parse_program
from knapsack_dspy.docqa.sandbox.finqa_flattening import flatten_program

TABLE = [
    ["", "2019", "2018"],
    ["eurasia sbu", "1,590", "1,400"],
    ["total revenue", "10,530", "10,000"],
    ["net income ( loss )", "150", "250"],
]


@pytest.mark.parametrize("written, flat", [
    # a nested call becomes a step before the one that uses it
    ("divide(table_sum(eurasia sbu, none), table_sum(total revenue, none))",
     "table_sum(eurasia sbu, none), table_sum(total revenue, none), divide(#0, #1)"),
    # references to the written steps are renumbered
    ("subtract(divide(10, 4), 1), multiply(#0, const_100)",
     "divide(10, 4), subtract(#0, 1), multiply(#1, const_100)"),
    # deeper nesting
    ("divide(subtract(add(1, 2), 3), 4)", "add(1, 2), subtract(#0, 3), divide(#1, 4)"),
    # a many-argument add / multiply is a left-to-right chain
    ("divide(add(45, 45, 45, 45, 44), const_5)",
     "add(45, 45), add(#0, 45), add(#1, 45), add(#2, 44), divide(#3, const_5)"),
    ("multiply(2, 3, 4)", "multiply(2, 3), multiply(#0, 4)"),
    # sum(...) is a many-argument add
    ("divide(sum(45, 45, 44), 3)", "add(45, 45), add(#0, 44), divide(#1, 3)"),
    ("sum(1, 2)", "add(1, 2)"),
    # a final EOF is dropped, as the parser drops it
    ("divide(add(1, 2), 3), EOF", "add(1, 2), divide(#0, 3)"),
    # a one-argument table operation gets "none"
    ("table_max(total revenue), divide(#0, 2)", "table_max(total revenue, none), divide(#0, 2)"),
    # row names with parentheses stay whole inside a table operation
    ("divide(table_max(net income ( loss ), none), 2)",
     "table_max(net income ( loss ), none), divide(#0, 2)"),
])
def test_written_programs_become_flat_steps(written, flat):
    assert flatten_program(written) == flat
    parse_program(flat)  # and the result is a program of the DSL


@pytest.mark.parametrize("written", [
    "subtract(5829, 5735), divide(#0, 5735)",         # already a program: unchanged
    "average(45, 45, 44)",                             # another operation is not guessed
    "sum(total revenue)",                              # a one-argument sum (a row?) neither
    "subtract(10, 2, 3)",                              # three-argument subtraction has no one meaning
    "table_max(a, none) - table_max(b, none)",         # infix arithmetic
    "divide(#1, 2), add(1, 2)",                        # a reference to a later step
    "add(#0, 127000)",                                 # a reference in the first step
    "divide(add(1, 2), 3",                             # unbalanced
    "",
    "divide(gross_margin(2004), 2)",                   # a call to something that is not an operation
    "add(1,590, 1,400)",                               # thousands separators: not four arguments
    "divide(add(1,590, 1,400), 2)",
    "multiply(1,000, const_100)",
    "sum(10,530, 10,000)",
    "divide(table_sum(a), 2), table_max(#0)",          # a step's result where a row name goes
])
def test_what_cannot_be_flattened_is_returned_as_written(written):
    assert flatten_program(written) == written


def test_flattened_programs_compute_what_was_written():
    # a row's table_sum adds its cells: (1,590 + 1,400) / (10,530 + 10,000) = 0.14564 (the nested form fails to
    # parse, the flat one runs)
    written = "divide(table_sum(eurasia sbu, none), table_sum(total revenue, none))"
    assert not execute_finqa_program(written, TABLE).ok
    assert execute_finqa_program(flatten_program(written), TABLE).answer == 0.14564
    # (45 * 4 + 44) / 5 = 44.8
    assert execute_finqa_program(flatten_program("divide(add(45, 45, 45, 45, 44), const_5)")).answer == 44.8


def test_nesting_depth_is_bounded():
    def nested(depth):
        text = "1"
        for _ in range(depth):
            text = f"add({text}, 1)"
        return text

    assert len(parse_program(flatten_program(nested(10)))) == 10
    assert flatten_program(nested(40)) == nested(40)  # past the bound: returned as written, never raises
    assert flatten_program(None) is None
