"""KATE (Liu et al. 2022): the M nearest neighbours of the query; ignores the budget by default."""

from __future__ import annotations

import numpy as np

from knapsack_dspy.selection.selectors.base import ExemplarSelector, candidates, greedy_fill, make_selection


class KATESelector(ExemplarSelector):
    name = "kate"

    def __init__(self, max_exemplars: int = 8, respect_budget: bool = False):
        super().__init__(max_exemplars)
        self.respect_budget = respect_budget

    def select(self, pool, request):
        idx, sims = candidates(pool, request)
        order = idx[np.lexsort((idx, -sims[idx]))]
        if self.respect_budget:
            chosen = greedy_fill(order, pool.costs, request.capacity, self.max_exemplars)
        else:
            chosen = list(order[: self.max_exemplars])
        return make_selection(pool, request, chosen, sims)
