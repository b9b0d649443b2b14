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

from knapsack_dspy.selection import exact_search
from knapsack_dspy.selection.knapsack import solve_knapsack
from knapsack_dspy.testing import knapsack_reference
from knapsack_dspy.testing.busy_loop import busy_loop


def reference_optimum(inst: dict) -> tuple[float, bool]:
    """The proven optimum of a recorded instance (objective, proven): ``testing.knapsack_reference``."""
    best, proven = knapsack_reference.reference_optimum(
        inst["values"], inst["costs"], inst["capacity"], inst["max_items"], inst["constraints"],
        **{k: inst[k] for k in ("groups", "group_costs", "kinds", "kind_values") if inst.get(k) is not None})
    return (float("nan") if best is None else best), proven


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
