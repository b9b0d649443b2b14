"""CSP baseline: a random set that satisfies every constraint (budget, M, attribute templates).

A constraint-satisfaction draw: the same ILP as SEER with random values instead of similarities, so the
set is feasible but not chosen by similarity. The draw is over the same candidates SEER solves over, the
``knn_k`` (default 200) pool items nearest the query: on a larger pool that pre-filter does carry some
relevance (TAT-QA's pool has 1,164); pass ``knn_k`` >= the pool size for a draw from the whole pool.
"""

from __future__ import annotations

from knapsack_dspy.selection.selectors.base import candidates, make_selection, request_rng
from knapsack_dspy.selection.selectors.seer import KnapsackSelector


class CSPSelector(KnapsackSelector):
    name = "csp"
    cheap_reserve = 0  # a random draw over the candidates: a reserve of cheap ones would be drawn more often

    def select(self, pool, request):
        idx, sims = candidates(pool, request, self.knn_k)
        # values in (1, 2): every feasible item is worth taking, so the draw fills up to M
        values = 1.0 + request_rng(request, self.name).random(idx.size)
        chosen, sol = self._solve(pool, request, idx, sims, values, request.capacity, self.max_exemplars)
        return make_selection(pool, request, chosen, sims, status=sol.status, relaxed=sol.relaxed,
                              reason=sol.reason, solution=sol)
