"""The selector contract: parameters in ``__init__``, learned state from ``fit``, choices from ``select``.

As in scikit-learn, ``__init__`` only stores its arguments (``get_params`` reads them back), ``fit``
learns whatever the selector needs from the pool (and validation queries), and ``get_state`` /
``set_state`` round-trip the learned part through JSON-compatible data, so a compiled program can be
saved without pickle.
"""

from __future__ import annotations

import inspect
import zlib

import numpy as np

from knapsack_dspy.selection.exemplar_pool import (
    ExemplarPool,
    Selection,
    SelectionRequest,
    eligible,
    eligible_mask,
    make_selection,
)


class NotFittedError(RuntimeError):
    """``select`` was called on a selector that needs ``fit`` first."""


class ExemplarSelector:
    """Base class. Subclasses set ``name`` and implement ``select``; ``fit`` is optional."""

    name = "base"
    needs_fit = False
    uses_attributes = False  # whether ``request.target_attributes`` matters

    def __init__(self, max_exemplars: int = 8):
        self.max_exemplars = max_exemplars

    # -- scikit-learn style parameters -------------------------------------------------------------
    @classmethod
    def _param_names(cls) -> list[str]:
        names = []
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
        return {name: getattr(self, name) for name in self._param_names()}

    def set_params(self, **params) -> ExemplarSelector:
        valid = set(self._param_names())
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

    def __repr__(self) -> str:
        params = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items())
        return f"{type(self).__name__}({params})"


def request_rng(request: SelectionRequest, salt: str = "") -> np.random.Generator:
    """A generator determined by the request's seed and query (its ``key``, the query text), so selections
    are reproducible. Without a key the embedding's bytes stand in; those change in the last bits with the
    batch the text was encoded in or the torch build, and with them every draw."""
    identity = request.key.encode() if request.key else np.asarray(request.embedding, dtype=np.float32).tobytes()
    return np.random.default_rng([int(request.seed), zlib.crc32(identity + b"\x00" + salt.encode())])


def candidates(pool: ExemplarPool, request: SelectionRequest, knn_k: int | None = None):
    """(eligible indices, similarities to the query), optionally cut to the ``knn_k`` nearest."""
    sims = pool.similarities(request.embedding)
    idx = np.flatnonzero(eligible_mask(pool, request))
    if knn_k is not None and idx.size > knn_k:
        top = np.argpartition(-sims[idx], knn_k - 1)[:knn_k]
        idx = np.sort(idx[top])
    return idx, sims


def greedy_fill(order, costs: np.ndarray, capacity: float, limit: int) -> list[int]:
    """Take items in the given order, skipping those that no longer fit, up to ``limit`` items."""
    chosen, used = [], 0.0
    for i in order:
        if len(chosen) >= limit:
            break
        if used + costs[i] <= capacity + 1e-9:
            chosen.append(int(i))
            used += costs[i]
    return chosen


__all__ = ["ExemplarSelector", "NotFittedError", "candidates", "eligible", "greedy_fill", "make_selection", "request_rng"]
