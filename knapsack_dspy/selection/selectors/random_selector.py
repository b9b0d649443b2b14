"""Random baseline: M exemplars drawn uniformly (seeded by the request)."""

from __future__ import annotations

from knapsack_dspy.selection.selectors.base import RankingSelector, request_rng


class RandomSelector(RankingSelector):
    """A uniform draw; ``respect_budget=False`` (SEER's baseline) ignores the token budget."""

    name = "random"

    def rank(self, request, idx, sims):
        return request_rng(request, self.name).permutation(idx)
