"""An exact branch-and-bound for small selections: the knapsack's objective, proven optimal in a few milliseconds.

``scipy.optimize.milp`` (HiGHS) is the solver of record, but on the product's instances -- at most 200
candidates, at most 8 exemplars, shared table costs per document and coverage values per kind -- HiGHS spends
10-300 ms in its root node (cuts, probing) on a model whose search tree is tiny, and on two cores beside a
decoding model every one of those milliseconds is an answer's. This search enumerates the selections of at most
``max_items`` items in one fixed order and skips every subtree that an upper bound proves cannot beat the best
selection found so far (the greedy's, to begin with):

- items in the order of their *optimistic* value (own value plus their kind's value), ties by index;
- the bound on what items ``j, j+1, ...`` can add with ``r`` slots left: the ``r`` largest positive values among
  them, plus the ``r`` largest values of the kinds not yet covered that one of them has (whose cheapest member
  still fits), where ``r`` is also cut to the number of items the remaining capacity can hold at the cheapest
  own costs -- each kind's value is collected once, and a set of ``r`` items is worth at most its values plus the
  values of the kinds it newly covers, so the bound is valid; it only falls as ``j`` grows, so the loop over ``j``
  stops at the first ``j`` whose bound does not beat the best; and an item ``j`` is skipped when its own gain plus
  the bound of the items after it, in the room it leaves, does not beat the best;
- attribute constraints are checked exactly on every set considered (counts and fractions); an upper bound
  already reached skips an item, and a subtree where some lower bound can no longer be met is not entered.

A set replaces the best only when it is better by more than :data:`IMPROVEMENT` (so among equal sets the first
found stays, and a ``floor`` -- the greedy's objective -- stays unless beaten). The search counts its nodes (sets
considered) and stops at ``node_limit`` with the best found and ``proven = False``: counted work, so the result is
the same at any load.
:func:`knapsack.solve_knapsack` runs it first for ``max_items <= MAX_ITEMS`` and falls back to ``milp`` (with the
search's best as the cutoff) when it stops early; ``tests/optimizer/test_exact_search.py`` and
``benchmarks/exact_selection.py`` check its objective against ``milp``'s proven optimum.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

__all__ = ["DEFAULT_NODE_LIMIT", "IMPROVEMENT", "MAX_ITEMS", "SearchResult", "exact_search"]

#: The largest ``max_items`` the search is used for (the product's M <= 8); larger ones go to ``milp``.
MAX_ITEMS = 8
#: Sets the search may consider before it stops with its best (then ``milp`` takes over).
DEFAULT_NODE_LIMIT = 20_000
#: A set must beat the best by more than this to replace it (HiGHS's absolute gap is 1e-6).
IMPROVEMENT = 1e-9
_TOL = 1e-9


class SearchResult(NamedTuple):
    """The best selection found (item indices; ``None`` when no set satisfying the constraints beats the floor),
    its objective, whether the search finished (then it is optimal) and how many sets it considered."""

    selected: tuple[int, ...] | None
    objective: float
    proven: bool
    nodes: int


def exact_search(values: np.ndarray, costs: np.ndarray, capacity: float, max_items: int, constraints: Sequence,
                 groups: np.ndarray, shared: np.ndarray, kinds: np.ndarray, kind_values: np.ndarray, *,
                 floor: float = float("-inf"), node_limit: int = DEFAULT_NODE_LIMIT) -> SearchResult:
    """The best selection of at most ``max_items`` items worth more than ``floor`` (see the module docstring).
    Arguments as validated by ``solve_knapsack``: ``groups`` / ``kinds`` are ids (-1: none) into ``shared`` /
    ``kind_values``; ``constraints`` are ``AttributeConstraint``s over the items; ``floor``: the objective of a
    selection already in hand (the greedy's). ``selected`` is ``None`` when no set satisfying the constraints is
    worth more than ``floor`` (with ``proven``: none exists)."""
    n = int(values.size)
    v = values.astype(float)
    c_own = costs.astype(float)
    kv_own = np.where(kinds >= 0, kind_values[np.maximum(kinds, 0)] if kind_values.size else 0.0, 0.0)
    order = np.lexsort((np.arange(n), -(v + kv_own)))
    # everything per position in that order, as Python lists (the search touches single items)
    val = v[order].tolist()
    cost = c_own[order].tolist()
    group = groups[order].tolist()
    kind = kinds[order].tolist()
    shared_cost = shared.astype(float).tolist()
    kind_value = kind_values.astype(float).tolist()
    m = len(constraints)
    members = [np.asarray(c.members, dtype=bool)[order] for c in constraints]
    member = [mask.tolist() for mask in members]
    lows = [float(c.min_count) if c.min_count and c.min_count > 0 else 0.0 for c in constraints]
    highs = [float(c.max_count) if c.max_count is not None else math.inf for c in constraints]  # inf: no bound
    min_fraction = [c.min_fraction for c in constraints]
    max_fraction = [c.max_fraction for c in constraints]
    # a lower bound's cheapest members: member_cheap[c][d] = the d cheapest own costs of constraint c's members
    member_cheap = [np.r_[0.0, np.cumsum(np.sort(c_own[order][mask]))].tolist() for mask in members]
    for c in range(m):  # a lower bound no selection can meet: nothing satisfies the constraints
        need = int(np.ceil(lows[c] - _TOL))
        if need > max_items or need >= len(member_cheap[c]) or member_cheap[c][need] > capacity + _TOL:
            return SearchResult(None, float(floor), True, 0)
    # per position j, over positions j..: the r largest positive values summed (top[j][r]) and the r cheapest own
    # costs summed (cheap[j][r]), r <= max_items
    top = _suffix_sums(val, max_items, largest=True)
    cheap = _suffix_sums(cost, max_items, largest=False)
    # kinds by value (descending), each with the last position holding it and its cheapest own cost from j on
    last: dict[int, int] = {}
    for j, k in enumerate(kind):
        if k >= 0:
            last[k] = j
    kinds_in_order, costs_in_order = kinds[order], c_own[order]
    kind_cheap = {k: np.minimum.accumulate(np.where(kinds_in_order == k, costs_in_order, np.inf)[::-1])[::-1].tolist()
                  for k in last}
    kinds_by_value = [(kind_value[k], k, last[k], kind_cheap[k])
                      for k in sorted(last, key=lambda k: (-kind_value[k], k)) if kind_value[k] > 0]

    chosen: list[int] = []
    paid = [0] * len(shared_cost)
    covered = [0] * len(kind_value)
    counts = [0.0] * m
    nodes = 0
    best_value, best_set = float(floor), None

    def satisfied() -> bool:
        size = len(chosen)
        for c in range(m):
            count = counts[c]
            if count < lows[c] - _TOL or count > highs[c] + _TOL:
                return False
            if min_fraction[c] is not None and count < min_fraction[c] * size - _TOL:
                return False
            if max_fraction[c] is not None and count > max_fraction[c] * size + _TOL:
                return False
        return True

    def reachable(r: int, room: float) -> bool:  # every lower bound can still be met with r more items in room
        for c in range(m):
            need = int(np.ceil(lows[c] - counts[c] - _TOL))
            if need > 0 and (need > r or need >= len(member_cheap[c]) or member_cheap[c][need] > room + _TOL):
                return False
        return True

    def bound(j: int, r: int, room: float) -> float:
        sums = cheap[j]
        while r > 0 and sums[r] > room + _TOL:
            r -= 1
        if r <= 0:
            return 0.0
        total = top[j][r]
        taken = 0
        for value, k, at, cheapest in kinds_by_value:
            if at >= j and not covered[k] and cheapest[j] <= room + _TOL:
                total += value
                taken += 1
                if taken == r:
                    break
        return total

    class Stop(Exception):
        pass

    def search(start: int, r: int, value: float, used: float):
        nonlocal best_value, best_set, nodes
        room = capacity - used
        for j in range(start, n):
            if value + bound(j, r, room) <= best_value + IMPROVEMENT:
                return  # the bound only falls with j
            g = group[j]
            extra = cost[j] + (shared_cost[g] if g >= 0 and not paid[g] else 0.0)
            if extra > room + _TOL:
                continue
            if m and any(member[c][j] and counts[c] + 1 > highs[c] + _TOL for c in range(m)):
                continue
            k = kind[j]
            gain = val[j] + (kind_value[k] if k >= 0 and not covered[k] else 0.0)
            # with j taken: the set itself and what the items after it can add in the room j leaves (a bound
            # that knows j's cost, so an expensive j is skipped whole)
            if k >= 0:
                covered[k] += 1
            rest = bound(j + 1, r - 1, room - extra) if r > 1 else 0.0
            if k >= 0:
                covered[k] -= 1
            if value + gain + rest <= best_value + IMPROVEMENT:
                continue
            if nodes == node_limit:
                raise Stop
            nodes += 1
            chosen.append(j)
            if g >= 0:
                paid[g] += 1
            if k >= 0:
                covered[k] += 1
            for c in range(m):
                if member[c][j]:
                    counts[c] += 1
            if value + gain > best_value + IMPROVEMENT and (not m or satisfied()):
                best_value, best_set = value + gain, sorted(chosen)
            if r > 1 and (not m or reachable(r - 1, room - extra)):
                search(j + 1, r - 1, value + gain, used + extra)
            chosen.pop()
            if g >= 0:
                paid[g] -= 1
            if k >= 0:
                covered[k] -= 1
            for c in range(m):
                if member[c][j]:
                    counts[c] -= 1

    proven = True
    if satisfied() and best_value < 0.0 - IMPROVEMENT:  # the empty set, when it is feasible and worth more
        best_value, best_set = 0.0, []
    try:
        search(0, max_items, 0.0, 0.0)
    except Stop:
        proven = False
    if best_set is None:
        return SearchResult(None, float(floor), proven, nodes)
    return SearchResult(tuple(int(order[p]) for p in best_set), float(best_value), proven, nodes)


def _suffix_sums(numbers: list[float], width: int, *, largest: bool) -> list[list[float]]:
    """``out[j][r]``: the sum of the ``r`` largest positive (``largest``) or smallest of ``numbers[j:]`` (``r`` <=
    ``width``; with fewer than ``r`` of them, the sum of all: for the smallest, ``inf``, as ``r`` cannot be had)."""
    n = len(numbers)
    pad = 0.0 if largest else float("inf")
    out = [[0.0] + [pad] * width for _ in range(n + 1)]
    kept: list[float] = []  # the best ``width`` so far, ascending by key
    for j in range(n - 1, -1, -1):
        x = numbers[j]
        if not largest or x > 0:
            bisect.insort(kept, -x if largest else x)
            del kept[width:]
        row, total = out[j], 0.0
        for r, key in enumerate(kept, start=1):
            total += -key if largest else key
            row[r] = total
        for r in range(len(kept) + 1, width + 1):
            row[r] = total if largest else pad
    return out
