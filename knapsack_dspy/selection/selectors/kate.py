"""KATE (Liu et al. 2022): the M nearest neighbours of the query; ignores the budget by default."""

from __future__ import annotations

import numpy as np

from knapsack_dspy.selection.selectors.base import RankingSelector


class KATESelector(RankingSelector):
    name = "kate"

    def rank(self, request, idx, sims):
        return idx[np.lexsort((idx, -sims[idx]))]
