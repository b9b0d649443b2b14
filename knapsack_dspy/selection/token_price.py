"""The token price read from the pool itself: ``token_price="auto"``, chosen at fit time with no LM call.

A price per prompt token makes a selector take an exemplar only when what it is expected to add is worth its
tokens (``case_coverage``). The right price depends on the pool -- how much a further exemplar adds, for this
pool, this tokenizer and this prompt format -- so it is read from the pool, by a rule fixed in advance:

1. **Halves.** The pool is cut in two halves by document (``doc_ids``; by exemplar id when it has none), by a
   hash, so the cut is the same on every run.
2. **Cross-fitted selections.** A seeded sample of each half's exemplars with a kind (up to
   ``QUERIES_PER_HALF``) is asked as queries of the *other* half: the selector is fitted on that half alone (its
   kind classifier never sees the query) and selects at the capacity a typical query leaves for exemplars.
3. **What a price keeps.** A query's *hit*: its selection shows an exemplar of the query's own kind (the case
   that teaches its solution: the pool's labelled ``kind``, or the kinds derived from the demos' outputs).
4. **The rule.** The price is the largest of the grid at which the hit rate stays at least ``SHARE`` of the
   unpriced selection's, found by bisection over the grid (the hit rate falls as the price rises). The grid is
   in units of the pool's median exemplar: ``r / median cost`` for ``r`` in ``RELATIVE_PRICES`` (an exemplar of
   median length pays ``r`` of value for its tokens; an exemplar's value is at most 1 + its similarity weight).
   A pool whose unpriced selections never show a query's kind keeps no exemplar it is not sure of: the highest
   price of the grid.

``SHARE`` is the rule's one constant, fixed on the TAT-QA, FinQA (Python) and SARA pools before GSM8K's price was
computed (docs/selection_objective.md, "The price from the pool"): of 0.80 / 0.85 / 0.90 / 0.95, the share whose
TAT-QA price is nearest the one price an LM run found non-inferior (0.004: the tokens run).

A pool too small to cut (fewer than ``MIN_HALF`` exemplars with a kind in either half) or without kinds gets
``FALLBACK_PRICE`` (0: the unpriced selection, up to M exemplars within the budget), and the fit says why.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from knapsack_dspy.selection.exemplar_pool import ExemplarPool, SelectionRequest

__all__ = ["AUTO", "FALLBACK_PRICE", "MIN_HALF", "QUERIES_PER_HALF", "RELATIVE_PRICES", "SHARE", "PriceFit",
           "fit_token_price", "half_of", "is_auto", "sub_pool"]

#: the setting that asks for the price from the pool
AUTO = "auto"
#: the rule's constant: the hit rate a price must keep, as a share of the unpriced selection's (frozen; see above)
SHARE = 0.85
#: prices tried, as the value an exemplar of the pool's median cost pays for its tokens (ascending)
RELATIVE_PRICES = tuple(round(2 ** (j / 4) / 64, 6) for j in range(29))
#: the fewest exemplars with a kind each half needs for the rule; fewer: the fallback
MIN_HALF = 16
#: queries asked per half (a seeded sample of its exemplars with a kind)
QUERIES_PER_HALF = 150
#: the price of a pool the rule cannot read
FALLBACK_PRICE = 0.0


def is_auto(value: Any) -> bool:
    """Whether a ``token_price`` setting asks for the price from the pool."""
    return isinstance(value, str) and value == AUTO


@dataclass(frozen=True)
class PriceFit:
    """The outcome of :func:`fit_token_price`: the price, how it was reached, and the grid it was read from."""

    price: float
    rule: str  # "cross-fitted" or "fallback"
    reason: str = ""  # the fallback's reason
    share: float = SHARE
    median_cost: float = 0.0
    capacity: float = 0.0
    queries: int = 0
    grid: tuple[dict, ...] = field(default_factory=tuple)  # per price tried: price, relative, hit, tokens, exemplars

    def as_dict(self) -> dict:
        return {"price": self.price, "rule": self.rule, "reason": self.reason, "share": self.share,
                "median_cost": self.median_cost, "capacity": self.capacity, "queries": self.queries,
                "grid": [dict(point) for point in self.grid]}

    @classmethod
    def from_dict(cls, state: dict) -> PriceFit:
        return cls(price=float(state["price"]), rule=str(state["rule"]), reason=str(state.get("reason", "")),
                   share=float(state.get("share", SHARE)), median_cost=float(state.get("median_cost", 0.0)),
                   capacity=float(state.get("capacity", 0.0)), queries=int(state.get("queries", 0)),
                   grid=tuple(dict(point) for point in state.get("grid", ())))

    def describe(self) -> str:
        """One line for the compile report and the docs' examples."""
        if self.rule != "cross-fitted":
            return f"token price {self.price:g} (fallback: {self.reason})"
        kept = next((p for p in self.grid if p["price"] == self.price), None)
        unpriced = self.grid[0] if self.grid else None
        if kept is None or unpriced is None:
            return f"token price {self.price:g} (cross-fitted on {self.queries} pool queries)"
        return (f"token price {self.price:.3g} read from the pool (cross-fitted on {self.queries} queries: "
                f"hit {kept['hit']:.1%} vs {unpriced['hit']:.1%} unpriced, {kept['exemplars']:.2f} exemplars and "
                f"{kept['tokens']:.0f} exemplar tokens vs {unpriced['exemplars']:.2f} and {unpriced['tokens']:.0f})")


