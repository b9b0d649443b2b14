"""Reading LM answers: numbers, spans, lists, scales, SARA labels and dollar amounts."""

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from knapsack_dspy.docqa.solvers.answer_parsing import (
    normalise_scale,
    parse_answer,
    parse_number_text,
    parse_statute_answer,
)


@pytest.mark.parametrize("text, value, scale", [
    ("-12.6", -12.6, ""),
    ("$1,234.5 million", 1234.5, "million"),
    ("12.5%", 12.5, "percent"),
    ("12.5 percent", 12.5, "percent"),
    ("(7,227)", -7227, ""),
    ("Answer: 3", 3, ""),
    ("**42**", 42, ""),
    ("1.2 bn", 1.2, "billion"),
    ("3.0", 3.0, ""),
])
def test_numbers_and_their_scale_hints(text, value, scale):
    assert parse_answer(text) == (value, scale)


def test_integers_stay_ints_and_decimals_floats():
    assert isinstance(parse_answer("3")[0], int)
    assert isinstance(parse_answer("3.0")[0], float)
    assert isinstance(parse_answer("2.93")[0], float)


@pytest.mark.parametrize("text, items", [
    ('["2019", "2018"]', ["2019", "2018"]),
    ("['Cloud', 'Devices']", ["Cloud", "Devices"]),
    ("[Cloud, Devices]", ["Cloud", "Devices"]),
])
def test_lists_of_spans(text, items):
    assert parse_answer(text) == (items, "")


def test_a_one_item_list_is_its_item():
    assert parse_answer('["2019"]') == (2019, "")
    assert parse_answer('["strong demand"]') == ("strong demand", "")


def test_spans_are_kept_as_written_without_decoration():
    assert parse_answer('  "strong demand".  ') == ("strong demand", "")
    assert parse_answer("the fixed-price type contracts") == ("the fixed-price type contracts", "")
    assert parse_answer("") == (None, "")
    assert parse_answer(None) == (None, "")


def test_number_text_rejects_words_and_ranges():
    assert parse_number_text("2018 and 2019") is None
    assert parse_number_text("about twelve") is None


@pytest.mark.parametrize("text, scale", [
    ("million", "million"), ("Millions", "million"), ("in thousands", "thousand"), ("%", "percent"),
    ("percentage", "percent"), ("none", ""), ("N/A", ""), ("", ""), (None, ""), ("billion.", "billion"),
    ("gibberish", ""),
])
def test_scale_normalisation(text, scale):
    assert normalise_scale(text) == scale


@given(st.floats(min_value=-1e9, max_value=1e9, allow_nan=False).map(lambda x: round(x, 4)))
def test_printed_numbers_read_back(value):
    parsed, scale = parse_answer(repr(value))
    assert scale == ""
    assert parsed == pytest.approx(value)


@given(st.lists(st.text(alphabet="abcdefghij ,'-", min_size=1, max_size=12).filter(lambda s: s.strip()),
                min_size=2, max_size=5))
def test_json_lists_read_back(items):
    parsed, _ = parse_answer(json.dumps(items))
    assert parsed == [item.strip() for item in items]


@pytest.mark.parametrize("text, expected", [
    ("Entailment", "Entailment"), ("entailed", "Entailment"), ("Contradiction.", "Contradiction"),
    ("not entailed", "Contradiction"), ("False", "Contradiction"), ("**Entailment**", "Entailment"),
])
def test_statute_labels(text, expected):
    assert parse_statute_answer(text, kind="entailment") == expected
    assert parse_statute_answer(text) == expected


@pytest.mark.parametrize("text, dollars", [
    ("$68,844", 68844), ("$15,037.40", 15037), ("In 2017 Alice owes $68,844.60", 68845), ("-$5", -5),
    ("1200", 1200), ("No tax is due: $0", 0), ("Alice pays 2,500 dollars in 2017", 2500),
    ("The tax for 2017 is 3,100", 3100),
])
def test_statute_amounts(text, dollars):
    assert parse_statute_answer(text, kind="numerical") == dollars


def test_statute_kind_decides_what_is_read():
    assert parse_statute_answer("$0, no tax", kind="numerical") == 0
    assert parse_statute_answer("$0, no tax") == "Contradiction"  # no kind: a label word wins
    assert parse_statute_answer("$4000", kind="entailment") is None
    assert parse_statute_answer("I cannot tell", kind="numerical") is None
    with pytest.raises(ValueError, match="kind must be"):
        parse_statute_answer("x", kind="amount")
