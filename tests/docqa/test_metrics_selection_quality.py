"""Selection-quality metrics on hand-built selections (values computed by hand)."""

from __future__ import annotations

import json
import math

import pytest

import knapsack_dspy  # noqa: F401
from knapsack_dspy.docqa.metrics.selection_quality import (
    QuerySelection,
    SelectedExemplar,
    score_query,
    selection_quality,
)

P = "subtract(5829, 5735), divide(#0, 5735)"
SAME = "subtract(5829, 5735), divide(#0, 5735)"        # 1.0
CLOSE = "(44.1-56.7)/56.7"                              # same ops, 3 of 4 args differ: 0.85
FAR = "add(1, 2)"                                       # 0.0


def _query(gold, exemplars, attributes=None, prompt_tokens=None, budget=None, **extra):
    return {"gold_program": gold, "attributes": attributes or {}, "prompt_tokens": prompt_tokens,
            "budget": budget, "exemplars": exemplars, **extra}


def _ex(program, **attributes):
    return {"program": program, "attributes": attributes}


def test_score_query_by_hand():
    q = _query(P, [_ex(CLOSE, modality="table"), _ex(FAR, modality="text"), _ex(None, modality="table")],
               attributes={"modality": "table"}, prompt_tokens=900, budget=1000)
    s = score_query(q)
    assert s.program_scores == pytest.approx((0.85, 0.0, 0.0))  # no program -> 0
    assert s.best_program_score == pytest.approx(0.85)
    assert s.mean_program_score == pytest.approx(0.85 / 3)
    assert s.gold_case_hit is False
    assert s.attribute_match == {"modality": pytest.approx(2 / 3)}
    assert s.within_budget is True and s.n_exemplars == 3


def test_aggregate_by_hand():
    queries = [
        # hit (SAME), modality 1/2 match, within budget
        _query(P, [_ex(SAME, modality="table"), _ex(FAR, modality="text")], {"modality": "table"}, 500, 1000),
        # no hit (best 0.85), modality 0/1, over budget
        _query(P, [_ex(CLOSE, modality="text")], {"modality": "table"}, 1200, 1000),
        # no gold program (a span question): left out of program metrics; modality 1/1; explicit flag
        _query(None, [_ex(None, modality="text")], {"modality": "text"}, within_budget=True),
        # nothing selected: best 0, no hit; no attribute share; budget unknown
        _query(P, [], {"modality": "table"}),
    ]
    quality = selection_quality(queries)
    assert quality.n_queries == 4
    assert quality.gold_case_hit_rate.value == pytest.approx(1 / 3)
    assert quality.gold_case_hit_rate.n == 3
    assert quality.mean_best_program_score.value == pytest.approx((1.0 + 0.85 + 0.0) / 3)
    assert quality.mean_program_score.value == pytest.approx((0.5 + 0.85 + 0.0) / 3)
    assert quality.attribute_match_rate["modality"].value == pytest.approx((0.5 + 0.0 + 1.0) / 3)
    assert quality.within_budget_rate.value == pytest.approx(2 / 3)
    assert quality.within_budget_rate.n == 3
    assert quality.mean_exemplars.value == pytest.approx(4 / 4)
    for estimate in (quality.gold_case_hit_rate, quality.mean_best_program_score, quality.within_budget_rate):
        assert estimate.low <= estimate.value <= estimate.high
    out = quality.to_dict()
    json.dumps(out)
    assert out["gold_case_hit_rate"] == pytest.approx(1 / 3)
    assert out["attribute_match_rate.modality_n"] == 3
    assert len(out["within_budget_rate_ci90"]) == 2


def test_dataclass_input_and_threshold():
    q = QuerySelection(gold_program=P, exemplars=(SelectedExemplar(CLOSE),), prompt_tokens=10, budget=5)
    assert score_query(q).gold_case_hit is False
    assert score_query(q, threshold=0.85).gold_case_hit is True
    assert score_query(q).within_budget is False


def test_unparseable_programs_score_zero_and_unparseable_gold_is_left_out():
    s = score_query(_query(P, [_ex("2019##2018"), _ex(SAME)]))
    assert s.program_scores == (0.0, 1.0)
    s = score_query(_query("not a program", [_ex(SAME)]))
    assert s.best_program_score is None and s.gold_case_hit is None


def test_a_lone_number_is_no_program():
    # a TAT-QA count question whose derivation is one item ("2019") has no program to be similar to ...
    s = score_query({"derivation": "2019", "exemplars": [{"derivation": "2018"}, {"program": SAME}]})
    assert s.best_program_score is None and s.gold_case_hit is None
    # ... and an exemplar whose derivation is a lone number is no gold case for a real program
    s = score_query(_query(P, [_ex("2018"), _ex(SAME)]))
    assert s.program_scores == (0.0, 1.0)


def test_derivation_key_and_tatqa_pool():
    q = {"derivation": "(4,411+4,044)/2", "exemplars": [{"derivation": "(1+2)/2"}, {"program": "add(1, 2)"}]}
    s = score_query(q)
    # gold: ops [add divide], args [4411 4044 #0 2]
    # (1+2)/2: same ops; args [1 2 #0 2] -> 2 substitutions of 4 -> 0.8 + 0.2 * 0.5
    # add(1, 2): ops [add] -> 1 deletion of 2 -> 0.5; args [1 2] -> 1 substitution + 2 deletions of 4 -> 0.25
    assert s.program_scores == pytest.approx((0.8 + 0.2 * 0.5, 0.8 * 0.5 + 0.2 * 0.25))


def test_no_queries_gives_nan_estimates():
    quality = selection_quality([])
    assert quality.n_queries == 0
    assert math.isnan(quality.gold_case_hit_rate.value)
    assert quality.to_dict()["mean_exemplars"] is None


@pytest.mark.parametrize("bad, message", [
    ("not a mapping", "expected a mapping"),
    ({"exemplars": "x"}, "'exemplars' must be a list"),
    ({"exemplars": [], "budget": "many"}, "'budget' must be a number"),
    ({"attributes": ["table"]}, "attributes must be a mapping"),
])
def test_bad_input(bad, message):
    with pytest.raises((TypeError, ValueError), match=message):
        selection_quality([bad])
