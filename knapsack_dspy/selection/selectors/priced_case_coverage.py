"""Priced case coverage: case coverage with a price on every prompt token -- the package's default selector.

``case_coverage`` (``case_coverage.py``) with ``token_price`` = ``DEFAULT_TOKEN_PRICE`` instead of 0: an exemplar
is taken only when what it is expected to add (its kind's probability the first time its kind is shown, its
nearness to the query) is worth more than its tokens at that price, so a prompt holds fewer, shorter exemplars
when they add little. Everything else -- the value, the exact knapsack, the budget and M -- is case coverage's;
``selector="priced_case_coverage"`` selects exactly what ``selector="case_coverage"`` with
``selector_params={"token_price": 0.004}`` does.

The price was chosen on the TAT-QA exemplar pool alone, cross-fitted (``experiments/tokens/token_price_fit.py``), and
frozen before the tokens run measured it on 342 development questions no run had answered
(docs/selection_objective.md, "Pre-registered: tokens"; docs/results.md, "Tokens"). It is a value per token of
the selection's token counter: with another model's tokenizer or an exemplar format of very different length,
refit it (``selector_params={"token_price": ...}``) or use ``case_coverage`` (no price).
"""

from __future__ import annotations

from knapsack_dspy.selection.attribute_classifier import KIND
from knapsack_dspy.selection.knapsack import DEFAULT_TIME_LIMIT, DEFAULT_WORK_LIMIT
from knapsack_dspy.selection.selectors.case_coverage import CaseCoverageSelector

__all__ = ["DEFAULT_TOKEN_PRICE", "PricedCaseCoverageSelector"]

#: value per prompt token: chosen on the TAT-QA pool, cross-fitted (experiments/tokens/token_price_fit.py)
DEFAULT_TOKEN_PRICE = 0.004


class PricedCaseCoverageSelector(CaseCoverageSelector):
    """``CaseCoverageSelector`` whose ``token_price`` defaults to ``DEFAULT_TOKEN_PRICE`` (see the module
    docstring); the parameters are case coverage's."""

    name = "priced_case_coverage"

    def __init__(self, max_exemplars: int = 8, kind: str = KIND, similarity_weight: float = 0.5,
                 temperature: float = 0.05, token_price: float = DEFAULT_TOKEN_PRICE, solver: str = "knapsack",
                 knn_k: int | None = 200, C: float = 16.0, time_limit: float = DEFAULT_TIME_LIMIT,
                 work_limit: int = DEFAULT_WORK_LIMIT):
        super().__init__(max_exemplars, kind=kind, similarity_weight=similarity_weight, temperature=temperature,
                         token_price=token_price, solver=solver, knn_k=knn_k, C=C, time_limit=time_limit,
                         work_limit=work_limit)
