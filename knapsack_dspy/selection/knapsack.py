"""The knapsack core: exemplar selection as a 0-1 integer linear program (pure numpy / scipy).

    maximise    sum_i values[i] * x_i
    subject to  sum_i costs[i] * x_i            <= capacity
                sum_i x_i                        <= max_items
                min_count <= sum_i members[i] x_i <= max_count          (each AttributeConstraint)
                min_fraction * sum_i x_i <= sum_i members[i] x_i <= max_fraction * sum_i x_i   (optional)
                x_i in {0, 1}

Solved with ``scipy.optimize.milp`` (HiGHS). Two exact reductions make it fast enough to run per query:

1. **Dominance pruning.** Items that cannot fit (cost > capacity) are dropped. Items are grouped by their
   membership profile (one bit per constraint). Inside a group, item *j* is dropped when at least
   ``max_items`` other items of the group are at least as valuable and at most as costly (ties broken by
   index). Any feasible selection containing *j* has at most ``max_items - 1`` other items, so one of
   *j*'s dominators is free; swapping it in keeps every constraint count, does not raise the cost and
   does not lower the value. So an optimal solution survives the pruning: the reduction is exact. With shared
   group costs a second pass compares across groups, charging a dominator its own cost plus its group's.
2. **Solver settings.** HiGHS's root "feasibility jump" heuristic costs ~6 ms per call on these tiny
   models (measured: 8 ms -> 2 ms for an 8-item instance); it is switched off. ``mip_rel_gap=0`` asks for
   proven optimality rather than HiGHS's default 0.01 % gap.

**Shared costs** (optional ``groups`` / ``group_costs``): items of one group share a cost paid once when any
of them is chosen -- two demos from one document show its table once. The ILP then has a variable ``y_g``
per group, ``x_i <= y_g`` for its members, and ``group_costs[g] * y_g`` in the capacity row; dominance
pruning compares items of the same group only (swapping within a group keeps ``y_g``), so it stays exact.

**Coverage values** (optional ``kinds`` / ``kind_values``): a value paid once when any item of a *kind* is chosen
(e.g. the probability that the query needs that kind of solution: a second exemplar of the kind adds only its
own value -- diminishing returns, optimised exactly). The ILP has a variable ``z_k`` per kind with
``z_k <= sum of its members' x_i`` and ``kind_values[k] * z_k`` in the objective; dominance pruning compares
items of the same kind only, so it stays exact. :func:`greedy_knapsack` solves the same objective greedily.

**Covers** (optional ``covers`` / ``cover_values``): where a kind gives each item at most one, an item may cover
several *elements* (a passage naming several of the terms a question names), each element's value collected once
when any chosen item covers it. ``covers`` lists, per element, the items covering it (or is an ``(items,
elements)`` 0/1 matrix); the ILP has a variable ``z_e`` per element with ``z_e <= sum of its covering items' x_i``
and ``cover_values[e] * z_e`` in the objective. Dominance pruning compares only items with identical cover sets
(so it stays exact), the bound pruning counts every element an item covers as its own (an upper bound), and the
exact search is not used (``milp`` decides).

**Cost limits** (optional ``cost_limits``: :class:`CostLimit`): further budgets over part of the items -- the chosen
members' costs, plus each of their groups' shared costs once, ``<= capacity`` (the demos' own token budget beside
the whole prompt's). Items are compared in the dominance pruning only with items of the same limits; a group
must lie inside or outside each limit. With cost limits the exact search is not used either.

Infeasible attribute constraints never crash: they are dropped **last given first** until the problem is
feasible, and the dropped names are reported in ``relaxed`` (status ``"relaxed"``). The returned
selection never exceeds ``capacity`` or ``max_items``, whatever happens (the solver's answer is
re-checked in exact arithmetic on the caller's numbers).

**Limits never degrade a selection below its greedy.** Before the ILP, a greedy solution of the same objective
that satisfies the active constraints (:func:`constrained_greedy`) is computed; its objective is handed to HiGHS
as a cutoff (``objective_bound``: HiGHS searches only for solutions at least as good, within its tolerance;
when it finds none the greedy is optimal, and a solution it returns is kept only when it beats the greedy).
``milp`` takes no starting solution, so when a limit ends the search the better of the solver's incumbent and
the greedy is returned (``outcome``: ``"optimal"``, ``"incumbent"`` or
``"greedy"``) -- never the empty selection while the greedy has one.

**Limits count work, not seconds.** The default limit is HiGHS's branch-and-bound node count (``work_limit``,
:data:`DEFAULT_WORK_LIMIT`), on one HiGHS thread, so the same instance gets the same answer on an idle and on a
loaded machine; the wall-clock ``time_limit`` stays as a safety net, and ``limit`` says which one fired
(``"work"`` or ``"time"``; ``""``: none).
"""

from __future__ import annotations

import dataclasses
import functools
import heapq
import math
import re
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from scipy.optimize import Bounds, LinearConstraint, OptimizeWarning, milp
from scipy.sparse import csr_array

from knapsack_dspy.selection import exact_search

__all__ = ["DEFAULT_TIME_LIMIT", "DEFAULT_WORK_LIMIT", "OUTCOMES", "AttributeConstraint", "CostLimit",
           "KnapsackSolution", "bound_prune", "constrained_greedy", "greedy_knapsack", "prune_dominated",
           "solve_knapsack"]

_FJ_OPTION = "mip_heuristic_run_feasibility_jump"
_TOL = 1e-9
#: Branch-and-bound nodes one ILP solve may explore before it stops with its best (``work_limit``): counted work,
#: so a limited selection is the same on any machine at any load. The product's instances (<= 200 candidates,
#: M <= 8) are proven optimal in far fewer (``benchmarks/exact_selection.py``).
DEFAULT_WORK_LIMIT = 5_000
#: Seconds one ILP solve may take (the safety net behind the work limit; reported when it fires).
DEFAULT_TIME_LIMIT = 10.0
#: How a selection was found: proven optimal, the solver's incumbent at a limit, or the greedy at a limit.
OUTCOMES = ("optimal", "incumbent", "greedy")


@dataclass(frozen=True)
class AttributeConstraint:
    """``min_count <= sum(members[i] * x_i) <= max_count`` over the selected items.

    ``members`` is a boolean (0/1) vector over the items. ``min_fraction`` / ``max_fraction`` (optional)
    bound the members' share of the *selected* set instead (e.g. ``min_fraction=0.75``: at least 75 %
    of the chosen exemplars are members). ``name`` is reported when the constraint has to be relaxed.
    """

    members: Sequence[bool] | np.ndarray
    min_count: float = 0.0
    max_count: float | None = None
    name: str = ""
    min_fraction: float | None = None
    max_fraction: float | None = None

    def __post_init__(self):
        members = np.asarray(self.members)
        if members.ndim != 1:
            raise ValueError(f"constraint {self.name!r}: members must be a 1-D vector")
        if members.size and not np.isin(members, (0, 1)).all():
            raise ValueError(f"constraint {self.name!r}: members must be booleans or 0/1")
        object.__setattr__(self, "members", members.astype(bool))
        for label in ("min_count", "max_count", "min_fraction", "max_fraction"):
            value = getattr(self, label)
            if value is not None and not math.isfinite(float(value)):
                raise ValueError(f"constraint {self.name!r}: {label} must be finite, got {value!r}")
        if self.min_count is None:
            object.__setattr__(self, "min_count", 0.0)
        for label in ("min_fraction", "max_fraction"):
            value = getattr(self, label)
            if value is not None and not 0.0 <= float(value) <= 1.0:
                raise ValueError(f"constraint {self.name!r}: {label} must be in [0, 1], got {value!r}")

    def __eq__(self, other):  # numpy members make the dataclass default unusable
        if not isinstance(other, AttributeConstraint):
            return NotImplemented
        return (np.array_equal(self.members, other.members) and self.min_count == other.min_count
                and self.max_count == other.max_count and self.name == other.name
                and self.min_fraction == other.min_fraction and self.max_fraction == other.max_fraction)

    # mutable-array payload: unhashable (the data model's ``__hash__ = None``, which typeshed's object.__hash__ does
    # not allow for)
    __hash__ = None  # type: ignore[assignment]

    def is_satisfied(self, selected: Sequence[int]) -> bool:
        sel = np.asarray(selected, dtype=int)
        count = float(np.asarray(self.members)[sel].sum()) if sel.size else 0.0
        n = float(sel.size)
        ok = count >= float(self.min_count) - _TOL
        if self.max_count is not None:
            ok &= count <= float(self.max_count) + _TOL
        if self.min_fraction is not None:
            ok &= count >= float(self.min_fraction) * n - _TOL
        if self.max_fraction is not None:
            ok &= count <= float(self.max_fraction) * n + _TOL
        return bool(ok)

    def label(self, position: int) -> str:
        return self.name or f"constraint[{position}]"


