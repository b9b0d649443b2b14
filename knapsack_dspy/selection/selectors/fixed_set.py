"""Fixed-set baseline: one set for every query, the best of N random sets on validation queries."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from knapsack_dspy.selection.selectors.base import (
    FIT_ON_SCORING_FUNCTION,
    ExemplarSelector,
    NotFittedError,
    eligible,
    greedy_fill,
    make_selection,
    query_values,
)


class FixedSetSelector(ExemplarSelector):
    """``fit(pool, score_fn=..., capacity=...)`` draws ``n_candidates`` random sets of M exemplars that fit
    ``capacity`` and keeps the one ``score_fn(indices) -> float`` rates highest (the teleprompter passes a
    validation-set score). Without a ``score_fn`` the first draw is kept."""

    name = "fixed"
    needs_fit = True
    fit_on = FIT_ON_SCORING_FUNCTION
    mode = "static"

    def __init__(self, max_exemplars: int = 8, n_candidates: int = 5, seed: int = 0, respect_budget: bool = True):
        super().__init__(max_exemplars)
        self.n_candidates = n_candidates
        self.seed = seed
        self.respect_budget = respect_budget

    def fit(self, pool, score_fn: Callable[[Sequence[int]], float] | None = None, capacity: float = float("inf"),
            **kwargs):
        self.validate_params()
        rng = np.random.default_rng(self.seed)
        best: list[int] = []
        best_score, self.candidate_scores_ = -np.inf, []
        for k in range(max(1, self.n_candidates)):
            draw = greedy_fill(rng.permutation(len(pool)), pool, capacity, self.max_exemplars)
            score = float(score_fn(draw)) if score_fn is not None else 0.0
            self.candidate_scores_.append({"ids": [pool.ids[i] for i in draw], "score": score})
            if k == 0 or score > best_score:  # the first draw, then any better one
                best, best_score = draw, score
            if score_fn is None:
                break
        self.fixed_ids_ = [pool.ids[i] for i in best]
        return self

    def get_state(self):
        return {"fixed_ids": list(getattr(self, "fixed_ids_", [])),
                "candidates": list(getattr(self, "candidate_scores_", []))}

    def set_state(self, state):
        if state.get("fixed_ids") is not None:
            self.fixed_ids_ = list(state["fixed_ids"])
        self.candidate_scores_ = list(state.get("candidates") or [])
        return self

    def select(self, pool, request):
        if not hasattr(self, "fixed_ids_"):
            raise NotFittedError(f"{self.name} selector: call fit() (or compile) first")
        sims = query_values(pool, request)
        idx = eligible(pool, request, pool.index_of(self.fixed_ids_))  # never the query or its own document
        if self.respect_budget:
            idx = greedy_fill(idx, pool, request.capacity, self.max_exemplars)
        # one set, one order for every query (its drawn order): consecutive prompts share it as a prefix
        return make_selection(pool, request, [], sims, prefix=idx)
