"""``check_selector``: every registered selector passes the selector contract, and a selector that breaks a rule
fails it with that rule named."""

import itertools

import numpy as np
import pytest

from knapsack_dspy.errors import KnapsackDspyError
from knapsack_dspy.selection.selector_checks import SelectorContractError, check_selector
from knapsack_dspy.selection.selectors import SELECTORS, ExemplarSelector
from knapsack_dspy.selection.selectors.base import candidates, make_selection


@pytest.mark.parametrize("name", sorted(SELECTORS))
def test_every_registered_selector_passes(name):
    check_selector(SELECTORS[name])


def test_a_baseline_told_to_respect_the_budget_passes_too():
    check_selector(SELECTORS["kate"], respect_budget=True)
    check_selector(SELECTORS["random"], respect_budget=True)


class Nearest(ExemplarSelector):
    """A correct selector: the nearest eligible ones that fit."""

    name = "nearest_for_checks"

    def select(self, pool, request):
        idx, sims = candidates(pool, request)
        chosen, used = [], 0.0
        for i in idx[np.argsort(-sims[idx], kind="stable")]:
            if len(chosen) < self.max_exemplars and used + pool.costs[i] <= request.capacity:
                chosen.append(int(i))
                used += pool.costs[i]
        return make_selection(pool, request, chosen, sims)


class OverBudget(Nearest):
    def select(self, pool, request):
        idx, sims = candidates(pool, request)
        return make_selection(pool, request, list(idx[np.argsort(-sims[idx])][: self.max_exemplars]), sims)


_draws = itertools.count()


class Restless(Nearest):
    def select(self, pool, request):
        idx, sims = candidates(pool, request)
        return make_selection(pool, request, [int(idx[next(_draws) % idx.size])], sims)


class Twice(Nearest):
    def select(self, pool, request):
        chosen = super().select(pool, request).indices[:1]
        return make_selection(pool, request, list(chosen) * 2, np.zeros(len(pool)))


class Ignores(Nearest):
    def select(self, pool, request):
        return make_selection(pool, request, [pool.ids.index("ex7")], np.zeros(len(pool)))


class Forgets(Nearest):
    def __init__(self, max_exemplars: int = 8, alpha: float = 0.5):
        super().__init__(max_exemplars)
        self.alpha = 0.5  # ignores what it was given


class FitsNothing(Nearest):
    def fit(self, pool, **kwargs):
        return None


@pytest.mark.parametrize("cls, params, rule", [
    (OverBudget, {}, "within the capacity"),
    (Restless, {}, "the same request gives the same selection"),
    (Twice, {}, "distinct exemplars"),
    (Ignores, {}, "no excluded exemplar"),
    (Forgets, {"alpha": 0.9}, "__init__ stores its parameters"),
    (FitsNothing, {}, "fit returns the selector"),
])
def test_a_selector_breaking_a_rule_fails_with_the_rule_named(cls, params, rule):
    check_selector(Nearest)  # the correct one they all derive from passes
    with pytest.raises(SelectorContractError, match=rule) as caught:
        check_selector(cls, **params)
    assert isinstance(caught.value, KnapsackDspyError)


def test_not_a_selector_and_bad_declarations_are_named():
    with pytest.raises(SelectorContractError, match="not an ExemplarSelector"):
        check_selector(dict)

    class BadMode(Nearest):
        mode = "sometimes"

    with pytest.raises(SelectorContractError, match="declarations: mode must be one of"):
        check_selector(BadMode)