@dataclass(frozen=True)
class CostLimit:
    """``sum(costs[i] x_i for members i) + shared costs of the members' groups <= capacity``: a budget over part of
    the items, beside the knapsack's ``capacity`` over all of them (e.g. the demos' own tokens, or the evidence's).
    ``members`` is a boolean vector over the items (a sequence of booleans becomes an array); a group's shared cost
    counts when any chosen item of it is a member (a group must lie wholly inside or outside the members)."""

    members: np.ndarray
    capacity: float
    name: str = ""

    def __post_init__(self):
        members = np.asarray(self.members)
        if members.ndim != 1 or (members.size and not np.isin(members, (0, 1)).all()):
            raise ValueError(f"cost limit {self.name!r}: members must be a 1-D vector of booleans or 0/1")
        object.__setattr__(self, "members", members.astype(bool))
        if isinstance(self.capacity, bool) or math.isnan(float(self.capacity)):
            raise ValueError(f"cost limit {self.name!r}: capacity must be a number, got {self.capacity!r}")
        object.__setattr__(self, "capacity", float(self.capacity))

    def __eq__(self, other):
        if not isinstance(other, CostLimit):
            return NotImplemented
        return (np.array_equal(self.members, other.members) and self.capacity == other.capacity
                and self.name == other.name)

    # mutable-array payload: unhashable, as AttributeConstraint (typeshed's object.__hash__ does not admit None)
    __hash__ = None  # type: ignore[assignment]


@dataclass(frozen=True)
class KnapsackSolution:
    """``status``: ``"optimal"`` (every constraint kept), ``"relaxed"`` (some dropped: ``relaxed``) or, from
    :func:`greedy_knapsack`, ``"greedy"``. ``outcome``: how the last solve's selection was found (``OUTCOMES``);
    ``limit``: which limit ended a solve of this selection (``"work"``, ``"time"``; ``""``: none)."""

    selected: tuple[int, ...]
    objective: float
    status: str  # "optimal" | "relaxed" | "greedy"
    relaxed: tuple[str, ...] = ()
    reason: str = ""
    candidates: int = 0  # items left after dominance pruning (what the ILP saw)
    proven_optimal: bool = True  # the last solve proved optimality (False when a limit ended it)
    outcome: str = "optimal"  # "optimal" | "incumbent" | "greedy"
    limit: str = ""  # "" | "work" | "time": the limit that ended a solve of this selection (the last or a relaxed one)
    stats: dict = field(default_factory=dict, compare=False)

    @property
    def limited(self) -> bool:
        """A limit ended a solve of this selection: the best found then, perhaps not the best."""
        return bool(self.limit)


def _validate(values, costs, capacity, max_items, constraints):
    values = np.asarray(values, dtype=float)
    costs = np.asarray(costs, dtype=float)
    if values.ndim != 1 or costs.ndim != 1:
        raise ValueError("values and costs must be 1-D sequences")
    if values.shape != costs.shape:
        raise ValueError(f"values ({values.size}) and costs ({costs.size}) differ in length")
    if not np.isfinite(values).all():
        bad = int(np.flatnonzero(~np.isfinite(values))[0])
        raise ValueError(f"values must be finite: values[{bad}] = {values[bad]!r}")
    if not np.isfinite(costs).all():
        bad = int(np.flatnonzero(~np.isfinite(costs))[0])
        raise ValueError(f"costs must be finite: costs[{bad}] = {costs[bad]!r}")
    if (costs < 0).any():
        bad = int(np.flatnonzero(costs < 0)[0])
        raise ValueError(f"costs must be non-negative: costs[{bad}] = {costs[bad]!r}")
    capacity = float(capacity)
    if math.isnan(capacity):
        raise ValueError("capacity must be a number, got NaN")
    if isinstance(max_items, bool) or int(max_items) != max_items or max_items < 0:
        raise ValueError(f"max_items must be a non-negative integer, got {max_items!r}")
    constraints = list(constraints or ())
    for pos, con in enumerate(constraints):
        if not isinstance(con, AttributeConstraint):
            raise ValueError(f"constraints[{pos}] is not an AttributeConstraint: {con!r}")
        if len(con.members) != values.size:
            raise ValueError(f"{con.label(pos)}: members has {len(con.members)} entries for {values.size} items")
    return values, costs, capacity, int(max_items), constraints


def _validate_groups(groups, group_costs, n: int):
    """``groups``: one group id per item (-1: none); ``group_costs``: the shared cost of each group id."""
    if groups is None:
        if group_costs is not None:
            raise ValueError("group_costs given without groups")
        return np.full(n, -1, dtype=int), np.zeros(0)
    groups = np.asarray(groups)
    if groups.shape != (n,) or (groups.size and not np.issubdtype(groups.dtype, np.integer)):
        raise ValueError(f"groups must be {n} integer group ids (-1: no group), got shape {groups.shape}")
    shared = np.asarray(group_costs if group_costs is not None else [], dtype=float)
    if shared.ndim != 1:
        raise ValueError("group_costs must be a 1-D sequence (one cost per group id)")
    if groups.size and (groups.min() < -1 or groups.max() >= shared.size):
        raise ValueError(f"groups hold ids outside [-1, {shared.size - 1}] (group_costs has {shared.size} entries)")
    if not np.isfinite(shared).all() or (shared < 0).any():
        raise ValueError("group_costs must be finite and non-negative")
    return groups.astype(int), shared


def _validate_kinds(kinds, kind_values, n: int):
    """``kinds``: one kind id per item (-1: none); ``kind_values``: the value of covering each kind id."""
    if kinds is None:
        if kind_values is not None:
            raise ValueError("kind_values given without kinds")
        return np.full(n, -1, dtype=int), np.zeros(0)
    kinds = np.asarray(kinds)
    if kinds.shape != (n,) or (kinds.size and not np.issubdtype(kinds.dtype, np.integer)):
        raise ValueError(f"kinds must be {n} integer kind ids (-1: no kind), got shape {kinds.shape}")
    values = np.asarray(kind_values if kind_values is not None else [], dtype=float)
    if values.ndim != 1:
        raise ValueError("kind_values must be a 1-D sequence (one value per kind id)")
    if kinds.size and (kinds.min() < -1 or kinds.max() >= values.size):
        raise ValueError(f"kinds hold ids outside [-1, {values.size - 1}] (kind_values has {values.size} entries)")
    if not np.isfinite(values).all() or (values < 0).any():
        raise ValueError("kind_values must be finite and non-negative")
    return kinds.astype(int), values


