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
n, c, p = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
name = sys.argv[4]
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
Q, mods = (T["queries"], T["qmods"]) if name == "unseen" else (R["queries"], R["qmods"])
exact = json.load(open(f"exact_sel_{n}_{name}.json"))
S = Q @ emb.T
for q in range(len(Q)):
    S[q, np.arange(n) // 6 == (q * 7919) % (n // 6)] = -np.inf
tops = np.argsort(-S, axis=1)[:, :200]
ivf = ann_index.IVFIndex(centroids, order, offsets, emb[order], p, {"k": 200})
ann_pool = ExemplarPool(**common, index=ivf)
stats = {m: ann_index.recall_curves(centroids, assign, Q, tops[:, :m])[:, p - 1] for m in (1, 10, 20, 50, 100, 200)}
ratios, missed_rank, costs_top = [], [], []
for q in range(len(Q)):
    r = SelectionRequest(
        Q[q], capacity=2700.0, target_attributes={"modality": str(mods[q])}, doc_id=f"doc{(q * 7919) % (n // 6)}"
    )
    ch = list(seer.select(ann_pool, r).indices)
    ratios.append(float((emb[ch] @ Q[q]).sum() / (emb[exact[q]] @ Q[q]).sum()))
    rank = {int(i): k for k, i in enumerate(tops[q])}
    missed = [rank.get(int(i), -1) for i in exact[q] if int(i) not in set(ch)]
    missed_rank += missed
ratios = np.array(ratios)
bad = ratios < 0.95
print("p5", np.percentile(ratios, 5), "bad share", bad.mean())
for m, s in stats.items():
    print(f"recall@{m}: all {s.mean():.4f}  bad {s[bad].mean():.4f}  good {s[~bad].mean():.4f}")
print(
    "ranks (in exact top-200) of exact-chosen items not chosen by ann:",
    np.percentile(missed_rank, [10, 25, 50, 75, 90]),
)
