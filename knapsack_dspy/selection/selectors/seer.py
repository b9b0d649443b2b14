"""SEER: per-query knapsack selection (Tonglet et al. 2023).

kNN pre-filter to the ``knn_k`` nearest candidates, then ``solve_knapsack``: maximise similarity to the
query under the token capacity, at most M exemplars, and SEER's diversity templates for the target
attribute values of the query (predicted, or gold for the oracle variant).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from knapsack_dspy.selection import ann_index
from knapsack_dspy.selection.attribute_domains import attribute_domain
from knapsack_dspy.selection.constraints import max_per_value, seer_template
from knapsack_dspy.selection.knapsack import (
    DEFAULT_TIME_LIMIT,
    DEFAULT_WORK_LIMIT,
    AttributeConstraint,
    solve_knapsack,
)
from knapsack_dspy.selection.selectors.base import ExemplarSelector, candidates, make_selection


def template_constraints(pool, idx: np.ndarray, targets: Mapping[str, str], attributes: Sequence[str],
                         max_exemplars: int, alpha: float, beta: float,
                         max_per_doc: int | None = None) -> list[AttributeConstraint]:
    """SEER templates for each attribute with a target value, over the candidate subset ``idx`` (an attribute's
    declared values and uncertain values: ``attribute_domains``)."""
    constraints: list[AttributeConstraint] = []
    for attr in attributes:
        target = targets.get(attr)
        if target is None or attr not in pool.attributes:
            continue
        declared = attribute_domain(attr)
        constraints += seer_template(pool.attributes[attr][idx], target, max_exemplars, alpha, beta, attribute=attr,
                                     uncertain=declared.uncertain, domain=declared.values or None)
    if max_per_doc is not None and pool.doc_ids is not None:
        constraints += max_per_value(pool.doc_ids[idx], max_per_doc, attribute="doc_id")
    return constraints


class KnapsackSelector(ExemplarSelector):
    """SEER's selector.

    Parameters: ``max_exemplars`` (M), ``alpha`` / ``beta`` (template shares), ``attributes`` (which
    attributes get a template, in relaxation priority order: the last is dropped first when infeasible),
    ``knn_k`` (pre-filter size, 200 as in SEER), ``max_per_doc`` (optional: at most this many exemplars from
    one document), ``work_limit`` (branch-and-bound nodes per ILP: the limit that decides, the same on any machine)
    and ``time_limit`` (wall-clock seconds per ILP: the safety net); a limited solve returns the better of the
    solver's best and the constrained greedy (``solve_knapsack``).
    """

    name = "seer"
    uses_attributes = True

    def __init__(self, max_exemplars: int = 8, alpha: float = 0.75, beta: float = 0.0,
                 attributes: tuple = (), knn_k: int = 200, max_per_doc: int | None = None,
                 time_limit: float = DEFAULT_TIME_LIMIT, work_limit: int = DEFAULT_WORK_LIMIT):
        super().__init__(max_exemplars)
        self.alpha = alpha
        self.beta = beta
        self.attributes = tuple(attributes)
        self.knn_k = knn_k
        self.max_per_doc = max_per_doc
        self.time_limit = time_limit
        self.work_limit = work_limit

    def validate_params(self):
        super().validate_params()
        if not (0 <= self.alpha <= 1 and 0 <= self.beta <= 1):
            raise ValueError(f"alpha and beta must be in [0, 1], got {self.alpha}, {self.beta}")
        if self.knn_k is not None and self.knn_k < 1:
            raise ValueError(f"knn_k must be >= 1, got {self.knn_k}")

    def _solve(self, pool, request, idx, sims, values, capacity, max_items, paid_groups=()):
        cons = template_constraints(pool, idx, request.target_attributes, self.attributes, max_items,
                                    self.alpha, self.beta, self.max_per_doc)
        groups, group_costs = pool.knapsack_groups(idx, paid_groups)
        sol = solve_knapsack(values, pool.costs[idx], capacity, max_items, constraints=cons, groups=groups,
                             group_costs=group_costs, time_limit=self.time_limit, work_limit=self.work_limit)
        return [int(idx[i]) for i in sol.selected], sol

    #: from a pool's nearest-neighbour index, the cheapest other candidates it fetched beside the ``knn_k``
    #: nearest (``selectors.base.approximate_candidates``): a missed cheap exemplar would cost a whole exemplar
    cheap_reserve = ann_index.CHEAP_RESERVE

    def select(self, pool, request):
        idx, sims = candidates(pool, request, self.knn_k, reserve=self.cheap_reserve)
        chosen, sol = self._solve(pool, request, idx, sims, sims[idx], request.capacity, self.max_exemplars)
        return make_selection(pool, request, chosen, sims, status=sol.status, relaxed=sol.relaxed,
                              reason=sol.reason, solution=sol)


class GoldKnapsackSelector(KnapsackSelector):
    """SEER's selector aiming at the query's gold attributes (an oracle: the attribute source defaults to
    ``"gold"``, so the labels must be passed with the query)."""

    name = "seer_gold"
    default_attribute_source = "gold"