def _validate_covers(covers, cover_values, n: int):
    """``covers``: per element the items covering it (or an ``(n, elements)`` 0/1 matrix); ``cover_values``: each
    element's value. Returns the ``(n, elements)`` boolean matrix and the values."""
    if covers is None:
        if cover_values is not None:
            raise ValueError("cover_values given without covers")
        return np.zeros((n, 0), dtype=bool), np.zeros(0)
    values = np.asarray(cover_values if cover_values is not None else [], dtype=float)
    if values.ndim != 1:
        raise ValueError("cover_values must be a 1-D sequence (one value per element)")
    if not np.isfinite(values).all() or (values < 0).any():
        raise ValueError("cover_values must be finite and non-negative")
    if isinstance(covers, np.ndarray) and covers.ndim == 2:
        if covers.shape != (n, values.size) or (covers.size and not np.isin(covers, (0, 1)).all()):
            raise ValueError(f"covers as a matrix must be ({n}, {values.size}) booleans, got shape {covers.shape}")
        return covers.astype(bool), values
    covers = list(covers)
    if len(covers) != values.size:
        raise ValueError(f"covers lists {len(covers)} elements, cover_values has {values.size}")
    matrix = np.zeros((n, values.size), dtype=bool)
    for e, items in enumerate(covers):
        items = np.asarray(list(items), dtype=np.int64)
        if items.size and (items.min() < 0 or items.max() >= n):
            raise ValueError(f"covers[{e}] names items outside [0, {n - 1}]")
        matrix[items, e] = True
    return matrix, values


def _validate_limits(cost_limits, groups, n: int) -> tuple[CostLimit, ...]:
    """``cost_limits``: :class:`CostLimit`s over the ``n`` items, each group inside or outside each limit."""
    limits = tuple(cost_limits or ())
    for pos, limit in enumerate(limits):
        if not isinstance(limit, CostLimit):
            raise ValueError(f"cost_limits[{pos}] is not a CostLimit: {limit!r}")
        if limit.members.size != n:
            raise ValueError(f"cost limit {limit.name or pos!r}: members has {limit.members.size} entries for {n} "
                             "items")
        grouped = groups >= 0
        inside = {int(g) for g in groups[grouped & limit.members]}
        outside = {int(g) for g in groups[grouped & ~limit.members]}
        if inside & outside:
            raise ValueError(f"cost limit {limit.name or pos!r}: group {min(inside & outside)} has members inside "
                             "and outside it")
    return limits


def _coverage(chosen, kinds, kind_values, cover=None, cover_values=None) -> float:
    """The kind and element values a selection collects: each covered kind's and element's value once."""
    chosen = np.asarray(chosen, dtype=int)
    covered = {int(k) for k in kinds[chosen] if k >= 0}
    total = float(sum(kind_values[k] for k in covered))
    if cover is not None and cover.shape[1] and chosen.size:
        total += float(cover_values[cover[chosen].any(axis=0)].sum())
    return total


def _limits_hold(chosen, costs, groups, shared, limits) -> bool:
    """Every cost limit holds for the selection ``chosen``."""
    chosen = np.asarray(chosen, dtype=int)
    for limit in limits:
        inside = chosen[limit.members[chosen]]
        if _total_cost(inside, costs, groups, shared) > limit.capacity + _TOL:
            return False
    return True


def _total_cost(chosen, costs, groups, shared) -> float:
    """Cost of a selection: its items' own costs plus each of their groups' shared cost once."""
    chosen = np.asarray(chosen, dtype=int)
    used = {int(g) for g in groups[chosen] if g >= 0}
    return float(np.sum(costs[chosen])) + float(sum(shared[g] for g in used))


def prune_dominated(values: np.ndarray, costs: np.ndarray, profiles: np.ndarray, max_items: int,
                    capacity: float, fit_costs: np.ndarray | None = None,
                    dominator_costs: np.ndarray | None = None, caps: np.ndarray | None = None) -> np.ndarray:
    """Indices of the items that can appear in some optimal solution (see the module docstring).

    ``profiles`` is an ``(n, m)`` boolean matrix of constraint memberships; items are only compared with
    items of the same row pattern. ``fit_costs``: what each item costs when chosen alone (default ``costs``;
    with shared group costs, its own cost plus its group's). ``dominator_costs``: what an item costs when it
    replaces another (default ``costs``): with shared group costs, its own cost plus its group's -- an item that
    is at least as valuable and costs, group included, no more than another's own cost dominates it whatever the
    groups (the comparison across groups). ``caps``: per item, the most items of its profile a feasible selection
    holds (default ``max_items``; the same for every item of a profile: e.g. a constraint's ``max_count`` over its
    members), so that many dominators suffice. Returns sorted indices.
    """
    n = values.size
    fits = (costs if fit_costs is None else fit_costs) <= capacity + _TOL
    if max_items <= 0 or not fits.any():
        return np.zeros(0, dtype=int)
    if profiles.shape[1]:
        _, group = np.unique(profiles, axis=0, return_inverse=True)
        group = np.asarray(group).reshape(-1)
    else:
        group = np.zeros(n, dtype=int)
    # Order: group, value descending, cost ascending, index ascending. Every item before j in its
    # group has value >= v_j; it dominates j iff its cost is <= c_j.
    charged = costs if dominator_costs is None else np.asarray(dominator_costs, dtype=float)
    order = np.lexsort((np.arange(n), charged, -values, group))
    keep = np.zeros(n, dtype=bool)
    current_group = None
    cap = max_items
    heap: list[float] = []  # max-heap (negated) of the cap smallest costs seen in the group
    for j in order:
        if not fits[j]:
            continue
        if group[j] != current_group:
            current_group, heap = group[j], []
            cap = max_items if caps is None else max(1, min(max_items, int(caps[j])))
        c = costs[j]
        if len(heap) >= cap and -heap[0] <= c:
            continue  # at least cap earlier items cost no more: dominated
        keep[j] = True
        d = charged[j]
        if len(heap) < cap:
            heapq.heappush(heap, -d)
        elif d < -heap[0]:
            heapq.heapreplace(heap, -d)
    return np.flatnonzero(keep)


