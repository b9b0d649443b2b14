"""Diverse KATE: equal numbers of nearest neighbours per value of an attribute (modality by default)."""

from __future__ import annotations

import numpy as np

from knapsack_dspy.selection.constraints import MODALITIES
from knapsack_dspy.selection.selectors.base import ExemplarSelector, candidates, make_selection


class DiverseKATESelector(ExemplarSelector):
    """``M // len(values)`` nearest neighbours of each value (the remainder goes to the nearest of the
    values in order); a value with too few candidates leaves its slots to the nearest of the rest."""

    name = "diverse_kate"
    respects_budget = False  # KATE's quota per value, whatever the tokens (a SEER baseline)

    def __init__(self, max_exemplars: int = 8, attribute: str = "modality", values: tuple = MODALITIES):
        super().__init__(max_exemplars)
        self.attribute = attribute
        self.values = tuple(values)

    def select(self, pool, request):
        if self.attribute not in pool.attributes:
            raise ValueError(f"diverse_kate needs the pool attribute {self.attribute!r}")
        idx, sims = candidates(pool, request)
        order = idx[np.lexsort((idx, -sims[idx]))]
        labels = pool.attributes[self.attribute]
        quota = {v: self.max_exemplars // len(self.values) for v in self.values}
        for v in self.values[: self.max_exemplars % len(self.values)]:
            quota[v] += 1
        chosen = []
        for i in order:
            if quota.get(labels[i], 0) > 0:
                chosen.append(int(i))
                quota[labels[i]] -= 1
        for i in order:  # unused quota: nearest remaining candidates
            if len(chosen) >= self.max_exemplars:
                break
            if int(i) not in chosen:
                chosen.append(int(i))
        return make_selection(pool, request, chosen[: self.max_exemplars], sims)
