import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import pool_scale

from knapsack_dspy.selection import ann_index
from knapsack_dspy.selection.exemplar_pool import ExemplarPool, SelectionRequest
from knapsack_dspy.selection.selectors.seer import KnapsackSelector

ann_index.ANN_MIN_POOL = 0
R = np.load("real.npz")
T = np.load("tune.npz")
real = {"embeddings": R["pool"]}
n, c = int(sys.argv[1]), int(sys.argv[2])
grid = [int(x) for x in sys.argv[3].split(",")]
emb, source = pool_scale.synthetic(real, n, 0.35, 0)
z = np.load(f"cells_{n}_{c}.npz")
centroids, order, offsets = z["centroids"], z["order"], z["offsets"]
docs = np.asarray([f"doc{j // 6}" for j in range(n)])
common = dict(
    ids=[f"s{j}" for j in range(n)],
    embeddings=emb,
    costs=R["costs"][source],
    attributes={"modality": R["pool_mods"][source]},
    doc_ids=docs,
)
assign = ann_index.cell_assignment(order, offsets)
seer = KnapsackSelector()
for name, Q, mods in (("dev1000", R["queries"], R["qmods"]), ("unseen", T["queries"], T["qmods"])):
    exact = json.load(open(f"exact_sel_{n}_{name}.json"))
    S = Q @ emb.T
    for q in range(len(Q)):
        S[q, np.arange(n) // 6 == (q * 7919) % (n // 6)] = -np.inf
    tops = np.argsort(-S, axis=1)[:, :200]  # sorted by similarity
    cur200 = ann_index.recall_curves(centroids, assign, Q, tops)
    cur10 = ann_index.recall_curves(centroids, assign, Q, tops[:, :10])
    cur1 = ann_index.recall_curves(centroids, assign, Q, tops[:, :1])
    for p in grid:
        ivf = ann_index.IVFIndex(centroids, order, offsets, emb[order], p, {"k": 200})
        ann_pool = ExemplarPool(**common, index=ivf)
        ratios = []
        for q in range(len(Q)):
            r = SelectionRequest(
                Q[q],
                capacity=2700.0,
                target_attributes={"modality": str(mods[q])},
                doc_id=f"doc{(q * 7919) % (n // 6)}",
            )
            ch = list(seer.select(ann_pool, r).indices)
            sims = S[q]
            ratios.append(float((emb[ch] @ Q[q]).sum() / (emb[exact[q]] @ Q[q]).sum()))
        print(
            json.dumps(
                {
                    "n": n,
                    "c": c,
                    "q": name,
                    "nprobe": p,
                    "r200": round(float(cur200[:, p - 1].mean()), 4),
                    "r10": round(float(cur10[:, p - 1].mean()), 4),
                    "r1": round(float(cur1[:, p - 1].mean()), 4),
                    "obj_mean": round(float(np.mean(ratios)), 4),
                    "obj_p5": round(float(np.percentile(ratios, 5)), 4),
                }
            ),
            flush=True,
        )
