"""Case coverage: exemplars chosen for the solution patterns the query is likely to need, by an exact knapsack.

SEER's knapsack maximises the *sum* of similarities, so with room to spare it trades the one most relevant
exemplar for several shorter, less similar ones, and it finds the case that solves the query less often than a
nearest-first greedy. This selector values a set of exemplars by what it is likely to teach:

    value(S) = sum over kinds k shown in S of  P(k | query)                          (coverage, once per kind)
             + similarity_weight * sum over i in S of  exp((s_i - s_max) / temperature)   (the nearest first)
             - token_price * sum over i in S of  cost_i                              (optional: tokens cost value)

- an exemplar's *kind* is its solution pattern: the pool attribute ``kind`` (whoever builds the pool labels it:
  the document-QA tasks give a program's template, ``subtract(X_0,X_1),divide(#0,X_1)``, else the answer type,
  ``answer_type:span``; an exemplar without one has the kind ``""``, none); ``P(k | query)`` comes
  from a classifier trained at fit time on the pool itself (a multinomial logistic regression on the embeddings,
  the pool's kinds as labels: learned case relevance, as the case-based reasoning paper trains its retriever on
  program similarity). A second exemplar of a kind adds only its similarity term: diminishing returns, inside
  the ILP (``solve_knapsack``'s coverage values), optimised exactly under the token budget and M;
- ``s_i`` is the similarity to the query (``s_max`` the nearest candidate's), so among exemplars of one kind,
  and beyond the likely kinds, the nearest is worth the most (KATE's order, not SEER's sum);
- ``token_price`` > 0: an exemplar is included only when what it adds exceeds the price of its tokens.

``solver="greedy"`` optimises the same value greedily (largest marginal value first, skipping what does not
fit): the knapsack's own baseline. A pool without kinds (no ``kind`` labels: an arbitrary DSPy program whose
pool nobody labelled) falls back to the similarity term alone -- the nearest first, under the budget -- and says so (a
``CaseCoverageFallback`` warning at fit; ``fallback`` in the state).

**Kinds derived from the pool** (``attribute_classifier.derive_kinds``; ``SelectionConfig.derive_kinds``, on by
default, makes ``SelectExemplars.fit`` call it when the pool carries no ``kind``):

- **what is clustered**: each demo's *outputs* (the predictor's output fields, e.g. a ``ChainOfThought``'s
  reasoning and answer: the solution it teaches, not the question it answers), embedded with the selection's
  embedder, L2-normalised;
- **how**: k-means (scikit-learn, k-means++ seeded by ``seed``, 4 restarts), fitted on the pool only; a demo's
  kind is its cluster, ``derived:0`` the largest, ``derived:1`` the next, ...;
- **k**: ``round(sqrt(n / 8))`` for a pool of ``n`` demos, at least 2 and at most ``MAX_KINDS`` (16): about
  ``sqrt(8 n)`` demos per kind, so each kind has enough exemplars for ``P(kind | query)`` (a logistic regression
  on the query embeddings, case coverage's classifier) to be learned, and more kinds than a prompt holds
  exemplars, so covering kinds is a choice;
- **nothing is derived** for a pool of fewer than ``MIN_POOL`` (16) demos, or whose outputs are all empty or all
  alike: the selector then falls back to similarity alone and says so (``CaseCoverageFallback``).
"""

from __future__ import annotations

import dataclasses
import warnings

import numpy as np

from knapsack_dspy.errors import KnapsackDspyWarning
from knapsack_dspy.selection.attribute_classifier import KIND, AttributeClassifier
from knapsack_dspy.selection.demo_knapsack import DemoKnapsack
from knapsack_dspy.selection.knapsack import DEFAULT_TIME_LIMIT, DEFAULT_WORK_LIMIT
from knapsack_dspy.selection.selectors.base import ExemplarSelector, NotFittedError, candidates, make_selection
from knapsack_dspy.selection.token_price import PriceFit, fit_token_price, is_auto

__all__ = ["KIND", "SOLVERS", "CaseCoverageFallback", "CaseCoverageSelector", "kind_labels"]

SOLVERS = ("knapsack", "greedy")


class CaseCoverageFallback(KnapsackDspyWarning, UserWarning):
    """The pool has no kinds: case coverage selects by similarity alone (the nearest first, under the budget)."""


def kind_labels(pool, kind: str = KIND) -> np.ndarray:
    """Each pool exemplar's kind: its attribute ``kind``, ``""`` (none) where it has none. Column operations, no
    loop over the pool (a store's pool of 10^6 labels at its first query)."""
    own = pool.attributes.get(kind)
    if own is None:
        return np.full(len(pool), "")
    return np.asarray(own, dtype=str)


