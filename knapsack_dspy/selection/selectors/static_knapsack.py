"""Compile-time knapsack selection: a static set for every query, or a static core plus per-query slots.

``StaticKnapsackSelector`` solves one knapsack over a representativeness objective (each candidate's
mean similarity to the validation queries) under the budget left by the longest validation prompt, the
same M and diversity constraints (>= ``beta * M`` exemplars of each value of the first attribute).
``HybridKnapsackSelector`` does that for ``core_size`` exemplars and fills the remaining slots per query
with SEER's knapsack on what the core leaves of the budget.

Prompt order: the compile-time set (static) or core (hybrid) opens every prompt in one fixed order, chosen at
fit time (least representative first, a group's exemplars together), so consecutive prompts share it as a
prefix that a server's prompt cache reuses; hybrid's per-query exemplars follow it, least similar first, the
most similar next to the question. (Before, static mode re-sorted its one set by each query's similarity: the
same three exemplars appeared in 15 orders over the TAT-QA dev_tune questions.) A query whose prompt is longer
than the compile-time worst case still drops the set's least similar exemplars until it fits.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from knapsack_dspy.selection.attribute_domains import attribute_domain
from knapsack_dspy.selection.constraints import seer_template
from knapsack_dspy.selection.exemplar_pool import prompt_order
from knapsack_dspy.selection.knapsack import DEFAULT_TIME_LIMIT, DEFAULT_WORK_LIMIT, solve_knapsack
from knapsack_dspy.selection.selectors.base import (
    FIT_ON_VALIDATION_QUERIES,
    NotFittedError,
    candidates,
    eligible,
    greedy_fill,
    make_selection,
    query_values,
)
from knapsack_dspy.selection.selectors.seer import KnapsackSelector


def representative_set(pool, val_embeddings: np.ndarray, capacity: float, max_items: int, beta: float,
                       attribute: str | None, time_limit: float, work_limit: int):
    """Knapsack over mean similarity to the validation queries. Returns (the chosen ids in their fixed prompt
    order, the solution, each exemplar's value)."""
    val = np.asarray(val_embeddings, dtype=np.float32)
    if val.ndim != 2 or val.shape[0] == 0:
        raise ValueError("static selection needs validation query embeddings (a non-empty valset)")
    values = (pool.embeddings @ val.T).mean(axis=1)
    cons = []
    if beta > 0 and attribute is not None and attribute in pool.attributes:
        labels = pool.attributes[attribute]
        domain = attribute_domain(attribute).domain(labels)
        cons = seer_template(labels, "__any__", max_items, 0.0, beta, attribute=attribute,
                             uncertain=("__any__",), domain=domain)
    groups, group_costs = pool.knapsack_groups(np.arange(len(pool)))
    sol = solve_knapsack(values, pool.costs, capacity, max_items, constraints=cons, time_limit=time_limit,
                         work_limit=work_limit, groups=groups, group_costs=group_costs)
    order = prompt_order(sol.selected, values, pool.groups if pool.has_groups else None)
    return [pool.ids[i] for i in order], sol, values


class StaticKnapsackSelector(KnapsackSelector):
    """One exemplar set for all queries, chosen at compile time (``mode="static"``)."""

    name = "static"
    needs_fit = True
    fit_on = FIT_ON_VALIDATION_QUERIES
    mode = "static"
    uses_attributes = False

    def fit(self, pool, val_embeddings=None, capacity: float = float("inf"), **kwargs):
        self.validate_params()
        attr = self.attributes[0] if self.attributes else None
        ids, sol, _ = representative_set(pool, val_embeddings, capacity, self.max_exemplars, self.beta, attr,
                                         self.time_limit, self.work_limit)
        self.fixed_ids_ = ids
        self.fit_report_ = {"status": sol.status, "relaxed": list(sol.relaxed), "capacity": capacity,
                            "outcome": sol.outcome, "limit": sol.limit}
        return self

    def get_state(self):
        return {"fixed_ids": list(getattr(self, "fixed_ids_", []))}

    def set_state(self, state):
        if state.get("fixed_ids") is not None:
            self.fixed_ids_ = list(state["fixed_ids"])
        return self

    def _core(self, pool, request):
        """The fixed set in its prompt order, without the query itself or exemplars from its own document."""
        if not hasattr(self, "fixed_ids_"):
            raise NotFittedError(f"{self.name} selector: call fit() (or compile) first")
        return eligible(pool, request, pool.index_of(self.fixed_ids_))

    def _fitting_core(self, pool, request, sims, limit: int) -> list[int]:
        """The fixed set in its prompt order; a query longer than the compile-time worst case drops its least
        similar exemplars until the rest fits (and at most ``limit``)."""
        core = self._core(pool, request)
        kept = set(greedy_fill(sorted(core, key=lambda i: -sims[i]), pool, request.capacity, limit))
        return [i for i in core if i in kept]

    def select(self, pool, request):
        sims = query_values(pool, request)
        return make_selection(pool, request, [], sims,
                              prefix=self._fitting_core(pool, request, sims, self.max_exemplars))


class HybridKnapsackSelector(StaticKnapsackSelector):
    """A static core of ``core_size`` exemplars (at most ``core_budget_share`` of the compile-time
    capacity) plus per-query knapsack slots up to M (``mode="hybrid"``)."""

    name = "hybrid"
    mode = "hybrid"
    uses_attributes = True

    def __init__(self, max_exemplars: int = 8, alpha: float = 0.75, beta: float = 0.0,
                 attributes: tuple = (), knn_k: int = 200, max_per_doc: int | None = None,
                 time_limit: float = DEFAULT_TIME_LIMIT, work_limit: int = DEFAULT_WORK_LIMIT, core_size: int = 2,
                 core_budget_share: float = 0.5):
        super().__init__(max_exemplars, alpha, beta, attributes, knn_k, max_per_doc, time_limit, work_limit)
        self.core_size = core_size
        self.core_budget_share = core_budget_share

    def validate_params(self):
        super().validate_params()
        if not 0 <= self.core_size <= self.max_exemplars:
            raise ValueError(f"core_size must be in [0, max_exemplars], got {self.core_size}")

    def fit(self, pool, val_embeddings=None, capacity: float = float("inf"), **kwargs):
        self.validate_params()
        attr = self.attributes[0] if self.attributes else None
        ids, sol, _ = representative_set(pool, val_embeddings, capacity * self.core_budget_share, self.core_size,
                                         0.0, attr, self.time_limit, self.work_limit)
        self.fixed_ids_ = ids
        self.fit_report_ = {"status": sol.status, "relaxed": list(sol.relaxed), "capacity": capacity,
                            "outcome": sol.outcome, "limit": sol.limit}
        return self

    def select(self, pool, request):
        sims = query_values(pool, request)
        core = self._fitting_core(pool, request, sims, self.max_exemplars)
        core_cost = pool.cost_of(core)
        core_groups = {int(g) for g in pool.groups[core] if g >= 0} if core else set()
        # the core is the declared shared prefix: a latency budget (new_token_capacity) binds the rest only
        sub_request = replace(request, capacity=min(request.capacity - core_cost, request.new_token_capacity),
                              exclude_ids=request.exclude_ids | frozenset(pool.ids[i] for i in core))
        idx, _ = candidates(pool, sub_request, self.knn_k)
        slots = self.max_exemplars - len(core)
        chosen, sol = (self._solve(pool, sub_request, idx, sims, sims[idx], sub_request.capacity, slots,
                                   paid_groups=core_groups)
                       if slots > 0 and idx.size else ([], None))
        return make_selection(pool, request, chosen, sims, prefix=core,
                              status=sol.status if sol else "ok", relaxed=sol.relaxed if sol else (),
                              reason=sol.reason if sol else "", solution=sol)