def bound_prune(values, costs, capacity, max_items, floor: float, *, fit_costs=None, kinds=None,
                kind_values=None, cover=None, cover_values=None) -> np.ndarray:
    """Indices of the items that can belong to a selection worth at least ``floor`` (e.g. a feasible greedy's
    objective, so an optimal selection survives). Exact: an item goes only when an upper bound on every selection
    containing it is below ``floor``.

    The bound for item i, ignoring attribute constraints (a relaxation): its value as the first of its kind plus
    the ``r_i`` largest entries of a list holding, for every item, its value -- plus its kind's value for the one
    item of largest value of each kind -- counted when positive, where ``r_i`` is the most other items that fit
    beside it (``min(max_items - 1, how many of the cheapest own costs fit in capacity - fit_costs[i])``). Any
    selection's other items are worth at most that: each covered kind's value is collected once, and swapping a
    kind's member for the kind's most valuable item in the list only raises the sum (see DEVELOPERS.md,
    "Exact selection"). ``fit_costs``: what each item costs alone (its own cost plus its group's); the others
    count their own costs only (a group's cost may already be paid). With ``cover`` (an ``(n, elements)`` boolean
    matrix) and ``cover_values``, every item counts the values of all the elements it covers as its own (each
    entry and the item itself; a kind's value then goes on its item of the largest value with its elements):
    a selection collects an element once, so no more than that."""
    values = np.asarray(values, dtype=float)
    costs = np.asarray(costs, dtype=float)
    n = values.size
    fit_costs = costs if fit_costs is None else np.asarray(fit_costs, dtype=float)
    kinds = np.full(n, -1) if kinds is None else np.asarray(kinds)
    kind_values = np.zeros(0) if kind_values is None else np.asarray(kind_values, dtype=float)
    own_kind = np.where(kinds >= 0, kind_values[np.maximum(kinds, 0)] if kind_values.size else 0.0, 0.0)
    own_cover = (np.asarray(cover, dtype=float) @ np.asarray(cover_values, dtype=float)
                 if cover is not None and np.shape(cover)[1] else np.zeros(n))
    entries = values + own_cover
    if (kinds >= 0).any():  # each kind's value once, on its most valuable item (ties: the lower index)
        order = np.lexsort((np.arange(n), -entries, kinds))
        first = order[np.r_[True, kinds[order][1:] != kinds[order][:-1]]]
        first = first[kinds[first] >= 0]
        entries[first] += own_kind[first]
    top = np.r_[0.0, np.cumsum(np.sort(np.maximum(entries, 0.0))[::-1])]  # top[r]: the r largest entries
    cheapest = np.r_[0.0, np.cumsum(np.sort(costs))]  # cheapest[r]: the r cheapest own costs
    # the most other items that fit beside i: counted over all items' cheapest own costs (i's own among them:
    # never fewer than over the others)
    others = np.searchsorted(cheapest, capacity - fit_costs + _TOL, side="right") - 1
    others = np.clip(np.minimum(others, max_items - 1), 0, n - 1)
    bound = values + own_cover + own_kind + top[others]
    keep = (fit_costs <= capacity + _TOL) & (bound >= floor - _TOL * max(1.0, abs(floor)))
    return np.flatnonzero(keep)


def _milp(values, costs, capacity, max_items, constraints, time_limit, groups=None, shared=None, kinds=None,
          kind_values=None, *, work_limit: int = DEFAULT_WORK_LIMIT, cutoff: float | None = None, cover=None,
          cover_values=None, limits=()):
    """Solve the ILP on the given (already pruned) items. Returns (x or None, status string, limit): status
    ``"optimal"``, ``"infeasible"`` (with a ``cutoff``: nothing strictly better than it), ``"limit"`` (x: the
    incumbent) or ``"limit_no_solution"``; limit ``"work"`` / ``"time"`` / ``""``. With ``groups`` (ids into
    ``shared``, -1 for none), one extra binary per used group pays its shared cost; with ``kinds`` (ids into
    ``kind_values``), one extra binary per present kind collects its value once; with ``cover`` (an ``(n,
    elements)`` boolean matrix), one extra binary per coverable element of positive value collects it once;
    ``limits``: :class:`CostLimit` rows over the items. ``cutoff``: an objective value already achieved (the
    greedy's): only solutions better than it are searched for."""
    n = values.size
    used = sorted({int(g) for g in groups if g >= 0}) if groups is not None else []
    present = sorted({int(c) for c in kinds if c >= 0}) if kinds is not None else []
    elements = ([int(e) for e in np.flatnonzero(cover.any(axis=0) & (cover_values > 0))]
                if cover is not None and cover.shape[1] else [])
    k = len(used) + len(present) + len(elements)
    column = {g: n + j for j, g in enumerate(used)}
    kind_column = {c: n + len(used) + j for j, c in enumerate(present)}
    element_column = {e: n + len(used) + len(present) + j for j, e in enumerate(elements)}
    pad = np.zeros(k)
    group_costs = [shared[g] for g in used]
    rest = np.zeros(len(present) + len(elements))
    rows = [np.concatenate([costs, group_costs, rest]), np.concatenate([np.ones(n), pad])]
    lower = [-np.inf, -np.inf]
    upper = [capacity, float(max_items)]
    for i in range(n):  # x_i <= y_g
        if groups is not None and groups[i] >= 0:
            link = np.zeros(n + k)
            link[i], link[column[int(groups[i])]] = 1.0, -1.0
            rows.append(link)
            lower.append(-np.inf)
            upper.append(0.0)
    for c in present:  # z_c <= sum of the kind's x_i
        link = np.zeros(n + k)
        link[np.flatnonzero(kinds == c)] = -1.0
        link[kind_column[c]] = 1.0
        rows.append(link)
        lower.append(-np.inf)
        upper.append(0.0)
    for e in elements:  # z_e <= sum of its covering x_i
        link = np.zeros(n + k)
        link[np.flatnonzero(cover[:, e])] = -1.0
        link[element_column[e]] = 1.0
        rows.append(link)
        lower.append(-np.inf)
        upper.append(0.0)
    for limit in limits:  # the members' costs and their groups' shared costs
        in_group = [bool(limit.members[groups == g].any()) for g in used]
        rows.append(np.concatenate([np.where(limit.members, costs, 0.0),
                                    np.where(in_group, group_costs, 0.0) if used else [], rest]))
        lower.append(-np.inf)
        upper.append(limit.capacity)
    for con in constraints:
        m = np.concatenate([con.members.astype(float), pad])
        if con.min_count > 0 or con.max_count is not None:
            rows.append(m)
            lower.append(float(con.min_count) if con.min_count > 0 else -np.inf)
            upper.append(float(con.max_count) if con.max_count is not None else np.inf)
        if con.min_fraction is not None and con.min_fraction > 0:
            rows.append(m - np.concatenate([np.full(n, float(con.min_fraction)), pad]))
            lower.append(0.0)
            upper.append(np.inf)
        if con.max_fraction is not None and con.max_fraction < 1:
            rows.append(m - np.concatenate([np.full(n, float(con.max_fraction)), pad]))
            lower.append(-np.inf)
            upper.append(0.0)
    # presolve off: the dominance pruning already did the useful reductions; HiGHS's presolve costs
    # ~1 ms a call on these models (median 3.3 -> 2.4 ms at k=200, M=8, four constraints).
    options = {"mip_rel_gap": 0.0, "time_limit": float(time_limit), "presolve": False,
               **_highs_options(work_limit, cutoff)}
    objective = np.concatenate([-values, np.zeros(len(used)), [-kind_values[c] for c in present],
                                [-cover_values[e] for e in elements]])
    result = milp(objective, integrality=np.ones(n + k), bounds=Bounds(0, 1),
                  constraints=LinearConstraint(csr_array(np.vstack(rows)), lower, upper), options=options)
    if result.status == 0:
        return np.round(result.x[:n]).astype(bool), "optimal", ""
    if result.status == 2:
        return None, "infeasible", ""
    limit = "time" if "time limit" in str(result.message).lower() else "work"
    if result.x is not None:  # a limit with an incumbent
        return np.round(result.x[:n]).astype(bool), "limit", limit
    return None, "limit_no_solution", limit


