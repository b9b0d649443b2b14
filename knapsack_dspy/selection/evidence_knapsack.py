"""One call's demos and evidence pieces chosen together: the knapsack over both, and the two orders that choose the
demos first (pure numpy; the DSPy side -- measuring, embedding, rendering -- is ``modules/evidence_selection.py``).

An input field that holds *pieces* (a RAG program's passages, a document's table rows and paragraphs) offers each
piece as an item beside the selector's demo candidates:

- a piece's **value** is ``weight * (relevance_i + coverage)``: ``relevance_i`` its cosine similarity to the query
  (clipped at 0), ``coverage`` the query's terms it shows (``selection/query_terms.py``), each term worth
  ``1 / |terms|`` once whichever shown piece contains it (a cover value: diminishing returns, optimised exactly);
  ``weight`` (``SelectionConfig.evidence_weight``) is the stated exchange rate with a demo's value, and the
  selector's token price (``DemoKnapsack.token_price``) is charged on a piece's own tokens as on a demo's;
- a piece's **cost** is its own tokens; a *fixed part* it needs (a table's header rows) is a group whose cost is paid
  once when any piece needing it is shown, as a document's table is for demos;
- the **constraints**: everything within the capacity the budget leaves (``capacity``), the demos within the
  exemplar budget and at most M, the pieces within ``evidence_budget``, at least one piece (relaxed, as constraints
  are, when no piece fits).

:func:`choose_jointly` solves one knapsack over demos and pieces (the selector's :class:`DemoKnapsack` beside the
pieces: ``solve_knapsack`` with its covers, or its greedy). :func:`choose_sequentially` runs the selector first, at
the capacity left after the most relevant piece and its fixed part, then chooses the pieces in what is left: by a
knapsack (``"sequential"``) or in relevance order while they fit (``"relevance"``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from knapsack_dspy.selection.demo_knapsack import DemoKnapsack
from knapsack_dspy.selection.exemplar_pool import (
    ExemplarPool,
    Selection,
    SelectionRequest,
    make_selection,
    shown_before,
)
from knapsack_dspy.selection.knapsack import (
    DEFAULT_TIME_LIMIT,
    DEFAULT_WORK_LIMIT,
    AttributeConstraint,
    CostLimit,
    greedy_knapsack,
    solve_knapsack,
)
from knapsack_dspy.selection.selectors.base import ExemplarSelector, within_new_tokens

__all__ = ["EvidenceChoice", "EvidencePieces", "choose_jointly", "choose_sequentially", "least_worth_per_token",
           "without_demo"]

#: The constraints a joint solve adds (their names are what ``relaxed`` reports).
AT_MOST_M = "demos: at most max_exemplars"
AT_LEAST_ONE_PIECE = "evidence: at least one piece"


@dataclass(frozen=True)
class EvidencePieces:
    """The pieces one call offers, every selectable field's in one list. ``costs``: each piece's own tokens;
    ``relevance``: its cosine similarity to the query, clipped at 0; ``fixed``: the fixed part it needs (-1: none)
    and ``fixed_costs`` their tokens; ``covers``: ``(pieces, terms)`` booleans, the query's terms each piece shows
    (its fixed part's included); ``weight``: lambda; ``price``: the selector's token price."""

    costs: np.ndarray
    relevance: np.ndarray
    fixed: np.ndarray
    fixed_costs: np.ndarray
    covers: np.ndarray
    weight: float = 1.0
    price: float = 0.0

    def __post_init__(self):
        n = np.asarray(self.costs).size
        for name in ("costs", "relevance", "fixed"):
            if np.asarray(getattr(self, name)).shape != (n,):
                raise ValueError(f"{name} must hold one entry per piece ({n})")
        if np.asarray(self.covers).shape[0] != n:
            raise ValueError(f"covers must have one row per piece ({n})")

    def __len__(self) -> int:
        return int(np.asarray(self.costs).size)

    @property
    def values(self) -> np.ndarray:
        """Each piece's own value: ``weight * relevance - price * own tokens`` (its terms are cover values)."""
        return self.weight * np.asarray(self.relevance, dtype=float) - self.price * np.asarray(self.costs, dtype=float)

    @property
    def cover_values(self) -> np.ndarray:
        """Each term's value: ``weight / |terms|``."""
        terms = np.asarray(self.covers).shape[1]
        return np.full(terms, self.weight / terms) if terms else np.zeros(0)

    def value(self, kept) -> float:
        """What the pieces ``kept`` are worth together (their values, each term they show once)."""
        kept = np.asarray(list(kept), dtype=int)
        if not kept.size:
            return 0.0
        covered = np.asarray(self.covers)[kept].any(axis=0) if np.asarray(self.covers).shape[1] else np.zeros(0, bool)
        return float(self.values[kept].sum() + self.cover_values[covered].sum())

    def tokens(self, kept) -> float:
        """The tokens of the pieces ``kept``: their own plus each fixed part they need once."""
        kept = np.asarray(list(kept), dtype=int)
        if not kept.size:
            return 0.0
        parts = {int(f) for f in np.asarray(self.fixed)[kept] if f >= 0}
        return float(np.asarray(self.costs, dtype=float)[kept].sum()
                     + sum(float(self.fixed_costs[f]) for f in parts))

    def most_relevant(self) -> int | None:
        """The most relevant piece (ties: the first), ``None`` when there is none."""
        return int(np.argmax(self.relevance)) if len(self) else None


@dataclass(frozen=True)
class EvidenceChoice:
    """What one call shows: the demos (``selection``, in prompt order), the pieces (``pieces``, ascending), how they
    were chosen (``mode``: ``"joint"``, ``"sequential"``, ``"relevance"``), the objective's parts (``demo_value``:
    ``None`` when the selector exposes no knapsack to value its demos by), and the solve's ``status`` /
    ``relaxed`` / ``reason``."""

    selection: Selection
    pieces: tuple[int, ...]
    mode: str
    demo_value: float | None
    evidence_value: float
    status: str = "optimal"
    relaxed: tuple[str, ...] = ()
    reason: str = ""


def choose_jointly(pool: ExemplarPool, request: SelectionRequest, problem: DemoKnapsack, pieces: EvidencePieces, *,
                   capacity: float, exemplar_budget: float = math.inf, evidence_budget: float = math.inf,
                   solver: str = "knapsack") -> EvidenceChoice:
    """One knapsack over the demo candidates of ``problem`` and the ``pieces`` (see the module docstring):
    ``capacity`` for both, ``exemplar_budget`` for the demos, ``evidence_budget`` for the pieces; ``solver``:
    ``"knapsack"`` (exact) or ``"greedy"``."""
    nd, npieces = len(problem), len(pieces)
    is_demo = np.arange(nd + npieces) < nd
    demo_groups, demo_group_costs = _groups(problem.groups, problem.group_costs, nd)
    groups = np.concatenate([demo_groups, np.where(pieces.fixed >= 0, pieces.fixed + demo_group_costs.size, -1)])
    group_costs = np.concatenate([demo_group_costs, np.asarray(pieces.fixed_costs, dtype=float)])
    kinds = None if problem.kinds is None else np.concatenate([problem.kinds, np.full(npieces, -1)]).astype(int)
    covers = np.vstack([np.zeros((nd, pieces.covers.shape[1]), dtype=bool), pieces.covers])
    constraints = [AttributeConstraint(np.concatenate([c.members, np.zeros(npieces, bool)]), c.min_count, c.max_count,
                                       c.name, c.min_fraction, c.max_fraction) for c in problem.constraints]
    constraints += [AttributeConstraint(is_demo, max_count=problem.max_items, name=AT_MOST_M),
                    AttributeConstraint(~is_demo, min_count=1, name=AT_LEAST_ONE_PIECE)]
    demo_capacity = min(capacity, exemplar_budget)
    limits = [CostLimit(is_demo, demo_capacity, name="demos")]  # the exemplar budget (at most the capacity)
    if math.isfinite(evidence_budget):
        limits.append(CostLimit(~is_demo, evidence_budget, name="evidence"))
    shared = bool((groups >= 0).any())
    kind_values = problem.kind_values if kinds is not None else None
    values = np.concatenate([np.asarray(problem.values, dtype=float), pieces.values])
    costs = np.concatenate([np.asarray(problem.costs, dtype=float), np.asarray(pieces.costs, dtype=float)])
    max_items = problem.max_items + npieces
    if solver == "greedy":
        solution = greedy_knapsack(values, costs, capacity, max_items, constraints=constraints,
                                   groups=groups if shared else None, group_costs=group_costs if shared else None,
                                   kinds=kinds, kind_values=kind_values, covers=covers,
                                   cover_values=pieces.cover_values, cost_limits=limits)
    else:
        solution = solve_knapsack(values, costs, capacity, max_items, constraints, time_limit=problem.time_limit,
                                  work_limit=problem.work_limit, groups=groups if shared else None,
                                  group_costs=group_costs if shared else None, kinds=kinds, kind_values=kind_values,
                                  covers=covers, cover_values=pieces.cover_values, cost_limits=limits)
    chosen = sorted(solution.selected)
    demos = [int(problem.candidates[k]) for k in chosen if k < nd]
    kept = tuple(k - nd for k in chosen if k >= nd)
    selection = make_selection(pool, replace(request, capacity=demo_capacity), demos, problem.similarities,
                               status=solution.status, relaxed=solution.relaxed, reason=solution.reason,
                               solution=solution)
    return EvidenceChoice(selection, kept, "joint", problem.objective([k for k in chosen if k < nd]),
                          pieces.value(kept), solution.status, solution.relaxed, solution.reason)


def choose_sequentially(pool: ExemplarPool, request: SelectionRequest, selector: ExemplarSelector,
                        pieces: EvidencePieces, *, capacity: float, exemplar_budget: float = math.inf,
                        evidence_budget: float = math.inf, solver: str = "knapsack", by_relevance: bool = False,
                        problem: DemoKnapsack | None = None) -> EvidenceChoice:
    """The selector's demos first -- at the capacity left after the most relevant piece and its fixed part (the
    pieces every prompt shows), capped by ``exemplar_budget`` -- then the pieces in what the demos leave: a knapsack
    over the pieces (at least one; ``solver``), or with ``by_relevance`` the pieces in relevance order while they
    fit (a prefix of that order). ``problem``: the selector's knapsack for this query (``knapsack_problem``), which
    values the demos chosen (``demo_value``; ``None`` without one)."""
    first = pieces.most_relevant()
    room = min(capacity, evidence_budget)
    reserved = pieces.tokens([first]) if first is not None and pieces.tokens([first]) <= room else 0.0
    demo_request = replace(request, capacity=min(capacity - reserved, exemplar_budget))
    selection = selector.select(pool, within_new_tokens(selector, demo_request))
    demo_value = None if problem is None else problem.objective(problem.positions(selection.indices))
    left = min(capacity - selection.total_cost, evidence_budget)
    relaxed: tuple[str, ...] = ()
    if by_relevance:
        kept, status, reason = _by_relevance(pieces, left), "optimal", ""
    else:
        kept, status, relaxed, reason = _pieces_knapsack(pieces, left, solver, problem)
    if not kept:
        status, reason = "relaxed", f"no evidence piece fits the {left:g} tokens the demos leave"
        relaxed = (AT_LEAST_ONE_PIECE,)
    return EvidenceChoice(selection, kept, "relevance" if by_relevance else "sequential", demo_value,
                          pieces.value(kept), status, relaxed, reason)


def _pieces_knapsack(pieces: EvidencePieces, capacity: float, solver: str,
                     problem: DemoKnapsack | None) -> tuple[tuple[int, ...], str, tuple[str, ...], str]:
    """The pieces alone by a knapsack within ``capacity`` (at least one; the demo problem's limits when known)."""
    n = len(pieces)
    if n == 0:
        return (), "optimal", (), ""
    fixed = np.asarray(pieces.fixed)
    shared = bool((fixed >= 0).any())
    groups = fixed if shared else None
    group_costs = np.asarray(pieces.fixed_costs, dtype=float) if shared else None
    constraints = [AttributeConstraint(np.ones(n, dtype=bool), min_count=1, name=AT_LEAST_ONE_PIECE)]
    if solver == "greedy":
        solution = greedy_knapsack(pieces.values, pieces.costs, capacity, n, constraints=constraints, groups=groups,
                                   group_costs=group_costs, covers=pieces.covers, cover_values=pieces.cover_values)
    else:
        solution = solve_knapsack(pieces.values, pieces.costs, capacity, n, constraints,
                                  time_limit=DEFAULT_TIME_LIMIT if problem is None else problem.time_limit,
                                  work_limit=DEFAULT_WORK_LIMIT if problem is None else problem.work_limit,
                                  groups=groups, group_costs=group_costs, covers=pieces.covers,
                                  cover_values=pieces.cover_values)
    return tuple(sorted(solution.selected)), solution.status, solution.relaxed, solution.reason


def _by_relevance(pieces: EvidencePieces, capacity: float) -> tuple[int, ...]:
    """The pieces in relevance order (ties: document order) while they fit (each with its fixed part, once)."""
    kept: list[int] = []
    for i in np.argsort(-np.asarray(pieces.relevance, dtype=float), kind="stable"):
        if pieces.tokens([*kept, int(i)]) > capacity + 1e-9:
            break
        kept.append(int(i))
    return tuple(sorted(kept))


def _groups(groups, group_costs, n: int) -> tuple[np.ndarray, np.ndarray]:
    if groups is None:
        return np.full(n, -1, dtype=int), np.zeros(0)
    return np.asarray(groups, dtype=int), np.asarray(group_costs, dtype=float)


def least_worth_per_token(pool: ExemplarPool, request: SelectionRequest, problem: DemoKnapsack | None,
                          pieces: EvidencePieces, demos, kept) -> tuple[str, int] | None:
    """The chosen item whose removal loses the least value per token it frees -- ``("demo", pool index)`` or
    ``("piece", piece index)`` -- for the repair of a prompt measured over its budget; never the last piece while a
    demo is left; ``None`` when nothing frees a token. A demo's value is its marginal value in ``problem`` (the
    selector's knapsack), else its similarity to the query."""
    demos, kept = [int(i) for i in demos], [int(j) for j in kept]
    options = []
    if demos:
        similarity = pool.similarities(request.embedding) if problem is None else None
        for i in demos:
            rest = [d for d in demos if d != i]
            tokens = pool.cost_of(demos) - pool.cost_of(rest)
            if problem is not None and problem.positions([i]):
                value = problem.objective(problem.positions(demos)) - problem.objective(problem.positions(rest))
            else:
                value = float(max(similarity[i], 0.0)) if similarity is not None else 0.0
            options.append((value, tokens, 0, i))
    if kept and (len(kept) > 1 or not demos):
        for j in kept:
            rest = [k for k in kept if k != j]
            options.append((pieces.value(kept) - pieces.value(rest), pieces.tokens(kept) - pieces.tokens(rest), 1, j))
    freeing = [option for option in options if option[1] > 1e-9]
    if not freeing:
        return None
    value, tokens, side, index = min(freeing, key=lambda o: (o[0] / o[1], o[2], o[3]))
    return ("demo" if side == 0 else "piece"), index


def without_demo(pool: ExemplarPool, selection: Selection, index: int) -> Selection:
    """``selection`` less the exemplar ``index`` (pool index): the same order, shared parts and costs recounted."""
    ordered = tuple(i for i in selection.indices if i != int(index))
    dropped_prefix = int(index) in selection.indices[: selection.shared_prefix]
    shared = shown_before(ordered, pool.groups)
    total = pool.cost_of(ordered)
    return replace(selection, indices=ordered, total_cost=total, shared=shared if any(shared) else (),
                   shared_prefix=selection.shared_prefix - int(dropped_prefix))
