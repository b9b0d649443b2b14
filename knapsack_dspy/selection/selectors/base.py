"""The selector contract: parameters in ``__init__``, learned state from ``fit``, choices from ``select``.

As in scikit-learn, ``__init__`` only stores its arguments (``get_params`` reads them back), ``fit``
learns whatever the selector needs from the pool (and validation queries), and ``get_state`` /
``set_state`` round-trip the learned part through JSON-compatible data, so a compiled program can be
saved without pickle.
"""

from __future__ import annotations

import inspect
import zlib
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import numpy as np

from knapsack_dspy.errors import KnapsackDspyError
from knapsack_dspy.selection import ann_index
from knapsack_dspy.selection.exemplar_pool import (
    ExemplarPool,
    Selection,
    SelectionRequest,
    eligible,
    eligible_among,
    eligible_mask,
    make_selection,
    query_values,
)
from knapsack_dspy.selection.query_similarity import query_similarities

if TYPE_CHECKING:  # what knapsack_problem returns (loaded by the selectors that expose one)
    from knapsack_dspy.selection.demo_knapsack import DemoKnapsack

#: How a query's target attributes can be obtained (``SelectionConfig.attribute_source``): a classifier on the
#: embeddings trained on the pool labels, an LM prediction, the gold labels (oracle runs), or none.
ATTRIBUTE_SOURCES = ("classifier", "gold", "lm", "none")
#: When a selector chooses: per query at inference, once at compile time for every query, or both.
MODES = ("per_query", "static", "hybrid")
#: What ``fit`` needs besides the pool (``ExemplarSelector.fit_on``).
FIT_ON_VALIDATION_QUERIES = "validation_queries"  # fit(pool, val_embeddings=(n, d) array, capacity=tokens)
FIT_ON_SCORING_FUNCTION = "scoring_function"  # fit(pool, score_fn=f(pool indices) -> float, capacity=tokens)
FIT_ON = (None, FIT_ON_VALIDATION_QUERIES, FIT_ON_SCORING_FUNCTION)


_PARAM_NAMES: dict[type, tuple[str, ...]] = {}  # ExemplarSelector.param_names, per class


class NotFittedError(KnapsackDspyError, RuntimeError):
    """``select`` was called on a selector that needs ``fit`` first."""


