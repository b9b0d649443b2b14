"""Recall curves of IVF cells on synthetic pools (pool_scale's rule): real queries and pool-only proxies."""

import json
import os
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import pool_scale

from knapsack_dspy.selection import ann_index

K = 200
R = np.load("real.npz")
T = np.load("tune.npz")
real = {"embeddings": R["pool"]}
QSETS = {"unseen": T["queries"], "dev1000": R["queries"]}


def cells(emb, n, c):
    path = f"cells_{n}_{c}.npz"
    if os.path.exists(path):
        z = np.load(path)
        return z["centroids"], z["order"], z["offsets"]
    nlist = max(1, min(n // 8, round(c * np.sqrt(n))))
    centroids, order, offsets, _ = ann_index.ivf_cells(emb, nlist=nlist, seed=0)
    np.savez(path, centroids=centroids, order=order, offsets=offsets)
    return centroids, order, offsets


def top_k(emb, Q, excl):  # excl: list of arrays of excluded pool rows per query
    out = np.empty((len(Q), K), dtype=np.int64)
    for s in range(0, len(Q), 32):
        S = Q[s : s + 32] @ emb.T
        for j, ex in enumerate(excl[s : s + 32]):
            S[j, ex] = -np.inf
        out[s : s + 32] = np.argpartition(-S, K - 1, axis=1)[:, :K]
    return out


def curves(Q, tops, centroids, assign, sizes):
    C = Q @ centroids.T
    order = np.argsort(-C, axis=1)
    rank = np.empty_like(order)
    rows = np.arange(len(Q))[:, None]
    rank[rows, order] = np.arange(C.shape[1])[None, :]
    ranks = np.sort(rank[rows, assign[tops]], axis=1).astype(np.int32)  # cell rank of each true neighbour
    scanned = np.cumsum(sizes[order], axis=1).mean(axis=0)  # members read when probing 1..nlist cells
    return ranks, scanned


def proxies(emb, docs, rng, m=256):
    n = len(emb)
    out = {}
    a = rng.choice(n, m, replace=False)
    out["self"] = (emb[a], [np.array([i]) for i in a])
    out["doc"] = (emb[a], [np.flatnonzero(docs == docs[i]) for i in a])
    b = rng.choice(n, m, replace=False)
    x = emb[a] + emb[b]
    out["mix_random"] = (x / np.linalg.norm(x, axis=1, keepdims=True), [np.array([i, j]) for i, j in zip(a, b, strict=True)])
    # a pool vector mixed with one of its 10 nearest (a point between neighbours)
    S = emb[a] @ emb.T
    S[np.arange(m), a] = -np.inf
    nb = np.argpartition(-S, 10, axis=1)[:, :10][np.arange(m), rng.integers(10, size=m)]
    w = rng.random(m)[:, None]
    x = w * emb[a] + (1 - w) * emb[nb]
    out["mix_near"] = (x / np.linalg.norm(x, axis=1, keepdims=True), [np.array([i, j]) for i, j in zip(a, nb, strict=True)])
    return out


def run(n, c):
    emb, _source = pool_scale.synthetic(real, n, 0.35, 0)
    centroids, order, offsets = cells(emb, n, c)
    sizes = np.diff(offsets)
    assign = np.empty(n, dtype=np.int64)
    assign[order] = np.repeat(np.arange(len(sizes)), sizes)
    docs = np.arange(n) // 6
    res = {"n": n, "c": c, "nlist": len(centroids)}
    arrays = {}
    for name, Q in QSETS.items():
        excl = [np.flatnonzero(docs == (q * 7919) % max(1, n // 6)) for q in range(len(Q))]
        ranks, scanned = curves(Q, top_k(emb, Q, excl), centroids, assign, sizes)
        arrays[f"q_{name}"] = ranks
        arrays[f"s_{name}"] = scanned
    for name, (Q, excl) in proxies(emb, docs, np.random.default_rng([1, n])).items():
        ranks, scanned = curves(Q, top_k(emb, Q, excl), centroids, assign, sizes)
        arrays[f"p_{name}"] = ranks
        arrays[f"ps_{name}"] = scanned
    np.savez(f"curves_{n}_{c}.npz", **arrays, sizes=sizes)
    print(json.dumps(res), flush=True)


if __name__ == "__main__":
    for spec in sys.argv[1:]:
        n, c = spec.split(":")
        run(int(n), int(c))
