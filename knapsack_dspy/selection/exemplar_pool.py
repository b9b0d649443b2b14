"""The exemplar pool and one selection request, as plain numpy data (no DSPy).

Selectors see only these: what each candidate costs (prompt tokens), how it embeds, its attributes
(modality, answer type, document id, ...), and for one query its embedding, the token capacity left
for exemplars and the attribute values to aim for.

Shared costs: exemplars of one *group* (e.g. questions about one document, which show the same table) can
share part of their cost: in a prompt, the first of them shows the shared part (the table) and the ones
after it refer to it. ``costs[i]`` is then what exemplar i adds without the shared part and
``group_costs[g]`` the shared part, paid once per group in a prompt. Every selector counts a selection's
cost so (:meth:`ExemplarPool.cost_of`), and prompt order keeps a group's exemplars together
(:func:`prompt_order`); an exemplar whose group was shown earlier in the prompt refers to it
(``Selection.shared``), so the count is the prompt's in any order.

Prompt order and prefix reuse: a server's prompt cache (llama.cpp's slot, a provider's prefix caching) reuses
the longest prefix a prompt shares with the one before. Exemplars every query gets (a static set, a hybrid
core) therefore open the prompt in one fixed order (``make_selection(..., prefix=...)``;
``Selection.shared_prefix`` says how many), and the per-query ones follow, least similar first (SEER's order)
or, optionally, in one canonical order over the pool (:func:`canonical_keys`, :func:`in_canonical_order`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from knapsack_dspy.selection.query_similarity import query_similarities


def _str_array(values) -> np.ndarray:
    """``values`` as an array of str (a unicode array, e.g. a pool store's memory-mapped column, as it is)."""
    if isinstance(values, np.ndarray) and values.dtype.kind == "U":
        return values
    return np.asarray([str(x) for x in values])


class ExemplarPool:
    """The exemplars selectors choose from: ``ids``, ``embeddings`` (n, d) with unit rows, ``costs`` (n,) the prompt
    tokens each adds, ``attributes`` (name -> (n,) values, kept as str), ``doc_ids`` (n,) (exemplars from the
    query's own document are excluded; ``None``: none known), ``groups`` (n,) int group ids sharing a cost (-1: none;
    ``None``: no groups) with ``group_costs`` (one shared cost per group, see the module docstring), and ``index``:
    an approximate nearest-neighbour index of the embeddings (``ann_index.IVFIndex``; a large pool's store carries
    one) that SEER's candidate prefilter searches instead of scoring every exemplar. Checked and normalised (arrays)
    when built: a ``ValueError`` names what does not fit."""

    def __init__(self, ids: Sequence[str], embeddings: Any, costs: Any, attributes: Mapping[str, Any] | None = None,
                 doc_ids: Any = None, groups: Any = None, group_costs: Any = None, index: Any = None):
        n = len(ids)
        self.ids = ids
        self.embeddings: np.ndarray = np.asarray(embeddings, dtype=np.float32)
        self.costs: np.ndarray = np.asarray(costs, dtype=float)
        self.index = index
        if self.embeddings.ndim != 2 or self.embeddings.shape[0] != n:
            raise ValueError(f"embeddings must have shape ({n}, d), got {self.embeddings.shape}")
        if self.costs.shape != (n,):
            raise ValueError(f"costs must have shape ({n},), got {self.costs.shape}")
        if len(set(ids)) != n:
            raise ValueError("exemplar pool ids must be unique")
        self.attributes: dict[str, np.ndarray] = {k: _str_array(v) for k, v in dict(attributes or {}).items()}
        for name, values in self.attributes.items():
            if values.shape != (n,):
                raise ValueError(f"attribute {name!r} has {values.shape[0]} values for {n} exemplars")
        self.doc_ids: np.ndarray | None = None if doc_ids is None else _str_array(doc_ids)
        self.group_costs: np.ndarray = np.asarray([] if group_costs is None else group_costs, dtype=float)
        self.groups: np.ndarray = np.full(n, -1, dtype=int) if groups is None else np.asarray(groups)
        if self.groups.shape != (n,) or (n and not np.issubdtype(self.groups.dtype, np.integer)):
            raise ValueError(f"groups must be {n} integer group ids (-1: none), got shape {self.groups.shape}")
        if n and (self.groups.min() < -1 or self.groups.max() >= self.group_costs.size):
            raise ValueError(f"groups hold ids outside [-1, {self.group_costs.size - 1}]")
        if self.group_costs.ndim != 1 or not np.isfinite(self.group_costs).all() or (self.group_costs < 0).any():
            raise ValueError("group_costs must be finite non-negative numbers, one per group")
        self._index = {i: k for k, i in enumerate(ids)}
        # read per query by selectors and prompt order: computed once here, not a pass over the pool per query
        self._has_groups = bool(n and (self.groups >= 0).any())
        # (documents, rows in document order, bounds): built when first needed
        self._doc_rows: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None

    def __len__(self) -> int:
        return len(self.ids)

    def index_of(self, ids: Sequence[str]) -> list[int]:
        missing = [i for i in ids if i not in self._index]
        if missing:
            raise KeyError(f"exemplar ids not in the pool: {missing[:5]}")
        return [self._index[i] for i in ids]

    def similarities(self, query_embedding: np.ndarray) -> np.ndarray:
        return query_similarities(self.embeddings, query_embedding)

    @property
    def has_groups(self) -> bool:
        return self._has_groups

    def rows_of_doc(self, doc_id: str) -> np.ndarray:
        """The pool indices of the exemplars from document ``doc_id`` (ascending; empty when none or when the
        pool has no document ids). The first call indexes the documents (one sort); later calls are a binary
        search."""
        if self.doc_ids is None:
            return np.zeros(0, dtype=np.int64)
        if self._doc_rows is None:
            docs, inverse = np.unique(np.asarray(self.doc_ids), return_inverse=True)
            order = np.argsort(inverse, kind="stable")
            bounds = np.searchsorted(inverse[order], np.arange(len(docs) + 1))
            self._doc_rows = (docs, order.astype(np.int64), bounds)
        docs, order, bounds = self._doc_rows
        k = int(np.searchsorted(docs, doc_id))
        if k < len(docs) and docs[k] == doc_id:
            return order[bounds[k]:bounds[k + 1]]
        return np.zeros(0, dtype=np.int64)

    def cost_of(self, indices, paid_groups=()) -> float:
        """Tokens the exemplars ``indices`` add to a prompt: their own costs plus each group's shared cost once
        (not for groups in ``paid_groups``, already in the prompt)."""
        indices = [int(i) for i in indices]
        if not indices:
            return 0.0
        used = {int(g) for g in self.groups[indices] if g >= 0} - {int(g) for g in paid_groups}
        return float(self.costs[indices].sum()) + float(sum(self.group_costs[g] for g in used))

    def alone_costs(self, indices=None) -> np.ndarray:
        """What each exemplar (of ``indices``, default all) costs in a prompt with no other exemplar of its group:
        its own cost plus its group's shared cost."""
        rows = slice(None) if indices is None else np.asarray(indices, dtype=np.int64)
        costs, groups = self.costs[rows], self.groups[rows]
        shared = np.zeros(len(costs))
        grouped = groups >= 0
        if grouped.any():
            shared[grouped] = self.group_costs[groups[grouped]]
        return costs + shared

    def knapsack_groups(self, idx, paid_groups=()):
        """``(groups, group_costs)`` for ``solve_knapsack`` over the candidates ``idx`` (ids renumbered; a group
        in ``paid_groups`` costs nothing more), or ``(None, None)`` when the pool has no groups."""
        if not self.has_groups:
            return None, None
        sub = self.groups[np.asarray(idx, dtype=int)]
        used = sorted({int(g) for g in sub if g >= 0})
        number = {g: k for k, g in enumerate(used)}
        paid = {int(g) for g in paid_groups}
        return (np.asarray([number[int(g)] if g >= 0 else -1 for g in sub], dtype=int),
                np.asarray([0.0 if g in paid else float(self.group_costs[g]) for g in used]))


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
    values: np.ndarray | None = None  # (n,) each exemplar's value for this query; None: embedding similarity
    # tokens the exemplars outside the declared shared prefix may add (a latency budget; static sets and hybrid
    # cores are that prefix and cost no prefill): hybrid's per-query part honours it; per-query selectors get it
    # as their ``capacity`` (selectors.base.within_new_tokens)
    new_token_capacity: float = float("inf")


def query_values(pool: ExemplarPool, request: SelectionRequest) -> np.ndarray:
    """What each pool exemplar is worth to this query, the objective selectors maximise and the order
    demos are shown in: ``request.values`` (a user's value function) when given, else the cosine
    similarity of the embeddings."""
    if request.values is None:
        return pool.similarities(request.embedding)
    values = np.asarray(request.values, dtype=float)
    if values.shape != (len(pool),) or not np.all(np.isfinite(values)):
        raise ValueError(f"request values must be {len(pool)} finite numbers (one per pool exemplar), "
                         f"got shape {values.shape}")
    return values


@dataclass(frozen=True)
class Selection:
    """Chosen pool indices in prompt order (most similar last, closest to the question). ``shared[k]``: the
    k-th exemplar belongs to a group an earlier exemplar of this prompt showed, so its prompt refers to the
    shared part instead of repeating it (all False without groups). ``shared_prefix``: how many of the first
    exemplars are the declared shared prefix (the same for every query, in one order: a static set, a hybrid
    core; 0 for per-query selections)."""

    indices: tuple[int, ...]
    total_cost: float
    within_budget: bool
    status: str = "ok"
    relaxed: tuple[str, ...] = ()
    reason: str = ""
    shared: tuple[bool, ...] = ()
    shared_prefix: int = 0
    limit: str = ""  # "work" / "time": a knapsack's limit ended a search (the best set found, perhaps not the best)
    outcome: str = ""  # with a limit: "incumbent" (the solver's best) or "greedy" (the greedy's, better)

    def as_dict(self, pool: ExemplarPool) -> dict:
        out = {"ids": [pool.ids[i] for i in self.indices], "total_cost": self.total_cost,
               "within_budget": self.within_budget, "status": self.status, "relaxed": list(self.relaxed),
               "reason": self.reason, "shared_prefix": self.shared_prefix}
        if any(self.shared):
            out["shared"] = list(self.shared)
        if self.limit:
            out["limit"], out["outcome"] = self.limit, self.outcome
        return out


def eligible_mask(pool: ExemplarPool, request: SelectionRequest) -> np.ndarray:
    """Candidates allowed for this query (not excluded, not from the query's own document)."""
    mask = np.ones(len(pool), dtype=bool)
    if request.exclude_ids:
        for i in pool.index_of([x for x in request.exclude_ids if x in pool._index]):
            mask[i] = False
    if request.doc_id and pool.doc_ids is not None:  # "" or None: no document known, nothing to exclude
        mask[pool.rows_of_doc(str(request.doc_id))] = False
    return mask


def eligible_among(pool: ExemplarPool, request: SelectionRequest, indices) -> np.ndarray:
    """The eligible ones of ``indices`` (as :func:`eligible_mask`, checking only those: no pass over the pool)."""
    indices = np.asarray(indices, dtype=np.int64)
    keep = np.ones(indices.size, dtype=bool)
    if request.exclude_ids:
        excluded = pool.index_of([x for x in request.exclude_ids if x in pool._index])
        keep &= ~np.isin(indices, np.asarray(excluded, dtype=np.int64))
    if request.doc_id and pool.doc_ids is not None:
        keep &= pool.doc_ids[indices] != str(request.doc_id)
    return indices[keep]


def eligible(pool: ExemplarPool, request: SelectionRequest, indices) -> list[int]:
    """``indices`` without the query itself, excluded ids and exemplars from the query's own document."""
    mask = eligible_mask(pool, request)
    return [int(i) for i in indices if mask[int(i)]]


def prompt_order(indices, similarities: np.ndarray, groups: np.ndarray | None = None) -> tuple[int, ...]:
    """Order exemplars least similar first, so the most similar sits next to the question (as SEER). With
    ``groups``, a group's exemplars stay together (the group placed by its most similar member)."""
    def key(i):
        return (similarities[i], -i)

    if groups is None or not any(groups[int(i)] >= 0 for i in indices):
        return tuple(int(i) for i in sorted(indices, key=key))
    blocks: dict = {}
    for i in indices:
        g = int(groups[int(i)])
        blocks.setdefault(("g", g) if g >= 0 else ("i", int(i)), []).append(int(i))
    ordered_blocks = sorted(blocks.values(), key=lambda members: max(key(i) for i in members))
    return tuple(i for members in ordered_blocks for i in sorted(members, key=key))


def shown_before(ordered, groups: np.ndarray) -> tuple[bool, ...]:
    """For each exemplar of a prompt (in order): whether an earlier one showed its group's shared part."""
    seen: set[int] = set()
    out = []
    for i in ordered:
        g = int(groups[int(i)])
        out.append(g >= 0 and g in seen)
        if g >= 0:
            seen.add(g)
    return tuple(out)


def make_selection(pool: ExemplarPool, request: SelectionRequest, indices, similarities, status="ok",
                   relaxed=(), reason="", *, prefix=(), solution=None) -> Selection:
    """The selection of ``prefix`` (exemplars every query gets: they open the prompt, in the order given) and
    ``indices`` (the rest, in :func:`prompt_order`: least similar first). ``solution``: the knapsack's
    ``KnapsackSolution`` behind it, whose ``limit`` / ``outcome`` the selection reports."""
    prefix = tuple(int(i) for i in prefix)
    first = set(prefix)
    rest = [int(i) for i in indices if int(i) not in first]
    ordered = prefix + prompt_order(rest, similarities, pool.groups if pool.has_groups else None)
    total = pool.cost_of(ordered)
    shared = shown_before(ordered, pool.groups)
    return Selection(ordered, total, total <= request.capacity + 1e-9, status, tuple(relaxed), reason,
                     shared if any(shared) else (), shared_prefix=len(prefix),
                     limit=solution.limit if solution is not None else "",
                     outcome=solution.outcome if solution is not None and solution.limit else "")


def canonical_keys(pool: ExemplarPool) -> np.ndarray:
    """One order over the whole pool, the same for every query (ascending keys open the prompt): the exemplars
    most similar to the pool as a whole (its mean embedding) first. Two per-query selections sharing some
    exemplars then show them in the same order, and the most central ones, which many queries share, first:
    consecutive prompts share a longer prefix than in similarity order (``benchmarks/prefix_reuse.py``)."""
    if not len(pool):
        return np.zeros(0)
    centre = pool.embeddings.mean(axis=0)
    return -(pool.embeddings @ centre).astype(float)


def in_canonical_order(pool: ExemplarPool, selection: Selection, keys: np.ndarray) -> Selection:
    """``selection`` with its exemplars after the shared prefix in ascending ``keys`` (a group's exemplars kept
    together, the group placed by its first member); nothing else changes."""
    keys = np.asarray(keys, dtype=float)
    blocks: dict = {}
    for i in selection.indices[selection.shared_prefix:]:
        g = int(pool.groups[i])
        blocks.setdefault(("g", g) if g >= 0 else ("i", int(i)), []).append(int(i))

    def key(i):
        return (keys[i], i)

    ordered_blocks = sorted((sorted(members, key=key) for members in blocks.values()), key=lambda m: key(m[0]))
    ordered = tuple(selection.indices[: selection.shared_prefix]) + tuple(i for m in ordered_blocks for i in m)
    shared = shown_before(ordered, pool.groups)
    return replace(selection, indices=ordered, shared=shared if any(shared) else ())
