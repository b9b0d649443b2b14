"""``PoolColumns``: the exemplar pool as a ``SelectExemplars`` holds it, in one object.

One exemplar per row, in columns: its pool id, its demo (in the predictor's fields), its token cost in that prompt,
its document id, the text embedded for it, its worked solution (the selection-quality proxies read it), its pool
attributes, and the shared-cost groups (``shared_fields``: ``groups[i]`` the group of exemplar ``i``, ``-1`` none;
``group_costs[g]`` the shared value's tokens; both empty when nothing is shared). ``query_digests``: each
exemplar's inputs as a *query* with its question gives them, digested (:func:`inputs_digest`), when they differ from
its demo's (a demo cut to its evidence: ``DocumentQA.demo_cut``), ``""`` where they do not; empty: none differs. A
query with its demo's inputs or with those is the exemplar itself and never selects it
(``SelectExemplars.same_inputs_ids``).

Two backings behind the one object: **inline** (lists, saved in the program's JSON) or a **pool store**
(``selection.pool_store``: the columns memory-mapped, a demo read when it is selected; the saved state names the
store by hash). Either way the selectors see the same :class:`~knapsack_dspy.selection.exemplar_pool.ExemplarPool`
(:meth:`PoolColumns.exemplar_pool`). The columns are never changed in place: ``fit``, ``update_pool`` and
``load_state`` replace the whole object.
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from knapsack_dspy.selection.exemplar_pool import ExemplarPool


@dataclass(eq=False)
class PoolColumns:
    """The pool's columns (see the module docstring); ``store``: the pool store backing them, else ``None``."""

    ids: Sequence[str] = field(default_factory=list)
    demos: Sequence[dict] = field(default_factory=list)
    costs: Sequence[float] = field(default_factory=list)
    doc_ids: Sequence[str] = field(default_factory=list)
    embed_texts: Sequence[str] = field(default_factory=list)
    programs: Sequence[str] = field(default_factory=list)
    attributes: Mapping[str, Sequence[str]] = field(default_factory=dict)
    groups: Sequence[int] = field(default_factory=list)
    group_costs: Sequence[float] = field(default_factory=list)
    query_digests: Sequence[str] = field(default_factory=list)
    store: Any = None  # a selection.pool_store.PoolStore

    def __len__(self) -> int:
        return len(self.ids)

    # -- the two backings ----------------------------------------------------------------------------
    @classmethod
    def from_store(cls, store) -> PoolColumns:
        """The columns of a pool store (memory-mapped; a demo column reads its record when indexed)."""
        groups = store.groups
        has_groups = bool(groups.size) and bool((np.asarray(groups) >= 0).any())
        return cls(ids=store.ids.tolist(), demos=store.column("demo"), costs=store.costs, doc_ids=store.doc_ids,
                   embed_texts=store.column("embed_text"), programs=store.column("program"),
                   attributes=store.attributes, groups=groups if has_groups else [],
                   group_costs=store.group_costs if has_groups else [], store=store)

    @classmethod
    def from_state(cls, pool: Mapping[str, Any]) -> PoolColumns:
        """The columns of a saved inline pool (``to_state``'s ``"pool"``; validated by the caller)."""
        return cls(ids=list(pool["ids"]), demos=[dict(d) for d in pool["demos"]],
                   costs=[float(c) for c in pool["costs"]], doc_ids=list(pool["doc_ids"]),
                   embed_texts=list(pool["embed_texts"]),
                   programs=list(pool.get("programs") or [""] * len(pool["ids"])),
                   attributes={k: list(v) for k, v in pool["attributes"].items()},
                   groups=[int(g) for g in pool.get("groups") or []],
                   group_costs=[float(c) for c in pool.get("group_costs") or []],
                   query_digests=[str(d) for d in pool.get("query_digests") or []])

    def to_state(self) -> dict:
        """What a saved program holds of the pool: the columns (inline), or the store's hash and size."""
        if self.store is not None:
            return {"pool_store": {"hash": self.store.hash, "size": len(self.store)}}
        return {"pool": {"ids": self.ids, "demos": self.demos, "costs": self.costs, "attributes": self.attributes,
                         "doc_ids": self.doc_ids, "embed_texts": self.embed_texts, "programs": self.programs,
                         **({"groups": self.groups, "group_costs": self.group_costs} if self.groups else {}),
                         **({"query_digests": self.query_digests} if self.query_digests else {})}}

    def digests_of_rows(self, input_fields: Sequence[str]) -> list[tuple[str, int]]:
        """Every ``(digest, row)`` that names an exemplar: its demo's ``input_fields``, and its query's inputs
        (``query_digests``) when they differ. Inline pools only (a store keeps them in its records)."""
        pairs = [(inputs_digest_of(demo, input_fields), k) for k, demo in enumerate(self.demos)]
        pairs += [(query, k) for k, query in enumerate(self.query_digests) if query]
        return [(digest, k) for digest, k in pairs if digest]

    def records(self, input_fields: Sequence[str]):
        """Every exemplar as a pool store's ``PoolRecord`` (to write a store, or to build a changed pool from);
        ``input_fields``: the predictor's inputs (their digest finds a query's own demo)."""
        from knapsack_dspy.selection import pool_store

        if self.store is not None:
            return pool_store.records_of(self.store)
        names = sorted(self.attributes)
        return [pool_store.PoolRecord(self.ids[k], dict(self.demos[k]), str(self.doc_ids[k]), self.embed_texts[k],
                                      self.programs[k], {name: str(self.attributes[name][k]) for name in names},
                                      int(self.groups[k]) if len(self.groups) else -1,
                                      inputs_digest_of(self.demos[k], input_fields),
                                      self.query_digests[k] if self.query_digests else "")
                for k in range(len(self.ids))]

    @classmethod
    def from_records(cls, records: Sequence, costs: Sequence[float], attribute_names: Sequence[str]) -> PoolColumns:
        """An inline pool of ``records`` (``PoolRecord`` s, no shared costs) costing ``costs`` (their
        ``query_digest`` s kept)."""
        queries = [r.query_digest for r in records]
        return cls(ids=[r.id for r in records], demos=[r.demo for r in records], costs=[float(c) for c in costs],
                   doc_ids=[r.doc_id for r in records], embed_texts=[r.embed_text for r in records],
                   programs=[r.program for r in records],
                   attributes={name: [str((r.attributes or {}).get(name, "")) for r in records]
                               for name in attribute_names},
                   query_digests=queries if any(queries) else [])

    # -- what the selectors read -----------------------------------------------------------------------
    def exemplar_pool(self, encode: Callable[[Sequence[str]], np.ndarray]) -> ExemplarPool:
        """The pool the selectors search: a store's own embeddings and index, else ``encode(embed_texts)``."""
        grouped = bool(len(self.groups))
        if self.store is not None:
            store = self.store
            return ExemplarPool(self.ids, store.embeddings, store.costs, store.attributes, store.doc_ids,
                                groups=np.asarray(store.groups) if grouped else None,
                                group_costs=np.asarray(store.group_costs) if grouped else None, index=store.index())
        return ExemplarPool(self.ids, encode(self.embed_texts), np.asarray(self.costs),
                            {k: np.asarray(v) for k, v in self.attributes.items()}, np.asarray(self.doc_ids),
                            groups=np.asarray(self.groups, dtype=int) if grouped else None,
                            group_costs=np.asarray(self.group_costs) if grouped else None)

    # -- copies and pickles ----------------------------------------------------------------------------
    def __deepcopy__(self, memo):
        """A store-backed pool is shared (read-only, memory-mapped); an inline one is copied."""
        if self.store is not None:
            return self
        clone = PoolColumns(**{name: copy.deepcopy(getattr(self, name), memo) for name in _INLINE})
        memo[id(self)] = clone
        return clone

    def __getstate__(self):  # a store-backed pool pickles as its store (its columns are re-read from it)
        return {"store": self.store} if self.store is not None else dict(self.__dict__)

    def __setstate__(self, state):
        if state.get("store") is not None:
            self.__dict__.update(PoolColumns.from_store(state["store"]).__dict__)
        else:  # a pool pickled before a column existed: the column's default
            self.__dict__.update({"query_digests": [], **state})


