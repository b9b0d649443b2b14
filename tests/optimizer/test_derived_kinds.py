"""Kinds for any program (``attribute_classifier.derive_kinds``): derived from the demos' outputs when a pool
carries none, a user's ``kind`` function or labels win, ``derive_kinds=False`` opts out, and the fallback stays
where nothing can be derived."""

import warnings

import dspy
import numpy as np
import pytest
from helpers import HashingEmbedder, WordCounter

from knapsack_dspy.selection.attribute_classifier import MAX_KINDS, derive_kinds, kind_count
from knapsack_dspy.selection.config import SelectionConfig, SelectionConfigError
from knapsack_dspy.selection.selectors.case_coverage import CaseCoverageFallback
from knapsack_dspy.teleprompt.knapsack_few_shot import KnapsackFewShot

FAMILIES = {"sum": "add plus together total combined sum", "split": "divide share split each per equally",
            "scale": "times multiply product double triple rate"}


def test_the_kind_count_rule():
    assert [kind_count(n) for n in (15, 16, 40, 200, 1164, 5278, 10**6)] == [0, 2, 2, 5, 12, 16, MAX_KINDS]


def test_clusters_of_outputs_are_found_and_new_items_assigned():
    rng = np.random.default_rng(0)
    centres = rng.normal(size=(3, 32))
    truth = np.repeat([0, 1, 2], [30, 20, 10])
    vectors = centres[truth] + 0.05 * rng.normal(size=(60, 32))
    derived = derive_kinds(vectors, k=3)
    labels = np.asarray(derived.labels)
    for family in range(3):  # each true family is one kind, and the largest is derived:0
        assert len(set(labels[truth == family])) == 1
    assert labels[0] == "derived:0" and derived.sizes() == {"derived:0": 30, "derived:1": 20, "derived:2": 10}
    assert derived.assign(centres) == [labels[0], labels[30], labels[50]]
    assert derive_kinds(vectors[:15]) is None  # too few demos
    assert derive_kinds(np.ones((40, 8))) is None  # all alike: nothing to tell apart


def _trainset(n=48):
    names = list(FAMILIES)
    return [dspy.Example(id=f"e{i}", question=f"question number {i} about item {i % 7}",
                         reasoning=f"{FAMILIES[names[i % 3]]} step {i}", answer=str(i)).with_inputs("question")
            for i in range(n)]


def _compile(trainset, **settings):
    tele = KnapsackFewShot(selector="case_coverage", max_exemplars=2, budget=4000, token_counter=WordCounter(),
                           embedder=HashingEmbedder(), progress=False, **settings)
    return tele.compile(dspy.ChainOfThought("question -> answer"), trainset=trainset)


def test_a_plain_program_gets_kinds_from_its_pool():
    trainset = _trainset()
    with warnings.catch_warnings():
        warnings.simplefilter("error", CaseCoverageFallback)
        program = _compile(trainset)
    select = program.predict.selection
    kinds = select.pool_attributes["kind"]
    assert program.compile_report["predictors"]["predict"]["kinds"] == "derived (2 kinds from reasoning, answer)"
    assert len(set(kinds)) == 2 and all(k.startswith("derived:") for k in kinds)
    assert select._selector().classifier_ is not None  # P(kind | query) is learned from them
    assert len(program.predict.select_demos(question="question number 3 about item 3").demos) == 2


def test_a_users_kind_function_or_labels_win_and_the_derivation_can_be_switched_off():
    trainset = _trainset()
    family = {f"e{i}": list(FAMILIES)[i % 3] for i in range(48)}
    program = _compile(trainset, attributes={"kind": lambda ex: family[ex.id]})
    assert set(program.predict.selection.pool_attributes["kind"]) == set(FAMILIES)
    assert program.compile_report["predictors"]["predict"]["kinds"] == "given"
    labelled = [ex.copy(kind=family[ex.id]) for ex in trainset]
    assert set(_compile(labelled).predict.selection.pool_attributes["kind"]) == set(FAMILIES)
    with pytest.warns(CaseCoverageFallback, match="selecting by similarity alone"):
        off = _compile(trainset, derive_kinds=False)
    assert "kind" not in off.predict.selection.pool_attributes
    assert off.compile_report["predictors"]["predict"]["kinds"] == "none"
    with pytest.raises(SelectionConfigError, match="derive_kinds must be true or false"):
        SelectionConfig(derive_kinds="yes")


def test_the_fallback_stays_where_nothing_can_be_derived():
    with pytest.warns(CaseCoverageFallback):
        small = _compile(_trainset(12))  # fewer than 16 demos
    assert "kind" not in small.predict.selection.pool_attributes
    alike = [ex.copy(reasoning="the same", answer="1") for ex in _trainset()]
    with pytest.warns(CaseCoverageFallback):
        _compile(alike)


def test_other_selectors_derive_nothing():
    program = KnapsackFewShot(selector="kate", max_exemplars=2, budget=4000, token_counter=WordCounter(),
                              embedder=HashingEmbedder(), progress=False).compile(
        dspy.ChainOfThought("question -> answer"), trainset=_trainset())
    assert program.predict.selection.pool_attributes == {}
    assert "kinds" not in program.compile_report["predictors"]["predict"]
