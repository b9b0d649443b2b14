"""The knapsack's reference optimum: ``scipy.optimize.milp`` on the plain formulation over every item -- no pruning,
no cutoff, no node limit -- what the tests and ``benchmarks/exact_selection.py`` hold ``solve_knapsack`` to."""

from __future__ import annotations

import numpy as np
from scipy.optimize import Bounds, LinearConstraint, milp
from scipy.sparse import csr_array

__all__ = ["reference_optimum"]


def reference_optimum(values, costs, capacity, max_items, constraints=(), *, groups=None, group_costs=None,
                      kinds=None, kind_values=None, time_limit: float = 600.0) -> tuple[float | None, bool]:
    """``(objective, proven)``: the best objective (each chosen item's value, each covered kind's value once; costs
    with each used group's shared cost once; every ``AttributeConstraint`` kept), ``None`` when nothing is feasible
    in time; ``proven``: HiGHS proved it optimal (to its 1e-6 absolute gap). One binary per item, per used group
    (``x_i <= y_g``) and per present kind (``z_k <= sum of its x_i``)."""
    values = np.asarray(values, float)
    costs = np.asarray(costs, float)
    n = values.size
    groups = np.full(n, -1) if groups is None else np.asarray(groups)
    kinds = np.full(n, -1) if kinds is None else np.asarray(kinds)
    shared = np.asarray([] if group_costs is None else group_costs, float)
    kind_values = np.asarray([] if kind_values is None else kind_values, float)
    used, present = sorted({int(g) for g in groups if g >= 0}), sorted({int(k) for k in kinds if k >= 0})
    width = n + len(used) + len(present)
    rows, lower, upper = [], [], []

    def row(coefficients, low, high):
        rows.append(coefficients)
        lower.append(low)
        upper.append(high)

    capacity_row = np.zeros(width)
    capacity_row[:n] = costs
    for j, g in enumerate(used):
        capacity_row[n + j] = shared[g]
        for i in np.flatnonzero(groups == g):
            link = np.zeros(width)
            link[i], link[n + j] = 1.0, -1.0
            row(link, -np.inf, 0.0)
    row(capacity_row, -np.inf, float(capacity))
    count = np.zeros(width)
    count[:n] = 1.0
    row(count, -np.inf, float(max_items))
    for j, k in enumerate(present):
        link = np.zeros(width)
        link[np.flatnonzero(kinds == k)] = -1.0
        link[n + len(used) + j] = 1.0
        row(link, -np.inf, 0.0)
    pad = np.zeros(width - n)
    for con in constraints:
        members = np.r_[np.asarray(con.members, float), pad]
        if con.min_count > 0 or con.max_count is not None:
            row(members, float(con.min_count) if con.min_count > 0 else -np.inf,
                float(con.max_count) if con.max_count is not None else np.inf)
        if con.min_fraction is not None and con.min_fraction > 0:
            row(members - np.r_[np.full(n, con.min_fraction), pad], 0.0, np.inf)
        if con.max_fraction is not None and con.max_fraction < 1:
            row(members - np.r_[np.full(n, con.max_fraction), pad], -np.inf, 0.0)
    objective = -np.r_[values, np.zeros(len(used)), kind_values[present] if present else []]
    result = milp(objective, integrality=np.ones(width), bounds=Bounds(0, 1),
                  constraints=LinearConstraint(csr_array(np.vstack(rows)), lower, upper),
                  options={"mip_rel_gap": 0.0, "time_limit": float(time_limit)})
    if result.x is None:
        return None, False
    return float(-result.fun), result.status == 0