_INLINE = ("ids", "demos", "costs", "doc_ids", "embed_texts", "programs", "attributes", "groups", "group_costs",
           "query_digests")


def inputs_key(fields: Mapping[str, Any], names: Sequence[str]) -> tuple[str, ...]:
    """The inputs ``names`` of ``fields`` as compared for self-selection: each value's text (a list joined by
    spaces; a selectable field's ``Pieces`` as its whole value, every piece shown) case-folded, with whitespace runs
    collapsed to one space."""
    from knapsack_dspy.modules.selectable_context import Pieces  # selectable context: loaded when first used

    def text(value) -> str:
        value = value.whole() if isinstance(value, Pieces) else value
        value = " ".join(map(str, value)) if isinstance(value, (list, tuple)) else str(value)
        return " ".join(value.casefold().split())

    return tuple(text(fields.get(name)) for name in names)


def inputs_digest(key: tuple[str, ...]) -> str:
    """A short digest of an :func:`inputs_key` (what a pool store keeps to find a query's own demo)."""
    return hashlib.sha256(json.dumps(key, ensure_ascii=False).encode()).hexdigest()[:32]


def inputs_digest_of(demo: Mapping[str, Any], fields: Sequence[str]) -> str:
    """The digest of a demo's inputs, or "" when it lacks one of ``fields`` (then never matched)."""
    return inputs_digest(inputs_key(demo, fields)) if fields and all(name in demo for name in fields) else ""


def query_digest_of(demo: Mapping[str, Any], query: Mapping[str, Any] | None, fields: Sequence[str]) -> str:
    """The digest of an exemplar's inputs as a query gives them (``query``) when they differ from its demo's,
    else ``""`` (``PoolRecord.query_digest``, an entry of ``PoolColumns.query_digests``)."""
    if query is None:
        return ""
    digest = inputs_digest_of(query, fields)
    return digest if digest != inputs_digest_of(demo, fields) else ""


def query_digests_of(demos: Sequence[Mapping[str, Any]], query_inputs: Sequence[Mapping[str, Any] | None] | None,
                     fields: Sequence[str]) -> list[str]:
    """``PoolColumns.query_digests`` of ``demos`` whose queries' inputs are ``query_inputs`` (``None``: the demo's):
    :func:`query_digest_of` each, or ``[]`` when none differs (nothing to keep)."""
    if query_inputs is None:
        return []
    digests = [query_digest_of(demo, query, fields) for demo, query in zip(demos, query_inputs, strict=True)]
    return digests if any(digests) else []
