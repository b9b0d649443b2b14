"""Random baseline: M exemplars drawn uniformly (seeded by the request)."""

from __future__ import annotations

from knapsack_dspy.selection.selectors.base import (
    ExemplarSelector,
    candidates,
    greedy_fill,
    make_selection,
    request_rng,
)


class RandomSelector(ExemplarSelector):
    """``respect_budget=False`` (SEER's baseline) ignores the token budget; ``True`` skips what doesn't fit."""

    name = "random"

    def __init__(self, max_exemplars: int = 8, respect_budget: bool = False):
        super().__init__(max_exemplars)
        self.respect_budget = respect_budget

    def select(self, pool, request):
        idx, sims = candidates(pool, request)
        order = request_rng(request, self.name).permutation(idx)
        if self.respect_budget:
            chosen = greedy_fill(order, pool.costs, request.capacity, self.max_exemplars)
        else:
            chosen = list(order[: self.max_exemplars])
        return make_selection(pool, request, chosen, sims)
