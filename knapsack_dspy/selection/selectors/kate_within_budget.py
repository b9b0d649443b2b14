"""KATE within budget: the nearest neighbours first, skipping any that does not fit, up to M.

What a user who has a token budget but no knapsack would run: KATE's order (most similar first), each
exemplar taken if it still fits the capacity the query leaves, until M are taken. ``kate`` keeps SEER's
meaning (the M nearest, budget ignored); this is the budget-respecting baseline SEER is compared with.
"""

from __future__ import annotations

from knapsack_dspy.selection.selectors.kate import KATESelector


class KATEWithinBudgetSelector(KATESelector):
    name = "kate_within_budget"

    def __init__(self, max_exemplars: int = 8, respect_budget: bool = True):
        super().__init__(max_exemplars, respect_budget)

    def validate_params(self):
        super().validate_params()
        if self.respect_budget is not True:
            raise ValueError("kate_within_budget always respects the budget (use 'kate' to ignore it)")