class ExemplarSelector:
    """Base class. Subclasses set ``name`` and implement ``select``; ``fit`` is optional.

    A selector declares its behaviour in class attributes, which is all the rest of the package reads
    (nothing outside the registry looks at a selector's name):

    - ``needs_fit``: ``fit`` must run (at compile time) before ``select``;
    - ``fit_on``: what ``fit`` needs besides the pool: ``None`` (the pool alone),
      ``FIT_ON_VALIDATION_QUERIES`` (``val_embeddings``: the validation queries' embeddings, and
      ``capacity``: the exemplar tokens a typical validation prompt leaves) or ``FIT_ON_SCORING_FUNCTION``
      (``score_fn(pool indices) -> float``: how good a candidate set is on the validation queries, and
      ``capacity``); both mean the compile needs validation queries;
    - ``mode``: ``"per_query"``, ``"static"`` (one set chosen at compile time) or ``"hybrid"``;
    - ``uses_attributes``: ``request.target_attributes`` matters (so they are predicted per query);
    - ``default_attribute_source``: how target attributes are obtained unless the config says otherwise;
    - ``selects_demos``: ``False`` for a selector that sends no exemplars by design (``no_demos``), so an empty
      selection is not reported as a problem;
    - ``pool_attributes``: pool attributes ``fit`` / ``select`` read besides the configured ones (the pool carries
      them: ``SelectExemplars.fit`` takes each from the examples' field of that name);
    - ``fit_reads_capacity``: ``fit`` takes ``capacity``, the exemplar tokens a typical query's prompt leaves
      (compile measures it on a sample of queries: ``case_coverage`` reads its token price from the pool at it);
    - ``respects_budget``: its selections stay within the request's capacity (``False`` for the baselines that
      ignore the token budget by design, as SEER's KATE and random; ``selector_checks.check_selector`` holds a
      selector to what it declares).

    Parameters are the ``__init__`` arguments (``get_params`` reads them back); ``SelectionConfig`` checks
    its ``selector_params`` against them. A selector whose choice is a knapsack may expose it per query
    (``knapsack_problem``), so that one knapsack can choose its demos and a call's evidence pieces together.
    """

    name = "base"
    needs_fit = False
    fit_on: str | None = None
    mode = "per_query"
    uses_attributes = False
    default_attribute_source = "classifier"
    selects_demos = True
    pool_attributes: tuple[str, ...] = ()
    fit_reads_capacity = False
    respects_budget = True

    def __init__(self, max_exemplars: int = 8):
        self.max_exemplars = max_exemplars

    # -- scikit-learn style parameters -------------------------------------------------------------
    @classmethod
    def param_names(cls) -> list[str]:
        """The selector's parameters: the ``__init__`` arguments of its class and its bases (read once per class:
        every ``SelectionConfig`` checks its settings against them)."""
        known = _PARAM_NAMES.get(cls)
        if known is None:
            known = _PARAM_NAMES[cls] = tuple(cls._init_parameters())
        return list(known)

    @classmethod
    def _init_parameters(cls) -> list[str]:
        names: list[str] = []
        klass: Any  # each class of the MRO: its own __init__ or the one it inherits
        for klass in cls.__mro__:
            if klass is object:
                continue
            sig = inspect.signature(klass.__init__)
            for p in list(sig.parameters.values())[1:]:
                if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                    continue
                if p.name not in names:
                    names.append(p.name)
        return names

    def get_params(self) -> dict:
        return {name: getattr(self, name) for name in self.param_names()}

    def set_params(self, **params) -> ExemplarSelector:
        valid = set(self.param_names())
        for key, value in params.items():
            if key not in valid:
                raise ValueError(f"{type(self).__name__} has no parameter {key!r}; valid: {sorted(valid)}")
            setattr(self, key, value)
        return self

    def validate_params(self) -> None:
        if isinstance(self.max_exemplars, bool) or not isinstance(self.max_exemplars, (int, np.integer)) \
                or self.max_exemplars < 0:
            raise ValueError(f"max_exemplars must be a non-negative integer, got {self.max_exemplars!r}")

    # -- learned state ---------------------------------------------------------------------------------
    def fit(self, pool: ExemplarPool, **kwargs) -> ExemplarSelector:
        self.validate_params()
        return self

    def get_state(self) -> dict:
        return {}

    def set_state(self, state: dict) -> ExemplarSelector:
        return self

    # -- selection -------------------------------------------------------------------------------------
    def select(self, pool: ExemplarPool, request: SelectionRequest) -> Selection:
        raise NotImplementedError

    def knapsack_problem(self, pool: ExemplarPool, request: SelectionRequest) -> DemoKnapsack | None:
        """This query's demo selection as a knapsack instance (``selection.demo_knapsack.DemoKnapsack``) that
        ``select`` solves, for a larger problem to hold (the joint choice of demos and evidence pieces); ``None``
        (the default): the selector exposes none, and such a choice falls back to the selector's demos first."""
        return None

    def __repr__(self) -> str:
        params = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items())
        return f"{type(self).__name__}({params})"


