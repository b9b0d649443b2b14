
import pickle
import sys

import numpy as np

sys.path.insert(0, "benchmarks")
import pool_scale as ps

from knapsack_dspy.selection import ann_index as ai

job = pickle.load(open("../research/ps_job.pkl", "rb"))
store, index, ann_pool, common = ps._pools(job)
d = np.load("../research/adaptive_truths.npz")
cent = index.centroids.astype(np.float32)
order, offsets = index._cells_arrays()
assign = ai.cell_assignment(order, offsets)
sizes = np.diff(offsets)
Q = np.asarray(job["embeddings"], dtype=np.float32)
src = np.asarray(job["sources"])
groups = {
    "tatqa": (Q[src == "tatqa"], d["truths_q"][src == "tatqa"]),
    "finqa": (Q[src != "tatqa"], d["truths_q"][src != "tatqa"]),
    "cal-pool": (d["cq"][d["kinds"] == 0], d["truths_c"][d["kinds"] == 0]),
    "cal-mid": (d["cq"][d["kinds"] == 1], d["truths_c"][d["kinds"] == 1]),
}
curves = {k: ai.recall_curves(cent, assign, q, t) for k, (q, t) in groups.items()}
sims = {k: q @ cent.T for k, (q, t) in groups.items()}
order_sims = {k: -np.sort(-s, axis=1) for k, s in sims.items()}
rank_cells = {k: np.argsort(-s, axis=1) for k, s in sims.items()}


def evaluate(rule):
    out = {}
    for k in groups:
        n = rule(order_sims[k])
        rec = curves[k][np.arange(len(n)), n - 1]
        scanned = np.array([sizes[rank_cells[k][i, : n[i]]].sum() for i in range(len(n))])
        out[k] = (
            rec.mean(),
            rec.mean() - 1.645 * rec.std(ddof=1) / np.sqrt(len(rec)),
            np.percentile(rec, 5),
            n.mean(),
            scanned.mean(),
        )
    return out


def show(name, r):
    print(
        name,
        " | ".join(
            f"{k}: rec {v[0]:.4f} lb {v[1]:.4f} p5 {v[2]:.3f} cells {v[3]:.0f} vec {v[4]:.0f}" for k, v in r.items()
        ),
    )


for p in (41, 60, 80, 120):
    show(f"fixed {p}", evaluate(lambda s, p=p: np.full(len(s), p)))
print("top centroid sim median:", {k: round(float(np.median(v[:, 0])), 3) for k, v in order_sims.items()})
for delta in (0.04, 0.06, 0.08, 0.10, 0.12):
    for floor in (10, 20):
        show(
            f"delta {delta} floor {floor}",
            evaluate(
                lambda s, delta=delta, floor=floor: np.clip((s >= s[:, :1] - delta).sum(axis=1), floor, s.shape[1])
            ),
        )
# ratio rule: sims >= s1 * (1 - r)
