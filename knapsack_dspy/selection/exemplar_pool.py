"""The exemplar pool and one selection request, as plain numpy data (no DSPy).

Selectors see only these: what each candidate costs (prompt tokens), how it embeds, its attributes
(modality, answer type, document id, ...), and for one query its embedding, the token capacity left
for exemplars and the attribute values to aim for.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np


@dataclass
class ExemplarPool:
    ids: list[str]
    embeddings: np.ndarray  # (n, d), unit rows
    costs: np.ndarray  # (n,), prompt tokens each exemplar adds
    attributes: dict[str, np.ndarray] = field(default_factory=dict)  # name -> (n,) array of str
    doc_ids: np.ndarray | None = None  # (n,) str; exemplars from the query's own document are excluded

    def __post_init__(self):
        n = len(self.ids)
        self.embeddings = np.asarray(self.embeddings, dtype=np.float32)
        self.costs = np.asarray(self.costs, dtype=float)
        if self.embeddings.ndim != 2 or self.embeddings.shape[0] != n:
            raise ValueError(f"embeddings must have shape ({n}, d), got {self.embeddings.shape}")
        if self.costs.shape != (n,):
            raise ValueError(f"costs must have shape ({n},), got {self.costs.shape}")
        if len(set(self.ids)) != n:
            raise ValueError("exemplar pool ids must be unique")
        self.attributes = {k: np.asarray([str(x) for x in v]) for k, v in self.attributes.items()}
        for name, values in self.attributes.items():
            if values.shape != (n,):
                raise ValueError(f"attribute {name!r} has {values.shape[0]} values for {n} exemplars")
        if self.doc_ids is not None:
            self.doc_ids = np.asarray([str(x) for x in self.doc_ids])
        self._index = {i: k for k, i in enumerate(self.ids)}

    def __len__(self) -> int:
        return len(self.ids)

    def index_of(self, ids: Sequence[str]) -> list[int]:
        missing = [i for i in ids if i not in self._index]
        if missing:
            raise KeyError(f"exemplar ids not in the pool: {missing[:5]}")
        return [self._index[i] for i in ids]

    def similarities(self, query_embedding: np.ndarray) -> np.ndarray:
        return self.embeddings @ np.asarray(query_embedding, dtype=np.float32)


@dataclass
class SelectionRequest:
    """One query: where it embeds, how many tokens exemplars may use, which attributes to aim for."""

    embedding: np.ndarray
    capacity: float = float("inf")  # tokens available for exemplars (budget - query prompt - output reserve)
    target_attributes: Mapping[str, str] = field(default_factory=dict)  # predicted (or gold) attribute values
    exclude_ids: frozenset[str] = frozenset()
    doc_id: str | None = None  # exemplars sharing this document id are excluded
    seed: int = 0  # for randomised selectors: the same request gives the same selection
    key: str = ""  # what identifies the query for seeded randomness (its text); "" = its embedding's bytes


@dataclass(frozen=True)
class Selection:
    """Chosen pool indices in prompt order (most similar last, closest to the question)."""

    indices: tuple[int, ...]
    total_cost: float
    within_budget: bool
    status: str = "ok"
    relaxed: tuple[str, ...] = ()
    reason: str = ""

    def as_dict(self, pool: ExemplarPool) -> dict:
        return {"ids": [pool.ids[i] for i in self.indices], "total_cost": self.total_cost,
                "within_budget": self.within_budget, "status": self.status, "relaxed": list(self.relaxed),
                "reason": self.reason}


def eligible_mask(pool: ExemplarPool, request: SelectionRequest) -> np.ndarray:
    """Candidates allowed for this query (not excluded, not from the query's own document)."""
    mask = np.ones(len(pool), dtype=bool)
    if request.exclude_ids:
        for i in pool.index_of([x for x in request.exclude_ids if x in pool._index]):
            mask[i] = False
    if request.doc_id and pool.doc_ids is not None:  # "" or None: no document known, nothing to exclude
        mask &= pool.doc_ids != str(request.doc_id)
    return mask


def eligible(pool: ExemplarPool, request: SelectionRequest, indices) -> list[int]:
    """``indices`` without the query itself, excluded ids and exemplars from the query's own document."""
    mask = eligible_mask(pool, request)
    return [int(i) for i in indices if mask[int(i)]]


def prompt_order(indices, similarities: np.ndarray) -> tuple[int, ...]:
    """Order exemplars least similar first, so the most similar sits next to the question (as SEER)."""
    return tuple(int(i) for i in sorted(indices, key=lambda i: (similarities[i], -i)))


def make_selection(pool: ExemplarPool, request: SelectionRequest, indices, similarities, status="ok",
                   relaxed=(), reason="") -> Selection:
    ordered = prompt_order(indices, similarities)
    total = float(pool.costs[list(ordered)].sum()) if ordered else 0.0
    return Selection(ordered, total, total <= request.capacity + 1e-9, status, tuple(relaxed), reason)
