"""The selector registry: selectors declare their behaviour; users register their own; modes map to selectors."""

import subprocess
import sys
from typing import ClassVar

import numpy as np
import pytest
from helpers import HashingEmbedder, WordCounter
from test_select_exemplars import compile_tiny, load_tiny, make_examples

from knapsack_dspy.selection import SelectionConfig
from knapsack_dspy.selection.exemplar_pool import eligible
from knapsack_dspy.selection.selectors import (
    FIT_ON_SCORING_FUNCTION,
    FIT_ON_VALIDATION_QUERIES,
    SELECTORS,
    ExemplarSelector,
    make_selector,
    register_selector,
    registry,
    selector_class,
    selector_for_mode,
)
from knapsack_dspy.selection.selectors.base import candidates, greedy_fill, make_selection
from knapsack_dspy.selection.selectors.registry import BUILT_IN, declaration_problems


@pytest.fixture
def registered():
    """Registers selectors for one test and removes them afterwards."""
    names = []

    def register(cls, **kw):
        register_selector(cls, **kw)
        names.append(kw.get("name", cls.name))
        return cls

    yield register
    for name in names:
        registry._REGISTRY.pop(name, None)


class CheapestSelector(ExemplarSelector):
    """The M cheapest eligible exemplars that fit."""

    name = "cheapest_test"

    def select(self, pool, request):
        idx, sims = candidates(pool, request)
        order = idx[np.argsort(pool.costs[idx], kind="stable")]
        return make_selection(pool, request, greedy_fill(order, pool, request.capacity, self.max_exemplars),
                              sims)


class ValidationCentroidSelector(ExemplarSelector):
    """Fits on validation queries: the M exemplars nearest their centroid, for every query."""

    name = "centroid_test"
    needs_fit = True
    fit_on = FIT_ON_VALIDATION_QUERIES
    mode = "static"
    seen: ClassVar[dict] = {}

    def fit(self, pool, val_embeddings=None, capacity=float("inf"), **kwargs):
        type(self).seen = {"shape": np.asarray(val_embeddings).shape, "capacity": capacity}
        centroid = np.asarray(val_embeddings).mean(axis=0)
        self.chosen_ = [pool.ids[i] for i in np.argsort(-(pool.embeddings @ centroid))[: self.max_exemplars]]
        return self

    def get_state(self):
        return {"chosen": list(self.chosen_)}

    def set_state(self, state):
        self.chosen_ = list(state.get("chosen") or [])
        return self

    def select(self, pool, request):
        sims = pool.similarities(request.embedding)
        return make_selection(pool, request, eligible(pool, request, pool.index_of(self.chosen_)), sims)


def test_every_builtin_declares_its_behaviour():
    declared = {name: (cls.needs_fit, cls.fit_on, cls.mode, cls.uses_attributes, cls.default_attribute_source)
                for name, cls in SELECTORS.items()}
    assert declared["seer"] == (False, None, "per_query", True, "classifier")
    assert declared["seer_gold"] == (False, None, "per_query", True, "gold")
    assert declared["static"] == (True, FIT_ON_VALIDATION_QUERIES, "static", False, "classifier")
    assert declared["hybrid"] == (True, FIT_ON_VALIDATION_QUERIES, "hybrid", True, "classifier")
    assert declared["fixed"] == (True, FIT_ON_SCORING_FUNCTION, "static", False, "classifier")
    for name in ("kate", "random", "diverse_kate"):
        assert declared[name] == (False, None, "per_query", False, "classifier")
    assert all(cls.name == name for name, cls in SELECTORS.items())


def test_make_selector_rejects_parameters_the_selector_does_not_declare():
    assert make_selector("kate", max_exemplars=2, respect_budget=True).respect_budget is True
    with pytest.raises(ValueError, match=r"selector 'kate' has no parameter 'alpha'; its parameters: max_exemplars"):
        make_selector("kate", max_exemplars=2, alpha=0.5)
    with pytest.raises(ValueError, match="unknown selector 'nope'; choose from random"):
        selector_class("nope")


@pytest.mark.parametrize("mode, selector, expected", [
    (None, None, "priced_case_coverage"), (None, "kate", "kate"), ("per_query", None, "priced_case_coverage"),
    ("per_query", "csp", "csp"),
    ("static", None, "static"), ("static", "fixed", "fixed"), ("hybrid", None, "hybrid"),
])
def test_modes_choose_selectors(mode, selector, expected):
    assert selector_for_mode(mode, selector) == expected


@pytest.mark.parametrize("mode, selector, message", [
    ("static", "seer", "selector 'seer' selects 'per_query', not in mode 'static'"),
    ("per_query", "static", "selector 'static' selects 'static'"),
    ("weekly", None, "mode must be one of"),
    ("static", "sear", "unknown selector 'sear'"),
])
def test_inconsistent_modes_are_errors(mode, selector, message):
    with pytest.raises(ValueError, match=message):
        selector_for_mode(mode, selector)


def test_register_selector_checks_the_declarations(registered):
    with pytest.raises(TypeError, match="not an ExemplarSelector subclass"):
        register_selector(dict)

    class Nameless(ExemplarSelector):
        pass

    with pytest.raises(ValueError, match="needs a name"):
        register_selector(Nameless)
    with pytest.raises(ValueError, match="the name 'seer' is taken by KnapsackSelector"):
        register_selector(CheapestSelector, name="seer")

    class Bad(ExemplarSelector):
        name = "bad_test"
        fit_on = "the_moon"
        mode = "weekly"
        default_attribute_source = "oracle"

    with pytest.raises(ValueError, match=r"Bad: fit_on must be one of .*; fit_on='the_moon' needs needs_fit = True; "
                                         r"mode must be one of .*; default_attribute_source must be one of"):
        register_selector(Bad)
    assert "bad_test" not in SELECTORS
    registered(CheapestSelector)
    assert register_selector(CheapestSelector) is CheapestSelector  # the same class again: no error
    assert SELECTORS["cheapest_test"] is CheapestSelector