class CaseCoverageSelector(ExemplarSelector):
    """See the module docstring. Parameters: ``max_exemplars`` (M), ``kind`` (the pool attribute naming an
    exemplar's solution pattern), ``similarity_weight`` and ``temperature`` (the nearest-first term),
    ``token_price`` (value per prompt token, >= 0), ``solver`` ("knapsack" or "greedy"), ``knn_k`` (candidates:
    the nearest ``knn_k``), ``C`` (the kind classifier's inverse regularisation), ``work_limit`` /
    ``time_limit`` (the knapsack's limits: ``solve_knapsack``)."""

    name = "case_coverage"
    needs_fit = True
    pool_attributes = (KIND,)
    fit_reads_capacity = True  # token_price="auto" reads the price at a typical query's capacity

    def __init__(self, max_exemplars: int = 8, kind: str = KIND, similarity_weight: float = 0.5,
                 temperature: float = 0.05, token_price: float = 0.0, solver: str = "knapsack",
                 knn_k: int | None = 200, C: float = 16.0, time_limit: float = DEFAULT_TIME_LIMIT,
                 work_limit: int = DEFAULT_WORK_LIMIT):
        super().__init__(max_exemplars)
        self.kind = kind
        self.similarity_weight = similarity_weight
        self.temperature = temperature
        self.token_price = token_price
        self.solver = solver
        self.knn_k = knn_k
        self.C = C
        self.time_limit = time_limit
        self.work_limit = work_limit

    def validate_params(self):
        super().validate_params()
        if not isinstance(self.kind, str) or not self.kind:
            raise ValueError(f"kind must be the name of a pool attribute, got {self.kind!r}")
        for name in ("similarity_weight", "token_price"):
            value = getattr(self, name)
            if name == "token_price" and is_auto(value):
                continue
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not np.isfinite(value) or value < 0:
                also = " or 'auto' (read from the pool)" if name == "token_price" else ""
                raise ValueError(f"{name} must be a number >= 0{also}, got {value!r}")
        if isinstance(self.temperature, bool) or not isinstance(self.temperature, (int, float)) \
                or not self.temperature > 0:
            raise ValueError(f"temperature must be a number > 0, got {self.temperature!r}")
        if self.solver not in SOLVERS:
            raise ValueError(f"solver must be one of {SOLVERS}, got {self.solver!r}")
        if self.knn_k is not None and (isinstance(self.knn_k, bool) or not isinstance(self.knn_k, int)
                                       or self.knn_k < 1):
            raise ValueError(f"knn_k must be a positive integer or None, got {self.knn_k!r}")
        if isinstance(self.C, bool) or not isinstance(self.C, (int, float)) or not self.C > 0:
            raise ValueError(f"C must be a number > 0, got {self.C!r}")

    # -- learned state -------------------------------------------------------------------------------------
    def fit(self, pool, capacity: float | None = None, **kwargs):
        """Learn the kind classifier from ``pool``; with ``token_price="auto"``, read the price from the pool too
        (``selection/token_price.py``; ``capacity``: the exemplar tokens a typical query leaves, default the
        pool's cost of ``max_exemplars`` median exemplars)."""
        self.validate_params()
        labels = kind_labels(pool, self.kind)
        known = labels != ""
        self.fallback_ = not known.any()
        self.classifier_ = None
        self.price_fit_ = None
        if self.fallback_:
            warnings.warn(f"{self.name}: no pool exemplar has a {self.kind!r} label: selecting by "
                          "similarity alone (the nearest first, under the budget)", CaseCoverageFallback,
                          stacklevel=2)
        else:
            self.classifier_ = AttributeClassifier(C=self.C).fit(pool.embeddings[known], labels[known])
        if is_auto(self.token_price):
            self.price_fit_ = self._fit_price(pool, capacity)
        return self

    def _fit_price(self, pool, capacity: float | None) -> PriceFit:
        if capacity is None or not np.isfinite(capacity):
            capacity = float(self.max_exemplars * np.median(pool.costs)) if len(pool) else 0.0

        def at_price(price: float) -> CaseCoverageSelector:
            params = {**self.get_params(), "token_price": float(price)}
            return CaseCoverageSelector(**{name: params[name] for name in CaseCoverageSelector.param_names()})

        # each half has kinds (fit_token_price falls back before fitting a half without): no fallback warning
        return fit_token_price(pool, at_price, float(capacity), kind=self.kind)

    @property
    def price(self) -> float:
        """The price per prompt token ``select`` uses: ``token_price``, or the one read from the pool ("auto")."""
        if not is_auto(self.token_price):
            return float(self.token_price)
        fitted = getattr(self, "price_fit_", None)
        if fitted is None:
            raise NotFittedError(f"{self.name}: token_price='auto' is read from the pool at fit "
                                 "(KnapsackFewShot.compile)")
        return fitted.price

    def get_state(self) -> dict:
        if not hasattr(self, "fallback_"):
            return {}
        state = {"fallback": bool(self.fallback_),
                 "classifier": None if self.classifier_ is None else self.classifier_.get_state()}
        price_fit: PriceFit | None = getattr(self, "price_fit_", None)
        if price_fit is not None:
            state["price_fit"] = price_fit.as_dict()
        return state

    def set_state(self, state: dict):
        if state:
            self.fallback_ = bool(state.get("fallback"))
            classifier = state.get("classifier")
            self.classifier_ = None if classifier is None else AttributeClassifier.from_state(classifier)
            price_fit = state.get("price_fit")
            self.price_fit_ = None if price_fit is None else PriceFit.from_dict(price_fit)
            if is_auto(self.token_price) and self.price_fit_ is None:
                raise ValueError(f"{self.name}: token_price='auto' but the state holds no price read from the pool")
        return self

    # -- selection -----------------------------------------------------------------------------------------
    def kind_probabilities(self, embedding: np.ndarray) -> dict[str, float]:
        """``P(kind | query)`` for every kind of the pool (empty in the fallback)."""
        if not hasattr(self, "fallback_"):
            raise NotFittedError(f"{self.name} needs fit (KnapsackFewShot.compile) before select")
        if self.classifier_ is None:
            return {}
        probabilities = self.classifier_.predict_proba(np.asarray(embedding)[None, :])[0]
        return dict(zip(self.classifier_.classes_.tolist(), probabilities.tolist(), strict=True))

    def _labels(self, pool) -> np.ndarray:
        """The pool's kind labels, computed once per pool object."""
        cached = self.__dict__.get("_labels_of")
        if cached is None or cached[0] is not pool:
            cached = self._labels_of = (pool, kind_labels(pool, self.kind))
        return cached[1]

    def select(self, pool, request):
        return self.select_at_prices(pool, request, (self.price,))[0]

    def select_at_prices(self, pool, request, prices) -> list:
        """The selection for ``request`` at each price of ``prices`` (the query's candidates, kind probabilities
        and the knapsack's structure computed once): what ``select`` returns with ``token_price`` set to each."""
        unpriced = self.knapsack_problem(pool, request, price=0.0)
        out = []
        for price in prices:
            problem = dataclasses.replace(unpriced, values=unpriced.values - float(price) * unpriced.costs,
                                          token_price=float(price))
            if not len(problem):
                out.append(make_selection(pool, request, [], problem.similarities,
                                          reason="empty selection: no eligible exemplar"))
                continue
            sol = problem.solve(request.capacity)
            chosen = [int(problem.candidates[i]) for i in sol.selected]
            out.append(make_selection(pool, request, chosen, problem.similarities, status=sol.status,
                                      reason=sol.reason, solution=sol))
        return out

    def knapsack_problem(self, pool, request, price: float | None = None) -> DemoKnapsack:
        """The knapsack ``select`` solves for this query (see the module docstring): the ``knn_k`` nearest eligible
        exemplars, valued by their nearness less the token price of their own tokens (``price``, default the
        selector's: ``token_price``, or the one read from the pool), their kinds worth ``P(kind | query)`` once
        each, a document's shared cost paid once."""
        price = self.price if price is None else float(price)
        probabilities = self.kind_probabilities(request.embedding)
        idx, sims = candidates(pool, request, self.knn_k)
        if idx.size == 0:
            return DemoKnapsack(idx, np.zeros(0), np.zeros(0), self.max_exemplars, sims, token_price=price,
                                solver=self.solver)
        s = sims[idx].astype(float)
        nearness = self.similarity_weight * np.exp((s - s.max()) / self.temperature)
        labels = self._labels(pool)[idx] if probabilities else np.full(idx.size, "")
        present = sorted({label for label in labels if label})
        number = {label: k for k, label in enumerate(present)}
        kinds = np.asarray([number.get(label, -1) for label in labels], dtype=int)
        kind_values = np.asarray([probabilities.get(label, 0.0) for label in present])
        groups, group_costs = pool.knapsack_groups(idx)
        return DemoKnapsack(idx, nearness - price * pool.costs[idx], pool.costs[idx], self.max_exemplars, sims,
                            groups=groups, group_costs=group_costs, kinds=kinds if present else None,
                            kind_values=kind_values if present else None, token_price=price, solver=self.solver,
                            time_limit=self.time_limit, work_limit=self.work_limit)