def _highs_options(work_limit: int, cutoff: float | None) -> dict:
    """HiGHS options passed through ``milp``: feasibility jump off (~6 ms a tiny model), one thread and at most
    ``work_limit`` nodes (a counted limit: deterministic whatever the load), the ``cutoff`` (HiGHS minimises:
    only solutions below ``-cutoff`` are searched for). An option the bundled HiGHS does not know is left out."""
    wanted: dict[str, bool | int | float] = {_FJ_OPTION: False, "threads": 1, "mip_max_nodes": int(work_limit)}
    if cutoff is not None:
        wanted["objective_bound"] = -float(cutoff)
    known = _highs_known_options()
    _silence_known_options(known)
    return {name: value for name, value in wanted.items() if name in known}


def _silence_known_options(known: frozenset) -> None:
    """scipy's "Unrecognized options detected" warning for a call passing only ``known`` options of ours, ignored
    (a process-wide filter on that exact message). Put back whenever it is gone: a caller's ``catch_warnings``
    block restores the filters it found, dropping one added inside it."""
    if not known:
        return
    names = "|".join(re.escape(name) for name in sorted(known))
    message = rf"Unrecognized options detected: \{{'(?:{names})'(?:, '(?:{names})')*\}}"
    if not any(f[0] == "ignore" and f[2] is RuntimeWarning and getattr(f[1], "pattern", None) == message
               for f in warnings.filters):
        warnings.filterwarnings("ignore", category=RuntimeWarning, message=message)


_PASSED_OPTIONS = {_FJ_OPTION: False, "threads": 1, "mip_max_nodes": 1, "objective_bound": 1.0}


@functools.cache
def _highs_known_options() -> frozenset:
    """The options of :func:`_highs_options` the bundled HiGHS knows, probed on the first solve, not at import.

    ``milp`` hands options it does not know itself to HiGHS verbatim with a ``RuntimeWarning``; HiGHS warns
    (``OptimizeWarning``) about options it does not know either, as an older build would. scipy's warning for a
    call passing only known ones of ours is silenced (``_silence_known_options``: a process-wide filter on that exact
    message; ``warnings.catch_warnings`` around each solve would race in threads)."""
    known = set()
    for option, value in _PASSED_OPTIONS.items():
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                milp(np.array([-1.0]), integrality=np.ones(1), bounds=Bounds(0, 1), options={option: value})
            except Exception:  # noqa: BLE001 - any failure means: do not pass the option
                continue
        if not any(issubclass(w.category, OptimizeWarning) for w in caught):
            known.add(option)
    return frozenset(known)


def _enforce_limits(chosen: np.ndarray, values, costs, capacity, max_items, groups, shared, limits=()) -> np.ndarray:
    """Exact re-check on the caller's numbers: drop the least valuable items until every limit holds."""
    kept = list(chosen[np.argsort(-values[chosen], kind="stable")])
    while kept and (len(kept) > max_items or _total_cost(kept, costs, groups, shared) > capacity + _TOL
                    or not _limits_hold(kept, costs, groups, shared, limits)):
        kept.pop()
    return np.asarray(kept, dtype=int)


def _objective(chosen, values, kinds, kind_values, cover=None, cover_values=None) -> float:
    chosen = np.asarray(chosen, dtype=int)
    return float(values[chosen].sum()) + _coverage(chosen, kinds, kind_values, cover, cover_values) \
        if chosen.size else 0.0


def constrained_greedy(values, costs, capacity, max_items, constraints=(), *, groups=None, group_costs=None,
                       kinds=None, kind_values=None, covers=None, cover_values=None,
                       cost_limits=()) -> tuple[int, ...] | None:
    """A greedy selection of :func:`solve_knapsack`'s objective that satisfies every constraint, or ``None`` when
    this greedy finds none (the constraints may still be satisfiable).

    First each constraint with a positive ``min_count``, in the order given, takes its members of the largest
    marginal value that still fit (whatever their value: the ILP would too); then the items of the largest
    positive marginal value that fit and keep every upper bound (counts and fractions), as
    :func:`greedy_knapsack` (which this is without constraints). A marginal value is an item's value plus its
    kind's value when the kind is not yet covered, plus the values of the elements it covers that no chosen item
    covers yet; its cost, its own plus its group's shared cost when the group is not yet in (which must also keep
    every cost limit). Ties go to the lower index. The result is checked against every constraint. Returns the
    indices in the order taken."""
    values, costs, capacity, max_items, constraints = _validate(values, costs, capacity, max_items, constraints)
    n = values.size
    groups, shared = _validate_groups(groups, group_costs, n)
    kinds, kind_values = _validate_kinds(kinds, kind_values, n)
    cover, cover_values = _validate_covers(covers, cover_values, n)
    limits = _validate_limits(cost_limits, groups, n)
    return _greedy(values, costs, capacity, max_items, constraints, groups, shared, kinds, kind_values, cover=cover,
                   cover_values=cover_values, limits=limits)


def _best_greedy(values, costs, capacity, max_items, constraints, groups, shared, kinds, kind_values, *, cover=None,
                 cover_values=None, limits=()):
    """The better of two greedy selections satisfying the constraints -- :func:`constrained_greedy`'s, and the
    same procedure opening with the item of the largest own value (which the marginal order can crowd out when it
    is expensive) -- and its objective; ``(None, None)`` when neither satisfies the constraints."""
    best: tuple[int, ...] | None = None
    best_value: float | None = None
    seeds = [None] + ([int(np.argmax(values))] if values.size else [])
    extras = {"cover": cover, "cover_values": cover_values, "limits": limits} \
        if (cover is not None and cover.shape[1]) or limits else {}
    for seed in seeds:
        chosen = _greedy(values, costs, capacity, max_items, constraints, groups, shared, kinds, kind_values,
                         first=seed, **extras)
        if chosen is not None:
            value = _objective(chosen, values, kinds, kind_values, cover, cover_values)
            if best_value is None or value > best_value + _TOL:
                best, best_value = chosen, value
    return best, best_value


def _greedy(values, costs, capacity, max_items, constraints, groups, shared, kinds, kind_values, first=None, *,
            cover=None, cover_values=None, limits=()):
    """:func:`constrained_greedy`'s procedure; ``first``: an item taken before anything else (when it fits)."""
    n = values.size
    members = np.array([c.members for c in constraints], dtype=bool).reshape(len(constraints), n)
    counts = np.zeros(len(constraints))
    chosen: list[int] = []
    used = 0.0
    paid = np.zeros(shared.size, dtype=bool)
    covered = np.zeros(kind_values.size, dtype=bool)
    available = np.ones(n, dtype=bool)
    in_group, in_kind = groups >= 0, kinds >= 0
    group_cost = np.where(in_group, shared[np.maximum(groups, 0)] if shared.size else 0.0, 0.0)
    kind_value = np.where(in_kind, kind_values[np.maximum(kinds, 0)] if kind_values.size else 0.0, 0.0)
    has_cover = cover is not None and cover.shape[1] > 0
    open_elements = np.ones(cover.shape[1] if has_cover else 0, dtype=bool)  # elements no chosen item covers yet
    limit_used = np.zeros(len(limits))

    def margins():
        extra = costs + np.where(in_group & ~paid[np.maximum(groups, 0)] if shared.size else in_group, group_cost, 0.0)
        gain = values + np.where(in_kind & ~covered[np.maximum(kinds, 0)] if kind_values.size else in_kind,
                                 kind_value, 0.0)
        if has_cover:
            gain = gain + cover[:, open_elements].astype(float) @ cover_values[open_elements]
        return extra, gain

    def within_limits(extra) -> np.ndarray:  # items whose addition keeps every cost limit
        ok = np.ones(n, dtype=bool)
        for j, limit in enumerate(limits):
            ok &= ~limit.members | (limit_used[j] + extra <= limit.capacity + _TOL)
        return ok

    def keeps_upper_bounds() -> np.ndarray:  # items whose addition keeps every max count and max fraction
        ok = np.ones(n, dtype=bool)
        size = len(chosen) + 1
        for j, con in enumerate(constraints):
            after = counts[j] + members[j]
            if con.max_count is not None:
                ok &= after <= float(con.max_count) + _TOL
            if con.max_fraction is not None:
                ok &= after <= float(con.max_fraction) * size + _TOL
        return ok

    def take(mask) -> bool:
        nonlocal used
        extra, gain = margins()
        fits = mask & available & (used + extra <= capacity + _TOL) & keeps_upper_bounds()
        if limits:
            fits &= within_limits(extra)
        if len(chosen) >= max_items or not fits.any():
            return False
        candidates = np.flatnonzero(fits)
        best = int(candidates[np.lexsort((candidates, -gain[candidates]))[0]])
        chosen.append(best)
        available[best] = False
        used += float(extra[best])
        counts[:] += members[:, best]
        for j, limit in enumerate(limits):
            if limit.members[best]:
                limit_used[j] += float(extra[best])
        if groups[best] >= 0:
            paid[groups[best]] = True
        if kinds[best] >= 0:
            covered[kinds[best]] = True
        if has_cover:
            open_elements[cover[best]] = False
        return True

    if first is not None:
        only = np.zeros(n, dtype=bool)
        only[int(first)] = True
        if not take(only):
            return None
    for j, con in enumerate(constraints):
        while con.min_count > 0 and counts[j] < float(con.min_count) - _TOL:
            if not take(members[j]):
                return None
    while take(margins()[1] > 0):
        pass
    if not all(con.is_satisfied(chosen) for con in constraints):
        return None
    return tuple(chosen)


