"""Diverse KATE: equal numbers of nearest neighbours per value of an attribute (the first of ``attributes`` unless
``attribute`` names one; its values in their declared order: ``attribute_domains``)."""

from __future__ import annotations

import numpy as np

from knapsack_dspy.selection.attribute_domains import attribute_domain
from knapsack_dspy.selection.selectors.base import ExemplarSelector, candidates, make_selection


class DiverseKATESelector(ExemplarSelector):
    """``M // len(values)`` nearest neighbours of each value (the remainder goes to the nearest of the
    values in order); a value with too few candidates leaves its slots to the nearest of the rest."""

    name = "diverse_kate"
    respects_budget = False  # KATE's quota per value, whatever the tokens (a SEER baseline)

    def __init__(self, max_exemplars: int = 8, attributes: tuple = (), attribute: str | None = None,
                 values: tuple = ()):
        super().__init__(max_exemplars)
        self.attributes = tuple(attributes)
        self.attribute = attribute
        self.values = tuple(values)

    def _attribute(self) -> str:
        attribute = self.attribute or (self.attributes[0] if self.attributes else None)
        if attribute is None:
            raise ValueError("diverse_kate needs an attribute: set attributes (or the selector's attribute)")
        return attribute

    def select(self, pool, request):
        attribute = self._attribute()
        if attribute not in pool.attributes:
            raise ValueError(f"diverse_kate needs the pool attribute {attribute!r}")
        values = self.values or attribute_domain(attribute).values or tuple(sorted(set(pool.attributes[attribute])))
        idx, sims = candidates(pool, request)
        order = idx[np.lexsort((idx, -sims[idx]))]
        labels = pool.attributes[attribute]
        quota = {v: self.max_exemplars // len(values) for v in values}
        for v in values[: self.max_exemplars % len(values)]:
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
