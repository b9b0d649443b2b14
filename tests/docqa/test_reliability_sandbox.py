"""Reliability of the sandboxes: table cells pass the same bounds as computed values, errors say what went
wrong in a bounded line, and ``knapsack_dspy.docqa.sandbox`` imports only the standard library."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from knapsack_dspy.docqa.sandbox import execute_finqa_program, execute_python
from knapsack_dspy.messages import MAX_MESSAGE_CHARS, one_line


@pytest.mark.parametrize(
    "cell, message",
    [
        ("1" * 120, "a table cell reads as 1.11111e+119, a number too large (|x| > 1e+100)"),
        ("(" + "9" * 150 + ")", "a number too large"),
    ],
)
@pytest.mark.parametrize(
    "lookup",
    ['table["Revenue", "2019"]', 'table["Revenue", :]', 'table[:, "2019"]', 'table.loc["Revenue", "2019"]'],
)
def test_table_cells_pass_the_finiteness_and_magnitude_checks(cell, message, lookup):
    table = [["", "2019"], ["Revenue", cell]]
    result = execute_python(f"ans = {lookup}", table)
    assert not result.ok and message in result.error


def test_a_cell_too_long_to_be_a_finite_number_reads_as_text_never_infinity():
    table = [["", "2019"], ["Revenue", "1" * 400]]
    assert execute_python('ans = table["Revenue", "2019"]', table).answer == "1" * 400
    for lookup in ('table["Revenue", :]', 'table[:, "2019"]'):
        assert "not a number" in execute_python(f"ans = {lookup}", table).error
    converted = execute_python('ans = float(table["Revenue", "2019"])', table)
    assert converted.error == "ValueError: result is not a finite number (NaN or infinity) (line 1)"


def test_ordinary_cells_still_read():
    result = execute_python('ans = table["Revenue", :]', [["", "2019", "2018"], ["Revenue", "$1,204", "(7)"]])
    assert result.ok and result.answer == [1204.0, -7.0]


def test_an_over_long_constant_is_a_limit_not_an_internal_error():
    result = execute_python("ans = const_" + "1" * 5000)
    assert (
        result.error == "LimitExceeded: constant const_111111111111... has 5000 digits (at most 101) (line 1)"
    )
    assert execute_python("ans = const_" + "1" * 101).error.startswith("LimitExceeded: number too large")
    assert execute_python("ans = const_100 + const_m1").answer == 99


@pytest.mark.parametrize(
    "code, message",
    [
        ('x = 1\nans = "a\x00b"', "SyntaxError: the program contains a NUL byte (line 2)"),
        (
            'x = 1\n\nans = "\ud800"',
            "SyntaxError: the program contains a lone surrogate (U+D800, half of a UTF-16 pair) (line 3)",
        ),
    ],
)
def test_unparsable_characters_are_named_not_called_deep_nesting(code, message):
    assert execute_python(code).error == message


def test_error_lines_are_bounded_and_keep_their_end():
    label = "x" * 10_000
    result = execute_python(f'y = 1\nans = table["{label}", "2019"]', [["", "2019"], ["Revenue", "1"]])
    assert len(result.error) == MAX_MESSAGE_CHARS
    assert result.error.startswith("KeyError: no table row 'xxx") and result.error.endswith("(line 2)")
    assert " [...] " in result.error
    finqa = execute_finqa_program(f"table_max({'y' * 10_000}, none)", [["", "2019"], ["Revenue", "1"]])
    assert not finqa.ok and len(finqa.error) <= MAX_MESSAGE_CHARS


def test_one_line_collapses_whitespace_and_keeps_short_text():
    assert one_line("a\n  b\tc") == "a b c"
    assert one_line("a" * 30 + "b" * 20, limit=20) == "a" * 9 + " [...] " + "b" * 4


def test_execution_imports_only_the_standard_library():
    code = (
        "import sys; before = set(sys.modules); import knapsack_dspy.docqa.sandbox; "
        "import json; print(json.dumps(sorted({m.split('.')[0] for m in set(sys.modules) - before})))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    third_party = [m for m in json.loads(out) if m not in sys.stdlib_module_names and m != "knapsack_dspy"]
    assert third_party == []
    # besides what ``import knapsack_dspy`` itself loads (environment defaults, the provider hook)
    own = (
        "import sys, json; import knapsack_dspy; root = set(sys.modules); import knapsack_dspy.docqa.sandbox; "
        "print(json.dumps(sorted(m for m in set(sys.modules) - root "
        "if m.startswith('knapsack_dspy.') and not m.startswith('knapsack_dspy.docqa.sandbox'))))"
    )
    out = subprocess.run([sys.executable, "-c", own], capture_output=True, text=True, check=True).stdout
    assert json.loads(out) == [f"knapsack_dspy.{m}" for m in ("docqa", "docqa.number_text", "docqa.table_layout",
                                                              "errors", "messages")]
