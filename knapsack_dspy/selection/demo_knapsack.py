"""One query's demo selection as a knapsack instance: what a selector solves, exposed so that a larger problem can
hold it (the joint choice of demos and evidence pieces, ``selection/evidence_knapsack.py``).

A selector whose choice is a knapsack over its candidates returns a :class:`DemoKnapsack` from
``knapsack_problem(pool, request)`` (``ExemplarSelector.knapsack_problem``; ``None``: the selector exposes none) and
selects by solving it (:meth:`DemoKnapsack.solve`), so the problem a joint solve embeds is exactly the one the
selector solves alone.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from knapsack_dspy.selection.knapsack import (
    DEFAULT_TIME_LIMIT,
    DEFAULT_WORK_LIMIT,
    AttributeConstraint,
    KnapsackSolution,
    greedy_knapsack,
    solve_knapsack,
)

__all__ = ["DemoKnapsack"]


@dataclass(frozen=True)
class DemoKnapsack:
    """The knapsack of one query's demos. ``candidates``: the pool indices of the items; ``values`` (the token price
    included: ``token_price`` per own token) and ``costs`` (own prompt tokens) per candidate; ``max_items``: M;
    ``groups`` / ``group_costs``: shared costs (one document's table), ``kinds`` / ``kind_values``: coverage values, as
    ``solve_knapsack`` takes them (``None``: none); ``constraints``: attribute constraints over the candidates (most
    important first); ``solver``: ``"knapsack"`` (exact) or ``"greedy"``, with its limits; ``similarities``: what
    orders the chosen demos in the prompt (``make_selection``)."""

    candidates: np.ndarray
    values: np.ndarray
    costs: np.ndarray
    max_items: int
    similarities: Any
    groups: np.ndarray | None = None
    group_costs: np.ndarray | None = None
    kinds: np.ndarray | None = None
    kind_values: np.ndarray | None = None
    constraints: tuple[AttributeConstraint, ...] = field(default=())
    token_price: float = 0.0
    solver: str = "knapsack"
    time_limit: float = DEFAULT_TIME_LIMIT
    work_limit: int = DEFAULT_WORK_LIMIT

    def __len__(self) -> int:
        return int(np.asarray(self.candidates).size)

    def options(self) -> dict:
        """The shared costs and coverage values as ``solve_knapsack`` takes them."""
        return {"groups": self.groups, "group_costs": self.group_costs, "kinds": self.kinds,
                "kind_values": self.kind_values}

    def solve(self, capacity: float) -> KnapsackSolution:
        """The selector's own solve at ``capacity`` (``selected``: positions among the candidates)."""
        if self.solver == "greedy":
            return greedy_knapsack(self.values, self.costs, capacity, self.max_items, constraints=self.constraints,
                                   **self.options())
        return solve_knapsack(self.values, self.costs, capacity, self.max_items, list(self.constraints),
                              time_limit=self.time_limit, work_limit=self.work_limit, **self.options())

    def positions(self, pool_indices) -> list[int]:
        """The candidate positions of the pool indices ``pool_indices`` (those among the candidates)."""
        where = {int(c): k for k, c in enumerate(np.asarray(self.candidates).tolist())}
        return [where[int(i)] for i in pool_indices if int(i) in where]

    def objective(self, positions) -> float:
        """The value of the candidates at ``positions``: their values plus each covered kind's value once."""
        chosen = np.asarray([int(k) for k in positions], dtype=np.int64)
        total = float(np.asarray(self.values, dtype=float)[chosen].sum())
        if self.kinds is not None and self.kind_values is not None and chosen.size:
            covered = np.unique(np.asarray(self.kinds)[chosen])
            total += float(np.asarray(self.kind_values, dtype=float)[covered[covered >= 0]].sum())
        return total
