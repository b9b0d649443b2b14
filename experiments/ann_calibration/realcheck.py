"""Real pools: is the pool-only proxy (pool vectors, own doc excluded) pessimistic or optimistic vs unseen queries?"""


import numpy as np
from analyse import min_p, recall_at
from study import curves, top_k

from knapsack_dspy.docqa.data import load_examples
from knapsack_dspy.embeddings import TextEmbedder
from knapsack_dspy.selection import ann_index

K = 200
emb = TextEmbedder()
sets = {}
R = np.load("real.npz")
T = np.load("tune.npz")
sets["tatqa"] = (R["pool"], R["pool_docs"], T["queries"])
tr = list(load_examples("finqa_cases", split="train"))
dv = list(load_examples("finqa_cases", split="dev"))
sets["finqa"] = (
    emb.encode([x["question"] for x in tr]),
    np.asarray([str(x["doc_id"]) for x in tr]),
    emb.encode([x["question"] for x in dv]),
)
for name, (P, docs, Q) in sets.items():
    n = len(P)
    for c in (4, 8):
        nlist = max(1, min(n // 8, round(c * np.sqrt(n))))
        centroids, order, offsets, _ = ann_index.ivf_cells(P, nlist=nlist, seed=0)
        sizes = np.diff(offsets)
        assign = np.empty(n, dtype=np.int64)
        assign[order] = np.repeat(np.arange(len(sizes)), sizes)
        qr, qs = curves(Q, top_k(P, Q, [np.zeros(0, dtype=np.int64)] * len(Q)), centroids, assign, sizes)
        rng = np.random.default_rng(1)
        a = rng.choice(n, 256, replace=False)
        pr_self, _ = curves(P[a], top_k(P, P[a], [np.array([i]) for i in a]), centroids, assign, sizes)
        pr_doc, _ = curves(P[a], top_k(P, P[a], [np.flatnonzero(docs == docs[i]) for i in a]), centroids, assign, sizes)
        b = rng.choice(n, 256, replace=False)
        x = P[a] + P[b]
        x /= np.linalg.norm(x, axis=1, keepdims=True)
        pr_mix, _ = curves(
            x,
            top_k(P, x, [np.flatnonzero((docs == docs[i]) | (docs == docs[j])) for i, j in zip(a, b, strict=True)]),
            centroids,
            assign,
            sizes,
        )
        out = [f"{name} n={n} c={c} nlist={nlist} oracle p={min_p(qr, 0.95, nlist)}"]
        for t in (0.95, 0.97):
            for lab, pr in (("doc", pr_doc), ("mix", pr_mix)):
                p = min_p(pr, t, nlist)
                out.append(f"{lab}@{t}: p={p} real={recall_at(qr, p):.3f}")
        print("  ".join(out), flush=True)
