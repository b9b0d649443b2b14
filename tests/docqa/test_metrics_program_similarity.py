"""CBR program similarity: hand-computed values, argument normalisation, TAT-QA derivations, properties,
and the real FinQA / TAT-QA programs."""

from __future__ import annotations

import csv
import gzip
import io
import json
import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import knapsack_dspy  # noqa: F401
from knapsack_dspy.docqa.metrics.derivation_steps import derivation_to_steps
from knapsack_dspy.docqa.metrics.program_similarity import (
    argument_sequence,
    edit_distance,
    is_gold_case,
    normalize_argument,
    operator_accuracy,
    operator_sequence,
    program_similarity,
    sequence_similarity,
)
from knapsack_dspy.docqa.sandbox.finqa_dsl import Step

P = "subtract(5829, 5735), divide(#0, 5735)"


@pytest.mark.parametrize("a, b, distance", [
    ("kitten", "sitting", 3), ("", "abc", 3), ("abc", "abc", 0), (["add", "divide"], ["divide"], 1),
    (["a", "b", "c"], ["c", "b", "a"], 2),
])
def test_edit_distance(a, b, distance):
    assert edit_distance(a, b) == distance == edit_distance(b, a)


def test_sequence_similarity():
    assert sequence_similarity([], []) == 1.0
    assert sequence_similarity(["a"], []) == 0.0
    assert sequence_similarity(["a", "b", "c", "d"], ["a", "b", "x", "d"]) == 0.75


@pytest.mark.parametrize("arg, expected", [
    ("5,829", "5829"), ("5829.0", "5829"), ("$5829", "5829"), ("const_100", "100"), ("const_m1", "-1"),
    ("100", "100"), ("23.6%", "23.6%"), ("-1.50", "-1.5"), ("#3", "#3"), ("Net  Income", "net income"),
    ("none", "none"), ("0.0", "0"),
])
def test_normalize_argument(arg, expected):
    assert normalize_argument(arg) == expected


def test_hand_computed_similarities():
    assert program_similarity(P, P) == 1.0
    # same operators; arguments [5829 5735 #0 5735] vs [1 2 #0 2]: 3 substitutions of 4
    assert program_similarity(P, "subtract(1, 2), divide(#0, 2)") == pytest.approx(0.8 + 0.2 * 0.25)
    # operators [subtract divide] vs [add divide]: 1 of 2; arguments [5829 5735 #0 5735] vs [5829 5735 #0 5735]
    assert program_similarity(P, "add(5829, 5735), divide(#0, 5735)") == pytest.approx(0.8 * 0.5 + 0.2)
    # one extra step: operators 2 vs 3 -> 1 - 1/3; arguments 4 vs 6 (2 insertions) -> 1 - 2/6
    extended = P + ", multiply(#1, const_100)"
    assert program_similarity(P, extended) == pytest.approx(0.8 * (2 / 3) + 0.2 * (4 / 6))
    assert program_similarity(P, "add(1, 2)") == 0.0


def test_weights_are_normalised():
    other = "add(5829, 5735), divide(#0, 5735)"
    assert program_similarity(P, other, 1.0, 0.0) == pytest.approx(0.5)
    assert program_similarity(P, other, 0.0, 3.0) == pytest.approx(1.0)
    assert program_similarity(P, other, 4.0, 1.0) == pytest.approx(program_similarity(P, other))
    with pytest.raises(ValueError):
        program_similarity(P, other, 0.0, 0.0)


def test_normalised_arguments_make_programs_equal():
    written = [Step("subtract", ("5,829", "5735.0")), Step("divide", ("#0", "$5735"))]
    assert program_similarity(P, written) == 1.0
    assert program_similarity("multiply(#0, const_100)".replace("#0", "5"), "multiply(5, 100)") == 1.0
    assert program_similarity("table_sum(Net  Income, none)", "table_sum(net income, none)") == 1.0


def test_finqa_program_vs_tatqa_derivation():
    assert derivation_to_steps("(5829-5735)/5735") == [Step("subtract", ("5829", "5735")),
                                                       Step("divide", ("#0", "5735"))]
    assert program_similarity(P, "(5,829 - 5,735) / 5,735") == 1.0

def test_gold_case_threshold():
    same_ops_other_args = "(44.1-56.7)/56.7"  # arguments [44.1 56.7 #0 56.7] vs P's: 3 of 4 differ
    score = program_similarity(P, same_ops_other_args)
    assert score == pytest.approx(0.85)
    assert not is_gold_case(same_ops_other_args, P)
    assert is_gold_case(same_ops_other_args, P, threshold=0.85)
    assert is_gold_case("(5829-5735)/1", P)  # one argument differs: 0.8 + 0.2 * 0.75 = 0.95