def half_of(pool: ExemplarPool) -> np.ndarray:
    """Each exemplar's half (0 or 1): a hash of its document id, or of its id when the pool has no documents."""
    if pool.doc_ids is not None and len({str(d) for d in pool.doc_ids if str(d)}) >= 2:
        keys = [str(d) or str(i) for d, i in zip(pool.doc_ids, pool.ids, strict=True)]
    else:
        keys = [str(i) for i in pool.ids]
    return np.asarray([zlib.crc32(key.encode()) & 1 for key in keys], dtype=int)


def sub_pool(pool: ExemplarPool, indices: np.ndarray) -> ExemplarPool:
    """The exemplars ``indices`` of ``pool`` as a pool of their own (shared-cost groups renumbered; no index)."""
    indices = np.asarray(indices, dtype=np.int64)
    groups = np.asarray(pool.groups)[indices]
    used = np.unique(groups[groups >= 0])
    renumber = {int(g): k for k, g in enumerate(used)}
    new_groups = np.asarray([renumber.get(int(g), -1) for g in groups], dtype=int)
    return ExemplarPool(ids=[pool.ids[int(i)] for i in indices], embeddings=pool.embeddings[indices],
                        costs=pool.costs[indices],
                        attributes={name: values[indices] for name, values in pool.attributes.items()},
                        doc_ids=None if pool.doc_ids is None else np.asarray(pool.doc_ids)[indices],
                        groups=new_groups, group_costs=np.asarray(pool.group_costs)[used])


def _fallback(reason: str, share: float) -> PriceFit:
    return PriceFit(price=FALLBACK_PRICE, rule="fallback", reason=reason, share=share)


def fit_token_price(pool: ExemplarPool, make_selector: Callable[[float], Any], capacity: float, *,
                    kind: str = "kind", seed: int = 0, share: float = SHARE,
                    queries_per_half: int = QUERIES_PER_HALF) -> PriceFit:
    """The token price for ``pool`` by the rule of the module docstring. ``make_selector(price)``: a fresh
    selector at that price (its ``fit(pool)`` learns from the pool given; ``select_at_prices(pool, request,
    prices)`` selects at each price); ``capacity``: the exemplar tokens a typical query leaves; ``kind``: the
    attribute naming an exemplar's kind."""
    labels = pool.attributes.get(kind)
    if labels is None or not (np.asarray(labels) != "").any():
        return _fallback("the pool has no kinds", share)
    labels = np.asarray(labels, dtype=str)
    half = half_of(pool)
    with_kind = labels != ""
    sizes = [int(((half == h) & with_kind).sum()) for h in (0, 1)]
    if min(sizes) < MIN_HALF:
        return _fallback(f"too small to cross-fit ({sizes[0]} and {sizes[1]} exemplars with a kind in its halves; "
                         f"the rule needs {MIN_HALF} each)", share)
    median_cost = float(np.median(pool.costs + _group_share(pool)))
    if not median_cost > 0:
        return _fallback("the exemplars cost no tokens", share)
    rng = np.random.default_rng(seed)
    sides = []
    for h in (0, 1):
        other = sub_pool(pool, np.flatnonzero(half != h))
        selector = make_selector(0.0).fit(other)
        askers = np.flatnonzero((half == h) & with_kind)
        if askers.size > queries_per_half:
            askers = np.sort(rng.choice(askers, queries_per_half, replace=False))
        requests = [SelectionRequest(embedding=pool.embeddings[int(q)], capacity=float(capacity),
                                     key=pool.ids[int(q)], seed=seed) for q in askers]
        sides.append((other, selector, np.asarray(other.attributes[kind], dtype=str), labels[askers], requests))
    asked = sum(len(side[4]) for side in sides)
    figures: dict[int, dict] = {}

    def probe(k: int) -> dict:  # k = 0: no price; k >= 1: RELATIVE_PRICES[k - 1] per median exemplar
        if k not in figures:
            price = 0.0 if k == 0 else RELATIVE_PRICES[k - 1] / median_cost
            hits = tokens = shown = 0.0
            for other, selector, other_kinds, wanted, requests in sides:
                for target, request in zip(wanted, requests, strict=True):
                    chosen = selector.select_at_prices(other, request, (price,))[0]
                    picked = list(chosen.indices)
                    hits += bool(picked) and bool((other_kinds[picked] == target).any())
                    tokens += float(chosen.total_cost)
                    shown += len(picked)
            figures[k] = {"price": price, "relative": 0.0 if k == 0 else RELATIVE_PRICES[k - 1],
                          "hit": hits / asked, "tokens": tokens / asked, "exemplars": shown / asked}
        return figures[k]

    floor = share * probe(0)["hit"] - 1e-12
    low, high = 0, len(RELATIVE_PRICES) + 1  # probe(low) keeps the hit; high: past the grid, or a price that fails
    while high - low > 1:
        middle = (low + high) // 2
        if probe(middle)["hit"] >= floor:
            low = middle
        else:
            high = middle
    grid = tuple(figures[k] for k in sorted(figures))
    return PriceFit(price=float(figures[low]["price"]), rule="cross-fitted", share=share, median_cost=median_cost,
                    capacity=float(capacity), queries=asked, grid=grid)


def _group_share(pool: ExemplarPool) -> np.ndarray:
    """Each exemplar's cost as a prompt's only exemplar would pay it: its group's shared cost included."""
    groups = np.asarray(pool.groups)
    extra = np.zeros(len(pool))
    inside = groups >= 0
    if inside.any():
        extra[inside] = np.asarray(pool.group_costs)[groups[inside]]
    return extra