def solve_knapsack(values, costs, capacity, max_items, constraints=(), time_limit: float = DEFAULT_TIME_LIMIT, *,
                   work_limit: int = DEFAULT_WORK_LIMIT, groups=None, group_costs=None, kinds=None,
                   kind_values=None, search_limit: int = exact_search.DEFAULT_NODE_LIMIT, covers=None,
                   cover_values=None, cost_limits=()) -> KnapsackSolution:
    """Choose items maximising total value under a capacity, a maximum count and attribute constraints.

    Parameters
    ----------
    values: per-item value (e.g. cosine similarity to the query); finite.
    costs: per-item cost (e.g. prompt tokens of the exemplar); finite, >= 0.
    capacity: total cost allowed. A negative capacity (the query alone exceeds the budget) selects nothing.
    max_items: the most items that may be chosen (>= 0).
    constraints: ``AttributeConstraint`` objects. Infeasible ones are dropped last given first.
    time_limit: wall-clock seconds for each ILP solve (the safety net behind ``work_limit``).
    work_limit: branch-and-bound nodes for each ILP solve (:data:`DEFAULT_WORK_LIMIT`). When a limit ends a
        solve, the better of the solver's best and :func:`constrained_greedy`'s selection is returned.
    groups / group_costs: optional shared costs: ``groups[i]`` is item i's group id (-1: none) and
        ``group_costs[g]`` a cost paid once when any item of group g is chosen (see the module docstring).
    kinds / kind_values: optional coverage values: ``kinds[i]`` is item i's kind id (-1: none) and
        ``kind_values[k]`` (>= 0) a value collected once when any item of kind k is chosen.
    covers / cover_values: optional coverage where an item may cover several elements: ``covers[e]`` lists the
        items covering element e (or ``covers`` is an ``(items, elements)`` 0/1 matrix) and ``cover_values[e]``
        (>= 0) is collected once when any of them is chosen.
    cost_limits: optional :class:`CostLimit` budgets over part of the items, beside ``capacity``.

    Returns a ``KnapsackSolution``: ``selected`` (indices, highest value first), ``objective``,
    ``status`` (``"optimal"`` or ``"relaxed"``), ``relaxed`` (names of dropped constraints), ``outcome``
    (``"optimal"``, ``"incumbent"`` or ``"greedy"``), ``limit`` (``"work"`` / ``"time"`` when a limit ended a
    solve), ``reason`` (why the selection is empty, constraints were dropped or a limit fired).

    Three steps: the problem is validated once (:class:`_Problem`); each :func:`_attempt` solves it under the
    constraints still kept (greedy, pruning, exact search or ``milp``) and returns a typed :class:`_Attempt`;
    while an attempt finds no selection the last constraint is dropped (:class:`_Relaxation`); :func:`_explain`
    turns the last attempt into the solution and its reasons.
    """
    problem, constraints = _problem(values, costs, capacity, max_items, constraints, time_limit, work_limit,
                                    search_limit, groups, group_costs, kinds, kind_values, covers, cover_values,
                                    cost_limits)
    why = _why_nothing_fits(problem)
    if why:
        return _empty_solution(constraints, why)
    attempt, relaxation = _solve_relaxing(problem, constraints)
    return _explain(problem, attempt, relaxation)


@dataclass(frozen=True)
class _Problem:
    """A validated instance, the same while constraints are dropped: the items' numbers (``alone``: what each item
    costs when chosen alone, its group's shared cost included) and the limits of each solve."""

    values: np.ndarray
    costs: np.ndarray
    capacity: float
    max_items: int
    groups: np.ndarray
    shared: np.ndarray
    kinds: np.ndarray
    kind_values: np.ndarray
    alone: np.ndarray
    time_limit: float
    work_limit: int
    search_limit: int
    cover: np.ndarray  # (items, elements) booleans: which elements each item covers
    cover_values: np.ndarray
    limits: tuple[CostLimit, ...] = ()

    @property
    def has_groups(self) -> bool:
        return bool((self.groups >= 0).any())

    @property
    def has_kinds(self) -> bool:
        return bool((self.kinds >= 0).any())

    @property
    def has_covers(self) -> bool:
        return bool(self.cover.shape[1])

    @property
    def covering(self) -> dict:
        """The element coverage and cost limits as the greedy, ``milp`` and the bound take them (``{}``: none)."""
        if not self.has_covers and not self.limits:
            return {}
        return {"cover": self.cover, "cover_values": self.cover_values, "limits": self.limits}

    def objective(self, chosen) -> float:
        return _objective(chosen, self.values, self.kinds, self.kind_values, self.cover, self.cover_values)

    def limit_name(self, limit: str) -> str:
        """How a reason names the limit ``limit`` (``"work"``, ``"time"``; ``""``: a limit)."""
        return _LIMIT_NAMES[limit](self.work_limit, self.time_limit)


def _problem(values, costs, capacity, max_items, constraints, time_limit, work_limit, search_limit, groups,
             group_costs, kinds, kind_values, covers=None, cover_values=None,
             cost_limits=()) -> tuple[_Problem, list[AttributeConstraint]]:
    """:func:`solve_knapsack`'s arguments checked (a ``ValueError`` naming the first bad one) and put together."""
    values, costs, capacity, max_items, constraints = _validate(values, costs, capacity, max_items, constraints)
    if isinstance(work_limit, bool) or int(work_limit) != work_limit or work_limit < 1:
        raise ValueError(f"work_limit must be a positive integer (branch-and-bound nodes), got {work_limit!r}")
    if isinstance(time_limit, bool) or not float(time_limit) > 0:
        raise ValueError(f"time_limit must be a number of seconds > 0, got {time_limit!r}")
    if isinstance(search_limit, bool) or int(search_limit) != search_limit or search_limit < 1:
        raise ValueError(f"search_limit must be a positive integer (sets the exact search considers), "
                         f"got {search_limit!r}")
    n = values.size
    groups, shared = _validate_groups(groups, group_costs, n)
    kinds, kind_values = _validate_kinds(kinds, kind_values, n)
    cover, cover_values = _validate_covers(covers, cover_values, n)
    limits = _validate_limits(cost_limits, groups, n)
    # what one item costs alone: its own cost plus its group's shared cost
    alone = costs + np.where(groups >= 0, shared[np.maximum(groups, 0)] if shared.size else 0.0, 0.0)
    return _Problem(values, costs, capacity, max_items, groups, shared, kinds, kind_values, alone, time_limit,
                    work_limit, search_limit, cover, cover_values, limits), constraints


