"""Numbers as documents write them, TAT-QA derivations, FinQA program templates, SARA case ids."""

from __future__ import annotations

import ast
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from knapsack_dspy.docqa.data.program_template import finqa_program_template
from knapsack_dspy.docqa.data.sara import statute_of_case_id
from knapsack_dspy.docqa.data.tatqa_derivation import DerivationLiteral, parse_derivation, parse_expression
from knapsack_dspy.docqa.number_text import number_text, parse_number


@pytest.mark.parametrize(("text", "value"), [
    ("4,411", 4411.0), ("(7,227)", -7227.0), ("$ 1.5", 1.5), ("-$3", -3.0), ("12.5%", 12.5),
    ("(12.5%)", -12.5), ("S$5.37", 5.37), ("$15037", 15037.0), (".5", 0.5), ("2e-05", 2e-05),
    ("1,234.5", 1234.5), ("\u22124", -4.0), (7, 7.0), (0.25, 0.25),
    ("$(9,982)", -9982.0), ("$ (5)", -5.0), ("$-3", -3.0), ("(-5)", 5.0), ("($(5))", None), ("+-5", None),
    ("2019 and 2018", None), ("1-2", None), ("1,23", None), ("", None), ("-", None), ("e5", None),
    ("N/A", None), (True, None), (None, None), (float("nan"), None), ("1e999", None), (["1"], None),
])
def test_parse_number(text, value):
    assert parse_number(text) == value


@pytest.mark.parametrize(("derivation", "operators", "template", "value"), [
    ("(4,411+4,044)/2", ("add", "divide"), "add(X_0,X_1),divide(#0,X_2)", 4227.5),
    ("[(4,411+4,044)/2] -[(4,044+3,316)/2]", ("add", "divide", "add", "divide", "subtract"),
     "add(X_0,X_1),divide(#0,X_2),add(X_1,X_3),divide(#2,X_2),subtract(#1,#3)", 547.5),
    ("$63,333 - $69,549 ", ("subtract",), "subtract(X_0,X_1)", -6216.0),
    ("-4,697 - (-6,760)", ("subtract",), "subtract(X_0,X_1)", 2063.0),
    ("-(5,940 + 598) / 2", ("add", "multiply", "divide"), "add(X_0,X_1),multiply(#0,constant),divide(#1,X_2)",
     -3269.0),
    ("(1.7%+1.5%+1.5%)/3", ("add", "add", "divide"), "add(X_0,X_1),add(#0,X_1),divide(#1,X_2)", 0.047 / 3),
    ("1,027/11%", ("divide",), "divide(X_0,X_1)", 1027 / 0.11),
    ("60.3 million + 32,137 thousand", ("add",), "add(X_0,X_1)", 60.3e6 + 32137e3),
    ("(5,946) - 10", ("subtract",), "subtract(X_0,X_1)", -5956.0),  # accounting negative
    ("3 x 4", ("multiply",), "multiply(X_0,X_1)", 12.0),
    ("1,914.4", (), "X_0", 1914.4),
    ("5/0", ("divide",), "divide(X_0,X_1)", None),
])
def test_parse_derivation(derivation, operators, template, value):
    parsed = parse_derivation(derivation)
    assert parsed.operators == operators and parsed.num_steps == len(operators)
    assert parsed.template == template
    assert parsed.value == (None if value is None else pytest.approx(value))


def test_parse_expression_reads_each_number_as_written():
    parsed = parse_expression("($4,411 + 12%) x [60.3 Millions - (5,946)]")
    literals = list(parsed.literals.values())
    assert literals == [DerivationLiteral("4,411", 4411.0), DerivationLiteral("12", 12.0, percent=True),
                        DerivationLiteral("60.3", 60.3, scale_word="millions"), DerivationLiteral("5,946", 5946.0)]
    assert [n.key for n in literals] == ["4411", "12%", "60.3 millions", "5946"]
    assert [n.value for n in literals] == [4411.0, 0.12, 60.3e6, 5946.0]
    assert literals[3].negated() == DerivationLiteral("-5,946", -5946.0)
    assert ast.unparse(parsed.body) == "(_v0 + _v1) * (_v2 - -_v3)"  # (5,946) is an accounting negative


@pytest.mark.parametrize("text, value", [("5 x -6", -30.0), ("10 \u2013 4", 6.0), ("(1,234.5)", -1234.5)])
def test_derivation_notation(text, value):
    assert parse_derivation(text).value == value


@pytest.mark.parametrize("text", ["1234,567", "2019 # 2018", "12 \\\n+ 1", "1" + "+1" * 5_000])
def test_what_no_reader_of_derivations_accepts(text):
    with pytest.raises(ValueError):
        parse_expression(text)


