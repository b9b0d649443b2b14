"""The sandboxed Python executor on correct programs: SEER-style programs, table access, functions."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import knapsack_dspy  # noqa: F401
from knapsack_dspy.docqa.number_text import parse_number
from knapsack_dspy.docqa.sandbox import ExecutionResult, execute_python
from knapsack_dspy.docqa.sandbox.cell_numbers import MISSING, TEXT, parse_cell
from knapsack_dspy.docqa.sandbox.python_executor import extract_code
from knapsack_dspy.docqa.sandbox.table_view import TableLookupError, TableView, normalize_label

TABLE = [
    ["", "2019", "2018", "Change"],
    ["Revenue", "$1,234.5", "1,000", "23.45%"],
    ["Cost of sales", "(123)", "(100)", "—"],
    ["Net income (loss)", "$ (45.5)", "-", "n/a"],
    ["Region", "Americas", "EMEA", ""],
]

SEER_PROGRAM = """\
table_query_0 = table["Revenue", "2019"]
text_variable_0 = 1000
step_0 = table_query_0 - text_variable_0
ans = step_0 / text_variable_0 * 100
scale = "percent"
"""


def run(code, table=TABLE, **kwargs) -> ExecutionResult:
    return execute_python(code, table, **kwargs)


def test_seer_style_program():
    result = run(SEER_PROGRAM)
    assert result.ok, result.error
    assert result.answer == pytest.approx(23.45)
    assert result.scale == "percent"
    assert result.variables["table_query_0"] == 1234.5
    assert result.variables["step_0"] == pytest.approx(234.5)


@pytest.mark.parametrize("code, answer", [
    ('ans = table["Revenue", "2019"]', 1234.5),
    ('ans = table.loc["Revenue", "2018"]', 1000.0),
    ('ans = table["Cost of sales", "2019"]', -123.0),           # accounting negative
    ('ans = table["Net income (loss)", "2019"]', -45.5),        # "$ (45.5)"
    ('ans = table["Revenue", "Change"]', 23.45),                # percent cells keep percent units
    ('ans = table["revenue", 2019]', 1234.5),                   # case-insensitive; int year label
    ('ans = table["  REVENUE: ", "2019 "]', 1234.5),           # whitespace / punctuation-insensitive
    ('ans = table["net income loss", "2019"]', -45.5),
    ('ans = table["Region", "2019"]', "Americas"),              # text cells are strings
    ('ans = table["Revenue", :]', [1234.5, 1000.0, 23.45]),
])
def test_table_access(code, answer):
    result = run(code)
    assert result.ok, result.error
    assert result.answer == pytest.approx(answer) if not isinstance(answer, str) else result.answer == answer


def test_whole_columns_and_rows_need_numbers_in_every_cell():
    small = [["", "2019", "2018"], ["a", "1", "2"], ["b", "(3)", "4%"]]
    assert execute_python('ans = table[:, "2018"]', small).answer == [2.0, 4.0]
    assert execute_python('ans = table_sum(table[:, "2019"][0:1])', small).answer == 1.0
    result = run('ans = table[:, "2018"]')
    assert not result.ok and result.error.endswith("is '-': no value (line 1)")
    result = run('ans = table[:, "2019"]')
    assert not result.ok and "('Region', '2019') is 'Americas', not a number" in result.error


def test_missing_cells_fail_when_used():
    result = run('ans = table["Cost of sales", "Change"]')
    assert not result.ok
    assert result.error == "KeyError: table cell ('Cost of sales', 'Change') is '—': no value (line 1)"
    assert run('x = table["Revenue", "2019"]\nans = x').ok  # the rest of the table is fine


def test_unknown_labels_list_near_labels():
    result = run('a = 1\nans = table["Revnue", "2019"]')
    assert not result.ok
    assert result.error == "KeyError: no table row 'Revnue'; near: 'Revenue', 'Region' (line 2)"
    result = run('ans = table["Revenue", "2020"]')
    assert "no table column '2020'" in result.error and "'2019'" in result.error


@pytest.mark.parametrize("code, answer", [
    ("ans = min(3, 1, 2)", 1),
    ("ans = max([3, 1, 2])", 3),
    ("ans = sum([1, 2, 3.5])", 6.5),
    ("ans = abs(-4)", 4),
    ("ans = round(2.34567, 2)", 2.35),
    ("ans = round(2.5)", 2),
    ("ans = len([1, 2, 3])", 3),
    ("ans = float('1,234.5')", 1234.5),
    ("ans = int('42')", 42),
    ("ans = str(12)", "12"),
    ("ans = mean([1, 2, 3, 4])", 2.5),
    ("ans = average(1, 2)", 1.5),
    ("ans = add(1, 2)", 3),
    ("ans = subtract(5, 7)", -2),
    ("ans = multiply(3, const_100)", 300),
    ("ans = divide(1, 4)", 0.25),
    ("ans = exp(2, 3)", 8),
    ("ans = greater(3, 2)", "yes"),
    ("ans = greater(2, 3)", "no"),
    ("ans = const_m1 * 5", -5),
    ('ans = table_max("Revenue")', 1234.5),
    ('ans = table_min("Revenue", "none")', 23.45),   # DSL-style "none" argument ignored
    ('ans = table_sum([1, 2.5])', 3.5),
    ('ans = table_average("Revenue")', (1234.5 + 1000 + 23.45) / 3),
])
def test_functions(code, answer):
    result = run(code)
    assert result.ok, result.error
    assert result.answer == pytest.approx(answer) if not isinstance(answer, str) else result.answer == answer


@pytest.mark.parametrize("code, answer", [
    ("ans = 7 // 2", 3),
    ("ans = 7 % 4", 3),
    ("ans = 2 ** 10", 1024),
    ("ans = -(3 - 5)", 2),
    ("ans = +3", 3),
    ("ans = 1 < 2 <= 2", True),
    ("ans = 1 < 2 > 3", False),
    ("ans = 2 in [1, 2]", True),
    ("ans = 'b' not in 'abc'", False),
    ("ans = 0 or 5", 5),
    ("ans = 1 and 0", 0),
    ("ans = not 0", True),
    ("ans = 'up' if 3 > 2 else 'down'", "up"),
    ("x = 1\nx += 2\nx *= 10\nans = x", 30),
    ("a = b = 4\nans = a + b", 8),
    ("ans = [1, 2][-1]", 2),
    ("ans = (1, 2)", [1, 2]),                      # tuples come back as lists
    ("ans = 'abc'[1:]", "bc"),
    ("ans = 'a' + 'b' * 3", "abbb"),
    ("ans = [1] + [2] * 2", [1, 2, 2]),
    ("ans = None", None),
    ("pass\nans = 1", 1),
    ('"""a docstring"""\nans = 1', 1),
])
def test_operators_and_statements(code, answer):
    result = run(code)
    assert result.ok, result.error
    assert result.answer == answer


def test_lone_expression_is_the_answer():
    assert run("3 * 4").answer == 12
    assert run('table["Revenue", "2019"] - 1000').answer == pytest.approx(234.5)
    assert run("x = 2\nx * 5").answer == 10
    assert run("x = 2\nans = 1\nx * 5").answer == 1  # ans wins over a trailing expression


def test_code_fences_are_removed():
    assert run("```python\nans = 1 + 1\n```").answer == 2
    assert run("Here is the program:\n```\n  ans = 3\n```\nDone.").answer == 3
    assert extract_code("```py\nx = 1\n") == "x = 1"


@pytest.mark.parametrize("scale, expected", [("", ""), ("thousand", "thousand"), (" Million ", "million"),
                                             ("billion", "billion"), ("percent", "percent"), (None, "")])
def test_scales(scale, expected):
    result = run(f"ans = 1\nscale = {scale!r}")
    assert result.ok and result.scale == expected


@pytest.mark.parametrize("scale", ["'crore'", "'per share'", "2019", "['million']"])
def test_an_unknown_scale_is_dropped_not_an_error(scale):
    # a right answer is not thrown away for a scale word (the document decides the scale: data.answer_scale)
    result = run(f"ans = 5.56\nscale = {scale}")
    assert result.ok and result.answer == 5.56 and result.scale == ""


def test_missing_answer_is_an_error():
    result = run("scale = 'million'")
    assert not result.ok and result.error == "NameError: the program did not set 'ans'"
    assert result.variables == {"scale": "million"}


def test_without_ans_the_last_assigned_value_answers():
    # the 1.5B model's way of forgetting ans: the answer computed into a named variable
    result = run("a = 423209\nb = 428501\nmean_tax = (a + b) / 2\nscale = 'thousand'")
    assert result.ok and result.answer == 425855.0 and result.scale == "thousand"
    assert run("total = 1\ntotal += 2").answer == 3
    # the later of the last expression and the last assignment; a bare string (a docstring) is no answer
    assert run("x = 1\nx + 1\ny = 5").answer == 5
    assert run("y = 5\ny + 1").answer == 6
    assert run('"""Percentage change in revenue"""\na = 4\nb = a * 2').answer == 8
    assert run("ans = 7\nz = 9").answer == 7  # ans always wins


def test_a_comprehension_of_large_items_fails_as_it_grows_not_after():
    import tracemalloc

    tracemalloc.start()
    try:
        result = run("L = [0] * 10000\nM = [L[1:] for a in L]")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert result.error.startswith("LimitExceeded: string or list too long")
    assert peak < 20_000_000  # building all 10,000 copies first would take ~800 MB


def test_runtime_errors_name_the_line():
    result = run("a = 1\nb = 0\nans = a / b")
    assert result.error == "ZeroDivisionError: division by zero (line 3)"
    assert result.variables == {"a": 1, "b": 0}
    assert run("ans = x + 1").error == "NameError: name 'x' is not defined (line 1)"
    assert run("ans = 'a' - 1").error == "TypeError: unsupported operand types for -: str and number (line 1)"


def test_no_table_given():
    result = execute_python('ans = table["Revenue", "2019"]')
    assert not result.ok and "no table was given" in result.error
    assert execute_python("ans = 1").answer == 1


def test_table_must_be_indexed_by_row_and_column():
    assert "use table[row, column]" in run('ans = table["Revenue"]').error
    assert "table[:, :]" in run("ans = table[:, :]").error


def test_cell_parsing():
    assert parse_cell("$1,234.5") == 1234.5
    assert parse_cell("(123)") == -123.0
    assert parse_cell("12%") == 12.0
    assert parse_cell("\u22124.5") == -4.5
    assert parse_cell("-$ 3") == -3.0
    assert parse_cell("$ (1,234)") == -1234.0
    assert parse_cell(".5") == 0.5
    assert parse_cell(7) == 7.0
    for missing in ("", " ", "-", "—", "–", "n/a", "NM", None, float("nan")):
        assert parse_cell(missing) is MISSING, missing
    for text in ("Americas", "1,23", "12 months", "1-2", "$"):
        assert parse_cell(text) is TEXT, text


@pytest.mark.parametrize("cell", ["$(62)", "(7,227)", "US$ 5", "S$5.37", "1,234,567", "2e-05", "12.", "-$ 3", "$-3",
                                  "1234,567", "Americas", "$$5", "12 months", 7, 2.5])
def test_cells_are_read_with_the_package_number_grammar(cell):
    value = parse_cell(cell)
    assert (value is TEXT) == (parse_number(cell) is None)
    if value is not TEXT:
        assert value == parse_number(cell)


def test_table_view_directly():
    view = TableView(TABLE)
    assert view.row_labels[0] == "Revenue" and view.column_labels == ["2019", "2018", "Change"]
    assert normalize_label(" Net Income (Loss): ") == "netincomeloss"
    with pytest.raises(TableLookupError, match="no table row 'Profit'"):
        view.get("Profit", "2019")
    with pytest.raises(TypeError):
        TableView("not a table")


def test_bad_table_fails_cleanly():
    result = execute_python('ans = 1', table="not a table")
    assert not result.ok and "list of rows" in result.error


_small = st.integers(min_value=-10**6, max_value=10**6)


@settings(max_examples=80, deadline=None)
@given(a=_small, b=_small, op=st.sampled_from(["+", "-", "*", "//", "%"]))
def test_integer_arithmetic_agrees_with_python(a, b, op):
    result = execute_python(f"ans = ({a}) {op} ({b})")
    if op in ("//", "%") and b == 0:
        assert not result.ok and result.error.startswith("ZeroDivisionError")
    else:
        assert result.ok and result.answer == {"+": a + b, "-": a - b, "*": a * b,
                                               "//": a // b if b else None, "%": a % b if b else None}[op]


UNITS_TABLE = [["", "2019", "2018", "2017"], ["", "€m", "€m", "€m"],
               ["Free cash flow (pre-spectrum)", "4,411", "4,044", "3,900"]]
SPANNING_TABLE = [["", "Year ended", "", ""], ["", "2019", "2018", "2017"], ["Revenue", "10", "9", "8"]]


@pytest.mark.parametrize("table, code, answer", [
    (UNITS_TABLE, 'ans = table["Free cash flow (pre-spectrum)", "2019"]', 4411.0),     # first header row, as before
    (UNITS_TABLE, 'ans = table["Free cash flow (pre-spectrum)", "2019 €m"]', 4411.0),  # stacked header (a real
    (UNITS_TABLE, 'ans = table["Free cash flow (pre-spectrum)", "2018 €M"]', 4044.0),  # 1.5B program wrote this)
    (SPANNING_TABLE, 'ans = table["Revenue", "2018"]', 9.0),            # a lower header cell under a spanning one
    (SPANNING_TABLE, 'ans = table["Revenue", "Year ended 2019"]', 10.0),
    (TABLE, 'ans = table["Revenue", "2018"]', 1000.0),                  # single header row: unchanged
])
def test_columns_can_be_named_by_their_stacked_headers(table, code, answer):
    result = execute_python(code, table)
    assert result.ok, result.error
    assert result.answer == pytest.approx(answer)


def test_a_header_cell_over_several_columns_is_ambiguous():
    result = execute_python('ans = table["Free cash flow (pre-spectrum)", "€m"]', UNITS_TABLE)
    assert not result.ok
    assert ("table column '€m' is ambiguous: 3 columns match ('2019', '2018', '2017'); use one of the labels shown"
            in result.error)
    assert "no table column '2020'" in execute_python('ans = table["Revenue", "2020"]', SPANNING_TABLE).error


DATED_TABLE = [["", "December 29, 2019", "December 30, 2018", "Change 2019 vs 2017"],
               ["Revenue from contracts", "1,200", "1,100", "9%"],
               ["Cost of revenue", "(30)", "(25)", "5%"],
               ["Total revenue", "1,250", "1,140", "10%"],
               ["Total costs", "900", "800", "12%"]]
FISCAL_TABLE = [["", "Year Ended March 31, 2019", "Year Ended March 31, 2018", "2017 $'000"],
                ["Net sales", "10", "9", "8"]]


@pytest.mark.parametrize("table, code, answer", [
    (DATED_TABLE, 'ans = table["Revenue from contracts", "2019"]', 1200.0),      # the year alone
    (DATED_TABLE, 'ans = table["Revenue from contracts", "Dec 29, 2019"]', 1200.0),  # a month abbreviation
    (DATED_TABLE, 'ans = table["revenue from contracts", "december 30 2018"]', 1100.0),
    (FISCAL_TABLE, 'ans = table["Net sales", "2018"]', 9.0),
    (FISCAL_TABLE, 'ans = table["Net sales", "March 31, 2019"]', 10.0),
    (FISCAL_TABLE, 'ans = table["Net sales", "2017"]', 8.0),                      # a unit beside the year
])
def test_a_date_names_the_one_column_headed_by_it(table, code, answer):
    result = execute_python(code, table)
    assert result.ok, result.error
    assert result.answer == pytest.approx(answer)


@pytest.mark.parametrize("code, message", [
    ('ans = table["Revenue from contracts", "2017"]', "no table column '2017'"),   # only in "Change 2019 vs 2017"
    ('ans = table["Revenue from contracts", "December"]', "no table column 'December'"),  # not a date
    ('ans = table["Revenue", "2019"]', "no table row 'Revenue'"),       # rows never match by their words:
    ('ans = table["Total", "2019"]', "no table row 'Total'"),           # "Cost of revenue" is not "Revenue"
    ('ans = table["Revenue from contracts", "2016"]', "no table column '2016'"),
])
def test_words_are_not_enough_to_name_a_row_or_a_non_date_column(code, message):
    result = execute_python(code, DATED_TABLE)
    assert not result.ok
    assert message in result.error


def test_a_date_heading_several_columns_is_ambiguous():
    table = [["", "As of December 31, 2019", "Year ended December 31, 2019"], ["Cash", "5", "6"]]
    result = execute_python('ans = table["Cash", "2019"]', table)
    assert not result.ok
    assert ("no table column '2019'; 2 columns are headed by that date ('As of December 31, 2019', "
            "'Year ended December 31, 2019'); name one by its full header") in result.error


def test_whole_word_matching_does_not_accept_parts_of_numbers():
    table = [["", "2019 $'000", "2018 $'000"], ["Revenue", "5", "4"]]
    assert execute_python('ans = table["Revenue", "2019"]', table).answer == 5.0
    assert not execute_python('ans = table["Revenue", "201"]', table).ok   # "201" is not the word "2019"
    assert not execute_python('ans = table["Revenue", "000"]', table).ok   # in both columns: ambiguous


def test_comprehensions_and_generator_expressions_run_with_their_own_loop_names():
    program = ("incomes = [53330, 21524, 29251]\n"
               "ans = sum(1 for income in incomes if income > 30000)")
    assert run(program).answer == 1
    assert run("ans = [a * b for a, b in [(1, 2), (3, 4)]]").answer == [2, 12]
    assert run("ans = [x + y for x in [1, 2] for y in [10, 20] if x + y != 21]").answer == [11, 12, 22]
    assert run("ans = max(v for v in table['Revenue', :])", TABLE).answer == max(
        run("ans = table['Revenue', :]", TABLE).answer)
    leaked = run("x = 5\nvalues = [x for x in [1, 2]]\nans = x")
    assert leaked.answer == 5 and "x" in leaked.variables  # the loop name did not replace x
    assert run("ans = [y for y in [1]]\nz = y").error == "NameError: name 'y' is not defined (line 2)"


@pytest.mark.parametrize("program, error", [
    ("ans = {x for x in [1]}", "NotAllowed: set comprehensions not allowed"),
    ("ans = {x: x for x in [1]}", "NotAllowed: dict comprehensions not allowed"),
    ("ans = [1 for sum in [1]]", "NotAllowed: 'sum' is a reserved name"),
    ("ans = [a for a, b in [1, 2]]", "ValueError: cannot unpack 1 into 2 names"),
    ("ans = [a for a in 5]", "TypeError: cannot loop over a int"),
])
def test_comprehensions_outside_the_subset_fail_with_a_reason(program, error):
    assert run(program).error.startswith(error)
