"""Calibration rules applied to cached cells: nprobe chosen, real-query recall, scanned share, SEER objective."""

import json
import os
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import pool_scale
from study import K, top_k

from knapsack_dspy.selection import ann_index
from knapsack_dspy.selection.exemplar_pool import ExemplarPool, SelectionRequest
from knapsack_dspy.selection.selectors.seer import KnapsackSelector

R = np.load("real.npz")
T = np.load("tune.npz")
real = {"embeddings": R["pool"]}
QSETS = {"unseen": (T["queries"], T["qmods"]), "dev1000": (R["queries"], R["qmods"])}
ann_index.ANN_MIN_POOL = 0

TARGETS = [float(t) for t in os.environ.get("TARGETS", "0.95,0.96").split(",")]


def exact_selections(n, name, pool, seer, reqs):
    import os

    path = f"exact_sel_{n}_{name}.json"
    if os.path.exists(path):
        return json.load(open(path))
    out = [list(seer.select(pool, r).indices) for r in reqs]
    out = [[int(i) for i in x] for x in out]
    json.dump(out, open(path, "w"))
    return out


def run(n, c, rules, objective):
    emb, source = pool_scale.synthetic(real, n, 0.35, 0)
    z = np.load(f"cells_{n}_{c}.npz")
    centroids, order, offsets = z["centroids"], z["order"], z["offsets"]
    sizes = np.diff(offsets)
    assign = ann_index.cell_assignment(order, offsets)
    nlist = len(sizes)
    docs = np.asarray([f"doc{j // 6}" for j in range(n)])
    common = dict(
        ids=[f"s{j}" for j in range(n)],
        embeddings=emb,
        costs=R["costs"][source],
        attributes={"modality": R["pool_mods"][source]},
        doc_ids=docs,
    )
    exact_pool = ExemplarPool(**common)
    seer = KnapsackSelector()
    data = {}
    for name, (Q, mods) in QSETS.items():
        excl = [np.flatnonzero(np.arange(n) // 6 == (q * 7919) % max(1, n // 6)) for q in range(len(Q))]
        curves = ann_index.recall_curves(centroids, assign, Q, top_k(emb, Q, excl))
        reqs = [
            SelectionRequest(
                Q[q],
                capacity=2700.0,
                target_attributes={"modality": str(mods[q])},
                doc_id=f"doc{(q * 7919) % max(1, n // 6)}",
            )
            for q in range(len(Q))
        ]
        exact = exact_selections(n, name, exact_pool, seer, reqs) if objective else None
        data[name] = (Q, curves, reqs, exact)
    old_p = ann_index.calibrate_nprobe(
        emb, centroids, order, offsets, np.random.default_rng([2, n]), target_recall=0.99, z=0.0, sample_queries=128
    )[1]["kinds"]["pool vectors"]["nprobe"]
    variants = [("old", old_p, None)]
    for t in TARGETS:
        new_p, cal = ann_index.calibrate_nprobe(
            emb, centroids, order, offsets, np.random.default_rng([2, n]), doc_ids=docs, target_recall=t
        )
        variants += [
            (f"pool-vectors-only@{t}", cal["kinds"]["pool vectors"]["nprobe"], None),
            (f"package@{t}", new_p, cal),
        ]
    for rule, p, cal in variants:
        row = {"n": n, "c": c, "nlist": nlist, "rule": rule, "nprobe": p}
        if cal:
            row["calibration"] = cal
        ivf = ann_index.IVFIndex(centroids, order, offsets, emb[order], p, {"k": K})
        ann_pool = ExemplarPool(**common, index=ivf)
        for name, (Q, curves, reqs, exact) in data.items():
            rec = curves[:, p - 1]
            scanned = np.mean([ivf.vectors_scanned(q) for q in Q]) / n
            out = {
                "recall": round(float(rec.mean()), 4),
                "recall_p5": round(float(np.percentile(rec, 5)), 3),
                "scanned_share": round(float(scanned), 4),
            }
            if objective and rule.startswith("package"):
                ratios = []
                for q, (r, ex) in enumerate(zip(reqs, exact, strict=True)):
                    chosen = list(seer.select(ann_pool, r).indices)
                    ratios.append(float((emb[chosen] @ Q[q]).sum() / (emb[ex] @ Q[q]).sum()))
                out["objective_mean"] = round(float(np.mean(ratios)), 4)
                out["objective_p5"] = round(float(np.percentile(ratios, 5)), 4)
            row[name] = out
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    rules = None
    objective = sys.argv[2] == "obj"
    for spec in sys.argv[3:]:
        n, c = spec.split(":")
        run(int(n), int(c), rules, objective)