class RankingSelector(ExemplarSelector):
    """Ranks the eligible candidates (``rank``) and takes the first M; ``respect_budget=True`` skips those that
    no longer fit the capacity, ``False`` (the baselines' setting in SEER) ignores the token budget."""

    def __init__(self, max_exemplars: int = 8, respect_budget: bool = False):
        super().__init__(max_exemplars)
        self.respect_budget = respect_budget

    @property
    def respects_budget(self) -> bool:  # as its parameter says
        return bool(self.respect_budget)

    @respects_budget.setter
    def respects_budget(self, value: bool) -> None:
        self.respect_budget = bool(value)

    def rank(self, request: SelectionRequest, idx: np.ndarray, sims: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def select(self, pool, request):
        idx, sims = candidates(pool, request)
        order = self.rank(request, idx, sims)
        if self.respect_budget:
            chosen = greedy_fill(order, pool, request.capacity, self.max_exemplars)
        else:
            chosen = list(order[: self.max_exemplars])
        return make_selection(pool, request, chosen, sims)


def request_rng(request: SelectionRequest, salt: str = "") -> np.random.Generator:
    """A generator determined by the request's seed and query (its ``key``, the query text), so selections
    are reproducible. Without a key the embedding's bytes stand in; those change in the last bits with the
    batch the text was encoded in or the torch build, and with them every draw."""
    identity = request.key.encode() if request.key else np.asarray(request.embedding, dtype=np.float32).tobytes()
    return np.random.default_rng([int(request.seed), zlib.crc32(identity + b"\x00" + salt.encode())])


def within_new_tokens(selector: ExemplarSelector, request: SelectionRequest) -> SelectionRequest:
    """The request a selector answers under a latency budget: a per-query selector's exemplars are all new
    tokens, so its capacity is also capped by ``request.new_token_capacity``; static sets and hybrid cores are the
    declared shared prefix, and those selectors apply the cap themselves (hybrid: to its per-query part)."""
    if selector.mode != "per_query" or request.new_token_capacity >= request.capacity:
        return request
    return replace(request, capacity=request.new_token_capacity)


class CandidateValues:
    """The similarities of a prefilter's candidates, indexed by pool index like the full array (an int or an
    array of candidate indices), without a value per pool exemplar."""

    def __init__(self, indices: np.ndarray, values: np.ndarray):
        order = np.argsort(indices, kind="stable")
        self._indices = np.asarray(indices, dtype=np.int64)[order]
        self._values = np.asarray(values)[order]

    def __getitem__(self, key):
        positions = np.searchsorted(self._indices, key)
        if np.any(np.take(self._indices, positions, mode="clip") != key):
            raise KeyError("a value outside the prefilter's candidates was asked for")
        return self._values[positions]


def approximate_candidates(pool: ExemplarPool, request: SelectionRequest, knn_k: int, reserve: int = 0):
    """The ``knn_k`` nearest eligible exemplars by the pool's nearest-neighbour index (exact similarities of the
    ones it returns), with the ``reserve`` cheapest of the other eligible ones it fetched (an exemplar's cost
    with its group's shared cost), or ``None`` when the index cannot answer (too many of its hits excluded).

    Why a reserve (SEER's selector asks for ``ann_index.CHEAP_RESERVE``): the index misses a few of the true
    ``knn_k`` nearest, and when one of them is a cheap exemplar, a knapsack over the rest fits one exemplar fewer
    (its cheap members are what let the last one in); a cheap exemplar just past the ``knn_k`` nearest takes its
    place. Exact search (a small pool) keeps the ``knn_k`` nearest alone."""
    fetch = 2 * knn_k + len(request.exclude_ids)
    found = np.sort(eligible_among(pool, request, pool.index.search(request.embedding, fetch)))
    if found.size < knn_k:
        return None
    values = query_similarities(pool.embeddings[found], request.embedding)
    if found.size > knn_k:
        order = np.argsort(-values, kind="stable")
        keep, others = order[:knn_k], order[knn_k:]
        if reserve > 0:
            cheap = others[np.argsort(pool.alone_costs(found[others]), kind="stable")[:reserve]]
            keep = np.concatenate([keep, cheap])
        keep = np.sort(keep)
        found, values = found[keep], values[keep]
    return found, CandidateValues(found, values)


def uses_index(pool: ExemplarPool, knn_k: int | None, has_values: bool = False) -> bool:
    """Whether :func:`candidates` asks the pool's nearest-neighbour index for the ``knn_k`` nearest: a pool of at
    least ``ANN_MIN_POOL`` exemplars with an index, no value function, and ``knn_k`` no more than the k its
    ``nprobe`` was calibrated for (its recall is measured for that k only)."""
    if knn_k is None or has_values or pool.index is None or len(pool) < ann_index.ANN_MIN_POOL:
        return False
    return knn_k <= int((getattr(pool.index, "calibration", None) or {}).get("k") or 0)


def candidate_search(selector: ExemplarSelector, pool: ExemplarPool, has_values: bool = False) -> str:
    """One line on how ``selector`` finds a query's candidates in ``pool`` (the compile report): the index's
    backend, cells and calibrated recall (``ann_index.describe``), or exact search."""
    knn_k = getattr(selector, "knn_k", None)
    if knn_k is None:
        return f"every eligible exemplar of {len(pool):,} (the selector has no candidate count): exact search"
    if uses_index(pool, knn_k, has_values):
        reserve = int(getattr(selector, "cheap_reserve", 0))
        also = f" and the {reserve} cheapest of the rest it fetched" if reserve else ""
        return f"the {knn_k} nearest{also}, by the " + ann_index.describe(pool.index, len(pool))
    if pool.index is not None and len(pool) >= ann_index.ANN_MIN_POOL:
        why = ("a value function scores every exemplar" if has_values else
               f"the index is calibrated for the {pool.index.calibration.get('k')} nearest")
        return f"the {knn_k} nearest by exact search ({why})"
    return f"the {knn_k} nearest by " + ann_index.describe(pool.index, len(pool))


def candidates(pool: ExemplarPool, request: SelectionRequest, knn_k: int | None = None, reserve: int = 0):
    """(eligible indices, similarities to the query), optionally cut to the ``knn_k`` nearest: exactly, or, when
    :func:`uses_index`, by the pool's nearest-neighbour index, with ``reserve`` cheap ones beside them
    (:func:`approximate_candidates`; the similarities then cover the candidates only: :class:`CandidateValues`);
    when the index cannot answer (too many of its hits excluded), exactly."""
    if knn_k is not None and uses_index(pool, knn_k, request.values is not None):
        found = approximate_candidates(pool, request, knn_k, reserve)
        if found is not None:
            return found
    sims = query_values(pool, request)
    idx = np.flatnonzero(eligible_mask(pool, request))
    if knn_k is not None and idx.size > knn_k:
        top = np.argpartition(-sims[idx], knn_k - 1)[:knn_k]
        idx = np.sort(idx[top])
    return idx, sims


def greedy_fill(order, pool: ExemplarPool, capacity: float, limit: int, paid_groups=()) -> list[int]:
    """Take items in the given order, skipping those that no longer fit, up to ``limit`` items (an item's cost
    includes its group's shared cost unless the group is already in: ``paid_groups`` or an earlier item)."""
    chosen: list[int] = []
    used, paid = 0.0, {int(g) for g in paid_groups}
    for i in order:
        if len(chosen) >= limit:
            break
        g = int(pool.groups[i])
        extra = float(pool.costs[i]) + (float(pool.group_costs[g]) if g >= 0 and g not in paid else 0.0)
        if used + extra <= capacity + 1e-9:
            chosen.append(int(i))
            used += extra
            if g >= 0:
                paid.add(g)
    return chosen


__all__ = ["ATTRIBUTE_SOURCES", "FIT_ON", "FIT_ON_SCORING_FUNCTION", "FIT_ON_VALIDATION_QUERIES", "MODES",
           "CandidateValues", "ExemplarSelector", "NotFittedError", "RankingSelector", "approximate_candidates",
           "candidate_search", "candidates", "eligible", "greedy_fill", "make_selection", "query_values", "request_rng",
           "uses_index", "within_new_tokens"]