# -- prune: what can never be chosen, and what an optimal selection can do without --------------------------------
def _why_nothing_fits(problem: _Problem) -> str:
    """Why no item can be chosen whatever the constraints (``""``: some item can)."""
    p = problem
    if p.values.size == 0:
        return "no candidate items"
    if p.max_items == 0:
        return "max_items is 0"
    if p.capacity < 0:
        return f"capacity is negative ({p.capacity:g}): the query prompt alone exceeds the budget"
    if not (p.alone <= p.capacity + _TOL).any():
        return f"every item costs more than the capacity ({p.capacity:g}; cheapest item {p.alone.min():g})"
    return ""


def _prune(problem: _Problem, active: Sequence[AttributeConstraint], cutoff: float | None) -> np.ndarray:
    """The items an optimal selection under the ``active`` constraints may need (sorted indices): those that fit,
    less the dominated ones (:func:`prune_dominated`) and, with a ``cutoff`` (a greedy's objective), those that
    cannot be in a selection as good (:func:`bound_prune`)."""
    p = problem
    # items are compared with items of the same constraint memberships and kind (a swap inside a kind keeps
    # its coverage value), of the same cover set and cost limits, and first of the same group (a swap inside a
    # group keeps its shared cost)
    columns = ([c.members for c in active] + ([p.kinds] if p.has_kinds else [])
               + ([p.cover[:, e] for e in range(p.cover.shape[1])] if p.has_covers else [])
               + [limit.members for limit in p.limits])
    profiles = np.column_stack(columns) if columns else np.zeros((p.values.size, 0), dtype=bool)
    within = np.column_stack([profiles, p.groups]) if p.has_groups else profiles
    caps = _profile_caps(p, active) if p.covering else None
    keep = prune_dominated(p.values, p.costs, within, p.max_items, p.capacity, fit_costs=p.alone, caps=caps)
    if p.has_groups:  # then across groups: an item whose cost, group included, is at most another's own cost
        sub = prune_dominated(p.values[keep], p.costs[keep], profiles[keep], p.max_items, p.capacity,
                              fit_costs=p.alone[keep], dominator_costs=p.alone[keep],
                              caps=None if caps is None else caps[keep])
        keep = keep[sub]
    if cutoff is not None:  # and what cannot be in a selection as good as the greedy's
        keep = np.intersect1d(keep, bound_prune(p.values, p.costs, p.capacity, p.max_items, cutoff,
                                                fit_costs=p.alone, kinds=p.kinds if p.has_kinds else None,
                                                kind_values=p.kind_values,
                                                cover=p.cover if p.has_covers else None,
                                                cover_values=p.cover_values))
    return keep


def _profile_caps(problem: _Problem, active: Sequence[AttributeConstraint]) -> np.ndarray:
    """Per item, the most items of its constraint profile a selection holds: ``max_items``, or less where a constraint
    it is a member of has a smaller ``max_count`` (the demos' M in a problem of demos and evidence pieces). Used with
    covers or cost limits only, so that selections without them are pruned exactly as before."""
    caps = np.full(problem.values.size, problem.max_items, dtype=np.int64)
    for con in active:
        if con.max_count is not None:
            caps[con.members] = np.minimum(caps[con.members], max(0, math.floor(con.max_count + _TOL)))
    return caps


# -- attempt: one solve under the constraints still kept ------------------------------------------------------------
@dataclass(frozen=True)
class _Attempt:
    """What one solve under the active constraints found. ``selected``: item indices, ``None`` when it found no
    selection (no set satisfies the constraints, or ``limit`` ended the search before one was found);
    ``candidates``: the items left after pruning; ``outcome``: how ``selected`` was found (``OUTCOMES``);
    ``limit``: the limit that ended this solve (``""``: none); ``unfound``: it came before the solver found any
    selection (``selected`` is then the greedy's)."""

    selected: np.ndarray | None
    candidates: np.ndarray
    outcome: str = "optimal"
    limit: str = ""
    unfound: bool = False


def _attempt(problem: _Problem, active: Sequence[AttributeConstraint]) -> _Attempt:
    """Solve once under the ``active`` constraints: the best greedy selection (:func:`_best_greedy`) and pruning
    against it, then the exact search for small M, ``milp`` when the search does not settle it. When a limit ends
    ``milp``, the better of its best and the greedy's (or the stopped search's) selection."""
    p = problem
    greedy, cutoff = _best_greedy(p.values, p.costs, p.capacity, p.max_items, active, p.groups, p.shared, p.kinds,
                                  p.kind_values, **p.covering)
    keep = _prune(p, active, cutoff)
    sub_constraints = [AttributeConstraint(np.asarray(c.members)[keep], c.min_count, c.max_count, c.name,
                                           c.min_fraction, c.max_fraction) for c in active]
    if not keep.size:  # no item can be in a selection better than the greedy's (all of worth <= 0): it is optimal
        return _Attempt(None if greedy is None else np.asarray(greedy, dtype=int), keep)
    held = "greedy"  # what the selection in hand (``greedy``) is, should a limit end the search
    # small M: the exact search, milp only if it stops early (covers and cost limits: milp decides)
    if p.max_items <= exact_search.MAX_ITEMS and not p.covering:
        found = exact_search.exact_search(
            p.values[keep], p.costs[keep], p.capacity, p.max_items, sub_constraints, p.groups[keep], p.shared,
            p.kinds[keep], p.kind_values, floor=-np.inf if cutoff is None else cutoff, node_limit=p.search_limit)
        if found.proven:
            if found.selected is not None:
                return _Attempt(keep[list(found.selected)], keep)
            if greedy is not None:  # nothing beats the greedy: it is optimal
                return _Attempt(np.asarray(greedy, dtype=int), keep)
            return _Attempt(None, keep)  # no set satisfies the active constraints
        if found.selected is not None:  # stopped early: its best is the selection to beat
            greedy, cutoff, held = tuple(int(i) for i in keep[list(found.selected)]), found.objective, "incumbent"
    x, status, limit = _milp(p.values[keep], p.costs[keep], p.capacity, p.max_items, sub_constraints, p.time_limit,
                             p.groups[keep] if p.has_groups else None, p.shared,
                             p.kinds[keep] if p.has_kinds else None, p.kind_values, work_limit=p.work_limit,
                             cutoff=cutoff, **_kept_covering(p, keep))
    if status == "infeasible":  # no set satisfies the constraints or, with a cutoff, beats the greedy (then optimal)
        return _Attempt(None if greedy is None else np.asarray(greedy, dtype=int), keep)
    if status == "limit_no_solution":
        if greedy is None:
            return _Attempt(None, keep, limit=limit)
        return _Attempt(np.asarray(greedy, dtype=int), keep, outcome=held, limit=limit, unfound=True)
    proven = status == "optimal"
    chosen, outcome = keep[x], "optimal" if proven else "incumbent"
    if greedy is not None and p.objective(greedy) > p.objective(chosen) + _TOL:
        chosen, outcome = np.asarray(greedy, dtype=int), "optimal" if proven else held
    return _Attempt(chosen, keep, outcome=outcome, limit=limit)


