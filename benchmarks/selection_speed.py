"""Knapsack selection speed: median / p99 solve time and share proven optimal.

For k candidates in {50, 200, 1000}, M in {4, 8} and 0, 1 or 2 SEER attribute templates
(1 = modality: >= alpha*M same modality and >= beta*M other; 2 = modality + answer type, four
constraints), it times ``solve_knapsack`` and, on the same instances in the same run, a plain
``scipy.optimize.milp`` formulation of all k candidates (default HiGHS settings, no pruning).

Instances imitate SEER's setting: values are the k best cosine similarities of a kNN pre-filter
(sorted, 0.25-0.85), costs are exemplar token counts (log-normal, median ~450, as TAT-QA exemplars
with their tables), capacity = a 4096-token budget minus a 300-900-token query prompt.

    python benchmarks/selection_speed.py [--instances 200] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

import numpy as np
from scipy.optimize import Bounds, LinearConstraint, milp

from knapsack_dspy.selection.constraints import answer_type_template, modality_template
from knapsack_dspy.selection.knapsack import solve_knapsack

MODALITIES = np.array(["table", "text", "hybrid"])
ANSWER_TYPES = np.array(["span", "multi-span", "arithmetic", "count"])


def make_instance(rng: np.random.Generator, k: int, max_items: int, templates: int):
    values = np.sort(rng.uniform(0.25, 0.85, k))[::-1]
    costs = np.clip(rng.lognormal(np.log(450), 0.45, k), 60, 3000).round()
    capacity = 4096 - rng.integers(300, 900)
    modality = rng.choice(MODALITIES, size=k, p=[0.45, 0.2, 0.35])
    answer_type = rng.choice(ANSWER_TYPES, size=k, p=[0.35, 0.15, 0.4, 0.1])
    constraints = []
    if templates >= 1:
        constraints += modality_template(modality, rng.choice(["table", "text"]), max_items, 0.75, 0.125)
    if templates >= 2:
        constraints += answer_type_template(answer_type, rng.choice(ANSWER_TYPES), max_items, 0.5, 0.125)
    return values, costs, float(capacity), constraints


def plain_milp(values, costs, capacity, max_items, constraints):
    """The textbook formulation over all candidates, default HiGHS settings."""
    rows = [costs, np.ones_like(values)] + [c.members.astype(float) for c in constraints]
    lower = [-np.inf, -np.inf] + [c.min_count for c in constraints]
    upper = [capacity, max_items] + [np.inf for _ in constraints]
    res = milp(-values, integrality=np.ones(values.size), bounds=Bounds(0, 1),
               constraints=LinearConstraint(np.vstack(rows), lower, upper))
    return res


def percentile(xs, q):
    return float(np.percentile(np.asarray(xs), q))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--instances", type=int, default=200, help="solves per configuration")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--ks", default="50,200,1000")
    parser.add_argument("--ms", default="4,8")
    parser.add_argument("--json", help="also write the rows here")
    args = parser.parse_args(argv)
    rows = []
    header = (f"{'k':>5} {'M':>2} {'tmpl':>4} {'#cons':>5} | {'median ms':>9} {'p99 ms':>7} {'proven':>8} "
              f"{'cand':>5} | {'plain med':>9} {'plain p99':>9} {'plain opt':>9} | {'speed-up':>8} {'same obj':>8}")
    print(header)
    print("-" * len(header))
    for k in [int(x) for x in args.ks.split(",")]:
        for m in [int(x) for x in args.ms.split(",")]:
            for templates in (0, 1, 2):
                rng = np.random.default_rng([args.seed, k, m, templates])
                ours, plain, optimal, plain_optimal, candidates, agree = [], [], 0, 0, [], 0
                relaxed = worse = 0
                ncons = 0
                for _ in range(args.instances):
                    values, costs, capacity, constraints = make_instance(rng, k, m, templates)
                    ncons = len(constraints)
                    t0 = time.perf_counter()
                    sol = solve_knapsack(values, costs, capacity, m, constraints=constraints)
                    ours.append((time.perf_counter() - t0) * 1e3)
                    optimal += sol.proven_optimal
                    relaxed += sol.status == "relaxed"
                    candidates.append(sol.candidates)
                    t0 = time.perf_counter()
                    res = plain_milp(values, costs, capacity, m, constraints)
                    plain.append((time.perf_counter() - t0) * 1e3)
                    plain_optimal += res.status == 0
                    if res.status == 0 and sol.objective < -res.fun - 1e-6 * max(1.0, abs(res.fun)):
                        worse += 1  # would mean our pruning lost the optimum
                    if (res.status == 0 and abs(-res.fun - sol.objective) <= 1e-6 * max(1.0, abs(res.fun))) or (
                            res.status == 2 and sol.relaxed):
                        agree += 1
                row = dict(k=k, M=m, templates=templates, constraints=ncons, instances=args.instances,
                           median_ms=statistics.median(ours), p99_ms=percentile(ours, 99),
                           optimal_pct=100.0 * optimal / args.instances,
                           median_candidates=statistics.median(candidates),
                           plain_median_ms=statistics.median(plain), plain_p99_ms=percentile(plain, 99),
                           plain_optimal_pct=100.0 * plain_optimal / args.instances,
                           same_objective_pct=100.0 * agree / args.instances,
                           relaxed_pct=100.0 * relaxed / args.instances, ours_worse=worse)
                row["speedup_median"] = row["plain_median_ms"] / row["median_ms"]
                rows.append(row)
                print(f"{k:>5} {m:>2} {templates:>4} {ncons:>5} | {row['median_ms']:>9.2f} {row['p99_ms']:>7.2f} "
                      f"{row['optimal_pct']:>7.1f}% {row['median_candidates']:>5.0f} | "
                      f"{row['plain_median_ms']:>9.2f} {row['plain_p99_ms']:>9.2f} {row['plain_optimal_pct']:>8.1f}% | "
                      f"{row['speedup_median']:>7.1f}x {row['same_objective_pct']:>7.1f}% {worse:>5} "
                      f"{row['relaxed_pct']:>6.1f}%", flush=True)
    target = [r for r in rows if r["k"] == 200 and r["M"] == 8 and r["templates"] >= 1]
    if target:
        ok = all(r["median_ms"] <= 5 and r["p99_ms"] <= 50 and r["optimal_pct"] == 100 for r in target)
        print(f"\ntarget (k=200, M=8, with attribute constraints: median <= 5 ms, p99 <= 50 ms, 100 % optimal): "
              f"{'MET' if ok else 'NOT MET'}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