@pytest.mark.parametrize("derivation, steps", [
    ("(44.1-56.7)/56.7", [("subtract", ("44.1", "56.7")), ("divide", ("#0", "56.7"))]),
    ("4,422 + 15,400 + 7,905", [("add", ("4422", "15400")), ("add", ("#0", "7905"))]),
    ("-(598 + 268) / 2", [("add", ("598", "268")), ("multiply", ("#0", "-1")), ("divide", ("#1", "2"))]),
    ("[(-18,668) - (-9,166)] / -9,166", [("subtract", ("-18668", "-9166")), ("divide", ("#0", "-9166"))]),
    ("($166.3-$513.3)/$513.3", [("subtract", ("166.3", "513.3")), ("divide", ("#0", "513.3"))]),
    ("(1-15%)*(2.2/15%)", [("subtract", ("1", "15%")), ("divide", ("2.2", "15%")), ("multiply", ("#0", "#1"))]),
    ("3 x 4", [("multiply", ("3", "4"))]),
    ("-114 - (71)", [("subtract", ("-114", "-71"))]),  # an accounting negative, as the gold answer (-43) says
    ("3 + (13) + 26", [("add", ("3", "-13")), ("add", ("#0", "26"))]),
    ("1.5 million - 500 thousand", [("subtract", ("1500000", "500000"))]),
    ("42", []),
])
def test_derivation_to_steps(derivation, steps):
    assert derivation_to_steps(derivation) == [Step(op, args) for op, args in steps]


@pytest.mark.parametrize("bad", ["2019##2018", "592>519", "net sales", "", "   ", "2 ** 3", "(1 + 2"])
def test_non_arithmetic_derivations_are_rejected(bad):
    with pytest.raises(ValueError):
        derivation_to_steps(bad)
    with pytest.raises(ValueError):
        program_similarity(bad, P)


def test_operator_accuracy():
    assert operator_accuracy("subtract(1, 2), divide(#0, 3)", P)
    assert operator_accuracy("(1-2)/3", P)
    assert not operator_accuracy("divide(1, 2), subtract(#0, 3)", P)  # order matters
    assert not operator_accuracy("subtract(1, 2)", P)
    assert not operator_accuracy("this is not a program", P)
    with pytest.raises(ValueError):
        operator_accuracy(P, "not a program either (")


def test_sequences_and_token_form():
    tokens = ["subtract(", "5829", "5735", ")", "divide(", "#0", "5735", ")", "EOF"]
    assert operator_sequence(tokens) == ["subtract", "divide"]
    assert argument_sequence(tokens) == ["5829", "5735", "#0", "5735"]
    assert program_similarity(tokens, P) == 1.0


_OPS = st.sampled_from(["add", "subtract", "multiply", "divide", "exp", "greater"])
_ARGS = st.sampled_from(["1", "2", "3.5", "const_100", "100", "5,829", "#0"])


@st.composite
def _programs(draw):
    n = draw(st.integers(1, 5))
    return [Step(draw(_OPS), (draw(_ARGS).replace("#0", "1") if i == 0 else draw(_ARGS), draw(_ARGS)
                              if i else "2")) for i in range(n)]


@settings(max_examples=200, deadline=None)
@given(a=_programs(), b=_programs())
def test_similarity_properties(a, b):
    s = program_similarity(a, b)
    assert 0.0 <= s <= 1.0
    assert s == pytest.approx(program_similarity(b, a))
    assert program_similarity(a, a) == 1.0
    if [x.op for x in a] != [x.op for x in b]:
        assert s <= 0.8 * (1 - 1 / max(len(a), len(b))) + 0.2 + 1e-12


def _data(*parts):
    root = os.environ.get("KDSPY_DATA_DIR")
    path = Path(root).joinpath(*parts) if root else None
    return path if path and path.is_file() else None


@pytest.mark.skipif(_data("finqa", "dev_meta.csv.gz") is None, reason="FinQA data not available")
def test_real_finqa_programs():
    text = gzip.decompress(_data("finqa", "dev_meta.csv.gz").read_bytes()).decode()
    rows = list(csv.DictReader(io.StringIO(text)))
    programs = [r["program"] for r in rows]
    for program in programs:
        assert program_similarity(program, program) == 1.0
    # programs with the same SEER template have identical operator sequences
    by_template = {}
    for row in rows:
        by_template.setdefault(row["program_template"], []).append(row["program"])
    pairs = [(g[0], g[1]) for g in by_template.values() if len(g) > 1][:50]
    assert pairs
    for a, b in pairs:
        assert operator_sequence(a) == operator_sequence(b)
        assert program_similarity(a, b) >= 0.8


@pytest.mark.skipif(_data("tatqa", "dev.json.gz") is None, reason="TAT-QA data not available")
def test_real_tatqa_arithmetic_derivations_all_parse():
    contexts = json.loads(gzip.decompress(_data("tatqa", "dev.json.gz").read_bytes()))
    derivations = [q["derivation"] for c in contexts for q in c["questions"] if q["answer_type"] == "arithmetic"]
    assert len(derivations) > 500
    steps = [derivation_to_steps(d) for d in derivations]
    assert sum(1 for s in steps if s) / len(steps) > 0.95  # nearly all have at least one operation