@pytest.mark.parametrize("text", ["", "2019##2018", "Find the year with the higher EBITDA", "1,496.5>1,202.9",
                                  "(1+2", "2 ** 3", "abs(-3)"])
def test_non_arithmetic_derivations_are_rejected(text):
    with pytest.raises(ValueError):
        parse_derivation(text)


OPS = {"+": ("add", lambda a, b: a + b), "-": ("subtract", lambda a, b: a - b),
       "*": ("multiply", lambda a, b: a * b), "/": ("divide", lambda a, b: a / b)}


def formatted(number: int, style: int) -> str:
    text = f"{number:,}" if style % 2 else str(number)
    return ("$" + text) if style >= 2 else text


expressions = st.recursive(
    st.tuples(st.integers(1, 10**7), st.integers(0, 3)).map(lambda t: ("num", t[0], formatted(*t))),
    lambda children: st.tuples(st.sampled_from("+-*/"), children, children, st.booleans()).map(
        lambda t: ("op", t[0], t[1], t[2], t[3])),
    max_leaves=8,
)


def render(node) -> str:
    if node[0] == "num":
        return node[2]
    _, symbol, left, right, square = node
    open_, close = ("[", "]") if square else ("(", ")")
    return f"{open_}{render(left)} {symbol} {render(right)}{close}"


def expected(node) -> tuple[list[str], float]:
    """Operators in post-order (left first) and the value, computed on the tree itself."""
    if node[0] == "num":
        return [], float(node[1])
    _, symbol, left, right, _ = node
    left_ops, left_value = expected(left)
    right_ops, right_value = expected(right)
    name, fn = OPS[symbol]
    value = fn(left_value, right_value) if not (symbol == "/" and right_value == 0) else math.nan
    return left_ops + right_ops + [name], value


@settings(max_examples=150, deadline=None)
@given(expressions)
def test_derivation_operators_follow_evaluation_order(tree):
    """Whatever the nesting, bracket style and number formatting, the parser recovers the tree's operators
    in evaluation order and its value."""
    operators, value = expected(tree)
    parsed = parse_derivation(render(tree))
    assert list(parsed.operators) == operators
    assert parsed.template.count("(") == len(operators)
    if not math.isnan(value) and parsed.value is not None:
        assert parsed.value == pytest.approx(value, rel=1e-9, abs=1e-9)


@pytest.mark.parametrize(("program", "template"), [
    ("subtract(5829, 5735), divide(#0, 5735)", "subtract(X_0,X_1),divide(#0,X_1)"),
    ("divide(100, 100), divide(3.8, #0)", "divide(X_0,X_0),divide(X_1,#0)"),
    ("multiply(607, 18.13), multiply(#0, const_1000), multiply(3.3, const_1000000), greater(#1, #2)",
     "multiply(X_0,X_1),multiply(#0,constant),multiply(X_2,constant),greater(#1,#2)"),
    ("table_min(expected volatility, none), table_max(expected volatility, none), subtract(#1, #0)",
     "table_min(X_0),table_max(X_0),subtract(#1,#0)"),
    ("divide(9896, 23.6%)", "divide(X_0,X_1)"),
    ("table_average(cash ( in millions ), none)", "table_average(X_0)"),
])
def test_finqa_program_template(program, template):
    assert finqa_program_template(program) == template


def test_finqa_program_template_rejects_bad_programs():
    with pytest.raises(ValueError, match="unknown operation"):
        finqa_program_template("modulo(3, 2)")


@pytest.mark.parametrize(("case_id", "expected"), [
    ("s152_c_1_B_neg", {"statute": "152(c)(1)(B)", "section": "152", "polarity": "neg"}),
    ("s7703_b_3_pos", {"statute": "7703(b)(3)", "section": "7703", "polarity": "pos"}),
    ("s63_d_pos", {"statute": "63(d)", "section": "63", "polarity": "pos"}),
    ("s1_pos", {"statute": "1", "section": "1", "polarity": "pos"}),
    ("tax_case_12", {}),
])
def test_statute_of_case_id(case_id, expected):
    assert statute_of_case_id(case_id) == expected


@pytest.mark.parametrize("value, expected", [
    (None, None), (True, None), (3, 3.0), (2.5, 2.5), (float("nan"), None), (float("inf"), None), ([1], None),
    ("  \u22125 ", "-5"),
])
def test_number_text_is_what_every_reader_of_numbers_starts_from(value, expected):
    assert number_text(value) == expected


def test_dollars_and_numbers_share_their_input_handling():
    from knapsack_dspy.docqa.metrics.sara import parse_dollars

    for value in (None, True, float("nan"), [5], 7, " \u2212250 "):
        assert parse_dollars(value) == parse_number(value)