def test_a_user_selector_compiles_saves_and_loads(tmp_path, registered):
    registered(CheapestSelector)
    embedder, counter = HashingEmbedder(), WordCounter()
    pool = make_examples(30)
    program = compile_tiny(embedder, counter, pool, selector="cheapest_test", budget=4000)
    assert program.compile_report["predictors"]["answer"]["selector"] == "cheapest_test"
    costs = dict(zip(program.answer.selection.pool_ids, program.answer.selection.costs, strict=True))
    out = program.answer.selection(base_tokens=0, id="ex0", doc_id="exdoc0", question="What was the tax rate?")
    excluded = {"ex0", "ex1", "ex2"}  # the query and the other examples of its document (exdoc0)
    assert sorted(costs[i] for i in out.ids) == sorted(c for i, c in costs.items() if i not in excluded)[:4]
    path = tmp_path / "p.json"
    program.save(str(path))
    fresh = load_tiny(path, embedder, counter)
    assert fresh.answer.selection.config.selector == "cheapest_test"
    assert fresh.answer.selection(base_tokens=0, question="What was the tax rate?").ids == \
        program.answer.selection(base_tokens=0, question="What was the tax rate?").ids


def test_a_user_selector_gets_what_it_declares_to_fit_on(registered):
    registered(ValidationCentroidSelector)
    embedder, counter = HashingEmbedder(), WordCounter()
    val = make_examples(9, seed=3, prefix="v")
    program = compile_tiny(embedder, counter, make_examples(40), valset=val, selector="centroid_test")
    assert ValidationCentroidSelector.seen["shape"] == (9, embedder.encode(["x"]).shape[1])
    assert ValidationCentroidSelector.seen["capacity"] < 600 - 50  # budget - a validation prompt - the reserve
    assert program.compile_report["predictors"]["answer"]["mode"] == "static"
    chosen = program.answer.selection.selector_state["chosen"]
    assert len(chosen) == 4 and set(program.answer.selection(base_tokens=0, question="What was x?").ids) <= set(chosen)


def test_a_selector_that_fits_on_validation_queries_without_them_uses_the_pool():
    # as before: without a valset, the pool's own questions stand in as validation queries
    embedder, counter = HashingEmbedder(), WordCounter()
    program = compile_tiny(embedder, counter, make_examples(20), selector="static")
    assert program.answer.selection.selector_state["fixed_ids"]


def test_a_config_names_only_registered_selectors(registered):
    with pytest.raises(ValueError, match="unknown selector 'cheapest_test'"):
        SelectionConfig(selector="cheapest_test")
    registered(CheapestSelector)
    assert SelectionConfig(selector="cheapest_test").build_selector().max_exemplars == 4


def test_kate_within_budget_takes_the_nearest_that_fit_up_to_m():
    import numpy as np

    from knapsack_dspy.selection.exemplar_pool import ExemplarPool, SelectionRequest

    emb = np.eye(4, dtype=np.float32)
    query = np.array([0.9, 0.8, 0.7, 0.1], dtype=np.float32)
    pool = ExemplarPool(["a", "b", "c", "d"], emb, np.array([500.0, 900.0, 300.0, 100.0]))
    request = SelectionRequest(embedding=query, capacity=1000.0)
    chosen = make_selector("kate_within_budget", max_exemplars=3).select(pool, request)
    # nearest first: a (500) fits, b (900) does not, c (300) fits, d (100) fits -> three taken
    assert sorted(pool.ids[i] for i in chosen.indices) == ["a", "c", "d"] and chosen.within_budget
    kate = make_selector("kate", max_exemplars=3).select(pool, request)
    assert [pool.ids[i] for i in kate.indices] == ["c", "b", "a"]
    with pytest.raises(ValueError, match="always respects the budget"):
        make_selector("kate_within_budget", max_exemplars=3, respect_budget=False)


def test_no_demos_selects_nothing():
    import numpy as np

    from knapsack_dspy.selection.exemplar_pool import ExemplarPool, SelectionRequest

    pool = ExemplarPool(["a", "b"], np.eye(2, dtype=np.float32), np.array([10.0, 10.0]))
    selection = make_selector("no_demos", max_exemplars=4).select(pool, SelectionRequest(embedding=np.ones(2)))
    assert selection.indices == () and selection.total_cost == 0.0 and selection.within_budget


@pytest.mark.parametrize("name", sorted(BUILT_IN))
def test_every_built_in_entry_is_a_selector_of_that_name(name):
    cls = selector_class(name)
    assert issubclass(cls, ExemplarSelector) and cls.name == name
    assert declaration_problems(cls) == []
    assert SELECTORS[name] is cls


def test_a_name_is_known_before_its_class_is_imported():
    code = ("import sys; from knapsack_dspy.selection.selectors.registry import SELECTORS, selector_class; "
            "before = 'knapsack_dspy.selection.selectors.case_coverage' in sys.modules; "
            "known = 'case_coverage' in SELECTORS and 'case_coverage' in list(SELECTORS); "
            "selector_class('case_coverage'); "
            "print(before, known, 'knapsack_dspy.selection.selectors.case_coverage' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "True", "True"]


def test_an_unknown_name_lists_the_known_ones():
    with pytest.raises(ValueError, match=r"unknown selector 'sear'; choose from .*seer"):
        selector_class("sear")
    assert "sear" not in SELECTORS
    with pytest.raises(KeyError):
        SELECTORS["sear"]