def _kept_covering(problem: _Problem, keep: np.ndarray) -> dict:
    """The problem's covers and cost limits restricted to the items ``keep`` (for ``milp``; ``{}``: none)."""
    p = problem
    if not p.covering:
        return {}
    return {"cover": p.cover[keep], "cover_values": p.cover_values,
            "limits": tuple(CostLimit(limit.members[keep], limit.capacity, limit.name) for limit in p.limits)}


# -- explain: the constraints dropped, and the solution with its reasons -------------------------------------------
@dataclass
class _Relaxation:
    """The constraints still kept, those dropped (last given first) and what the attempts so far reported: the first
    limit that ended one (it marks the selection) and the notes for the reason."""

    active: list[AttributeConstraint]
    relaxed: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    limit: str = ""

    def record(self, attempt: _Attempt, problem: _Problem) -> None:
        self.limit = self.limit or attempt.limit
        if attempt.selected is None and attempt.limit:
            self.notes.append(f"the {problem.limit_name(attempt.limit)} ended the search before a feasible "
                              "selection was found")

    def drop_last(self) -> None:
        dropped = self.active.pop()
        self.relaxed.append(dropped.label(len(self.active)))


def _solve_relaxing(problem: _Problem, constraints: list[AttributeConstraint]) -> tuple[_Attempt, _Relaxation]:
    """Attempts under fewer and fewer constraints (the last given dropped first) until one finds a selection."""
    relaxation = _Relaxation(list(constraints))
    while True:
        attempt = _attempt(problem, relaxation.active)
        relaxation.record(attempt, problem)
        if attempt.selected is not None:
            return attempt, relaxation
        if not relaxation.active:  # cannot happen: without attribute constraints the greedy is always a selection
            return dataclasses.replace(attempt, selected=np.zeros(0, dtype=int), outcome="greedy"), relaxation
        relaxation.drop_last()


def _empty_solution(constraints: Sequence[AttributeConstraint], why: str) -> KnapsackSolution:
    """The empty selection when nothing can be chosen (``why``), with the constraints it violates dropped."""
    # Only a positive min_count excludes the empty selection (fractions of nothing hold). Dropping last first,
    # everything from the end down to the first such constraint goes.
    required = [i for i, con in enumerate(constraints) if con.min_count > 0]
    dropped = tuple(constraints[i].label(i) for i in range(len(constraints) - 1, required[0] - 1, -1)) \
        if required else ()
    return KnapsackSolution((), 0.0, "relaxed" if dropped else "optimal", dropped, reason=f"empty selection: {why}")


def _explain(problem: _Problem, attempt: _Attempt, relaxation: _Relaxation) -> KnapsackSolution:
    """The solution of the last attempt: its selection re-checked against the limits in exact arithmetic, highest
    marginal value first, the status and the reason (constraints dropped, a limit that fired, an empty selection)."""
    p = problem
    assert attempt.selected is not None  # _solve_relaxing returns an attempt with a selection
    # an item's value as the first of its kind (what it can add at most): for the re-check and the order
    marginal = p.values + np.where(p.kinds >= 0, p.kind_values[np.maximum(p.kinds, 0)] if p.kind_values.size
                                   else 0.0, 0.0)
    if p.has_covers:  # and every element it covers
        marginal = marginal + p.cover.astype(float) @ p.cover_values
    chosen = _enforce_limits(attempt.selected, marginal, p.costs, p.capacity, p.max_items, p.groups, p.shared,
                             p.limits)
    order = sorted(chosen.tolist(), key=lambda i: (-marginal[i], i))
    objective = p.objective(order)
    notes = list(relaxation.notes)
    if relaxation.relaxed:
        notes.insert(0, "infeasible constraints dropped (last given first): " + ", ".join(relaxation.relaxed))
    if attempt.outcome != "optimal":
        notes.append(f"the {p.limit_name(relaxation.limit)} ended the search: "
                     + ("the solver's best selection" if attempt.outcome == "incumbent" else
                        "the greedy selection (milp had found none)" if attempt.unfound else
                        "the greedy selection (better than the solver's best)"))
    if not order:
        notes.append("empty selection: every candidate's value is <= 0 (the knapsack adds only items of positive "
                     f"value; the highest is {marginal.max():g})" if (marginal <= 0).all() else
                     "empty selection: no item improves the objective within the limits")
    return KnapsackSolution(tuple(int(i) for i in order), objective, "relaxed" if relaxation.relaxed else "optimal",
                            tuple(relaxation.relaxed), reason="; ".join(notes), candidates=int(attempt.candidates.size),
                            proven_optimal=attempt.outcome == "optimal", outcome=attempt.outcome,
                            limit=relaxation.limit)


_LIMIT_NAMES = {"work": lambda nodes, seconds: f"work limit ({nodes:,} nodes)",
                "time": lambda nodes, seconds: f"time limit ({seconds:g} s)",
                "": lambda nodes, seconds: "limit"}


def greedy_knapsack(values, costs, capacity, max_items, *, groups=None, group_costs=None, kinds=None,
                    kind_values=None, covers=None, cover_values=None, cost_limits=(),
                    constraints=()) -> KnapsackSolution:
    """The objective of :func:`solve_knapsack` solved greedily: repeatedly take the item of the largest marginal
    value (its own value, plus its kind's value when the kind is not yet covered, plus the values of the elements
    of ``covers`` it covers that are not yet covered) among those that still fit (its cost, plus its group's shared
    cost when the group is not yet in, within ``capacity`` and every cost limit), while that value is positive and
    fewer than ``max_items`` are taken. The knapsack's own greedy: what the ILP must beat. ``selected`` is in the
    order taken. With ``constraints`` (``AttributeConstraint``s) it is :func:`constrained_greedy`'s selection,
    the constraints dropped last given first (``relaxed``) while it finds none, as ``solve_knapsack`` drops them."""
    values, costs, capacity, max_items, constraints = _validate(values, costs, capacity, max_items, constraints)
    n = values.size
    groups, shared = _validate_groups(groups, group_costs, n)
    kinds, kind_values = _validate_kinds(kinds, kind_values, n)
    cover, cover_values = _validate_covers(covers, cover_values, n)
    limits = _validate_limits(cost_limits, groups, n)
    extras = {"cover": cover, "cover_values": cover_values, "limits": limits} if cover.shape[1] or limits else {}
    active, relaxed = list(constraints), []
    found = _greedy(values, costs, capacity, max_items, active, groups, shared, kinds, kind_values, **extras)
    while found is None and active:
        relaxed.append(active[-1].label(len(active) - 1))
        active.pop()
        found = _greedy(values, costs, capacity, max_items, active, groups, shared, kinds, kind_values, **extras)
    chosen = list(found or ())
    objective = _objective(chosen, values, kinds, kind_values, cover, cover_values)
    notes = ["infeasible constraints dropped (last given first): " + ", ".join(relaxed)] if relaxed else []
    if not chosen:
        notes.append("empty selection: no item of positive value fits" if max_items else
                     "empty selection: max_items is 0")
    return KnapsackSolution(tuple(chosen), objective, "relaxed" if relaxed else "greedy", tuple(relaxed),
                            reason="; ".join(notes), candidates=n, proven_optimal=False, outcome="greedy")
