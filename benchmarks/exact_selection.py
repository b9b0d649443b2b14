"""Exact selection on real instances: solve time (median, p99) and each selection's objective against the proven
optimum, idle or beside a load.

Reads the knapsack instances ``benchmarks/knapsack_instances.py`` recorded (every ``solve_knapsack`` call of a
suite's selection) and, for the selectors named (default: case_coverage and seer), solves each with the product's
``solve_knapsack`` (its defaults: the work limit, the greedy cutoff) and with a reference formulation -- ``milp``
on every candidate, no pruning, no cutoff, no node limit, a generous time limit -- checking that the objectives
agree. ``--busy`` runs one busy-loop process beside the timings (the throughput measurements' load); a decoding
model is the real load: start ``kdspy bench`` with the 1.5B first and run this beside it.

    python benchmarks/knapsack_instances.py benchmarks/selection_objective_selection.toml instances.pkl
    python benchmarks/exact_selection.py instances.pkl [--selectors case_coverage seer] [--busy] [--milp-only]
        [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import pickle
import statistics
import time
from collections import Counter

import numpy as np
from scipy.optimize import Bounds, LinearConstraint, milp
from scipy.sparse import csr_array

from knapsack_dspy.selection import exact_search
from knapsack_dspy.selection.knapsack import solve_knapsack
from knapsack_dspy.testing.busy_loop import busy_loop


def reference_optimum(inst: dict, time_limit: float = 600.0) -> tuple[float, bool]:
    """The proven optimum of an instance (objective, proven) by a plain formulation over every candidate."""
    values = np.asarray(inst["values"], float)
    costs = np.asarray(inst["costs"], float)
    n = values.size
    groups = np.asarray(inst.get("groups") if inst.get("groups") is not None else np.full(n, -1))
    shared = np.asarray(inst.get("group_costs") if inst.get("group_costs") is not None else [], float)
    kinds = np.asarray(inst.get("kinds") if inst.get("kinds") is not None else np.full(n, -1))
    kind_values = np.asarray(inst.get("kind_values") if inst.get("kind_values") is not None else [], float)
    used, present = sorted({int(g) for g in groups if g >= 0}), sorted({int(k) for k in kinds if k >= 0})
    width = n + len(used) + len(present)
    rows, lower, upper = [], [], []

    def row(coeffs, lo, hi):
        rows.append(coeffs)
        lower.append(lo)
        upper.append(hi)

    cap = np.zeros(width)
    cap[:n] = costs
    for j, g in enumerate(used):
        cap[n + j] = shared[g]
        for i in np.flatnonzero(groups == g):
            link = np.zeros(width)
            link[i], link[n + j] = 1.0, -1.0
            row(link, -np.inf, 0.0)
    row(cap, -np.inf, float(inst["capacity"]))
    count = np.zeros(width)
    count[:n] = 1.0
    row(count, -np.inf, float(inst["max_items"]))
    for j, k in enumerate(present):
        link = np.zeros(width)
        link[np.flatnonzero(kinds == k)] = -1.0
        link[n + len(used) + j] = 1.0
        row(link, -np.inf, 0.0)
    for con in inst["constraints"]:
        m = np.zeros(width)
        m[:n] = con.members
        if con.min_count > 0 or con.max_count is not None:
            row(m, float(con.min_count) if con.min_count > 0 else -np.inf,
                float(con.max_count) if con.max_count is not None else np.inf)
        if con.min_fraction is not None and con.min_fraction > 0:
            row(m - np.r_[np.full(n, con.min_fraction), np.zeros(width - n)], 0.0, np.inf)
        if con.max_fraction is not None and con.max_fraction < 1:
            row(m - np.r_[np.full(n, con.max_fraction), np.zeros(width - n)], -np.inf, 0.0)
    objective = -np.r_[values, np.zeros(len(used)), kind_values[present] if present else []]
    result = milp(objective, integrality=np.ones(width), bounds=Bounds(0, 1),
                  constraints=LinearConstraint(csr_array(np.vstack(rows)), lower, upper),
                  options={"mip_rel_gap": 0.0, "time_limit": time_limit})
    if result.x is None:
        return float("nan"), False
    return float(-result.fun), result.status == 0


def time_product(inst: dict) -> tuple[float, object]:
    kwargs = {k: inst[k] for k in ("groups", "group_costs", "kinds", "kind_values") if inst.get(k) is not None}
    start = time.perf_counter()
    sol = solve_knapsack(inst["values"], inst["costs"], inst["capacity"], inst["max_items"], inst["constraints"],
                         **kwargs)
    return 1000.0 * (time.perf_counter() - start), sol


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("instances", help="a .pkl written by benchmarks/knapsack_instances.py")
    parser.add_argument("--selectors", nargs="+", default=["case_coverage", "seer"])
    parser.add_argument("--busy", action="store_true", help="one busy-loop process beside the timings")
    parser.add_argument("--no-check", action="store_true", help="skip the reference optimum (timings only)")
    parser.add_argument("--milp-only", action="store_true",
                        help="decide every selection with milp (the exact search off): what it saves")
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    with open(args.instances, "rb") as fh:
        instances = pickle.load(fh)
    if args.milp_only:
        exact_search.MAX_ITEMS = 0
    report = {}
    with busy_loop(args.busy):
        for selector in args.selectors:
            mine = [inst for inst in instances if inst["caller"] == selector]
            if not mine:
                print(f"{selector}: no instance recorded")
                continue
            time_product(mine[0])  # first solve probes HiGHS's options: not timed
            timings, outcomes, limits, worse, unproven = [], Counter(), Counter(), [], 0
            for n, inst in enumerate(mine):
                ms, sol = time_product(inst)
                timings.append(ms)
                outcomes[sol.outcome] += 1
                limits[sol.limit or "none"] += 1
                if not args.no_check and not sol.relaxed:
                    best, proven = reference_optimum(inst)
                    unproven += not proven
                    if sol.objective < best - 1e-6:
                        worse.append((n, sol.objective, best))
            report[selector] = {
                "instances": len(mine), "median_ms": statistics.median(timings),
                "p99_ms": float(np.percentile(timings, 99)), "max_ms": max(timings),
                "outcomes": dict(outcomes), "limits": dict(limits),
                "below_reference_optimum": None if args.no_check else len(worse),
                "reference_unproven": None if args.no_check else unproven, "busy": args.busy,
                "milp_only": args.milp_only}
            r = report[selector]
            print(f"{selector}: {r['instances']} selections, median {r['median_ms']:.2f} ms, p99 {r['p99_ms']:.2f} ms, "
                  f"max {r['max_ms']:.1f} ms; outcomes {dict(outcomes)}; limits {dict(limits)}"
                  + ("" if args.no_check else f"; below the proven optimum: {len(worse)} {worse[:5]}"))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(report, fh, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
