# ruff: noqa: B007  (diagnostic scripts as they were run; see README.md)
import pickle
import sys
import time

import numpy as np

sys.path.insert(0, "benchmarks")
import pool_scale as ps

from knapsack_dspy.selection import ann_index
from knapsack_dspy.selection.exemplar_pool import ExemplarPool
from knapsack_dspy.selection.selectors.base import candidates
from knapsack_dspy.selection.selectors.seer import KnapsackSelector

job = pickle.load(open("../research/ps_job.pkl", "rb"))
store, index, ann_pool, common = ps._pools(job)
exact_pool = ExemplarPool(**common)
seer = KnapsackSelector()
reqs = list(ps._requests(job, len(store)))
faiss = ann_index.faiss_module()


# timing breakdown
def med(f):
    ts = []
    for e, r in reqs:
        s = time.perf_counter()
        f(e, r)
        ts.append(time.perf_counter() - s)
    return round(1e3 * np.median(ts), 3)


for e, r in reqs[:50]:
    candidates(ann_pool, r, 200)
print("candidates", med(lambda e, r: candidates(ann_pool, r, 200)))
print("faiss 400+", med(lambda e, r: index.search(e, 2 * 200 + len(r.exclude_ids))))
print("faiss 200", med(lambda e, r: index.search(e, 200)))
q = index.index.quantizer
print("quantizer", med(lambda e, r: q.search(np.asarray(e, dtype=np.float32).reshape(1, -1), 41)))
print("omp threads", faiss.omp_get_max_threads())
faiss.omp_set_num_threads(1)
print("faiss 400 1 thread", med(lambda e, r: index.search(e, 400)))
faiss.omp_set_num_threads(2)
# per-source objective/recall
res = {"tatqa": [], "finqa": []}
for (e, r), src in zip(reqs, job["sources"], strict=False):
    ai, _ = candidates(ann_pool, r, 200)
    ei, _ = candidates(exact_pool, r, 200)
    a = seer.select(ann_pool, r)
    x = seer.select(exact_pool, r)
    sims = np.asarray(exact_pool.embeddings @ np.asarray(e, dtype=np.float32), dtype=float)
    ev = sims[list(x.indices)].sum()
    res[src].append(
        (
            len(set(ai.tolist()) & set(ei.tolist())) / 200,
            sims[list(a.indices)].sum() / ev,
            len(a.indices),
            len(x.indices),
            sims[ei].max(),
        )
    )
for src, v in res.items():
    v = np.asarray(v)
    print(
        src,
        len(v),
        f"recall mean {v[:, 0].mean():.4f} p5 {np.percentile(v[:, 0], 5):.4f}",
        f"obj mean {v[:, 1].mean():.4f} p5 {np.percentile(v[:, 1], 5):.4f}",
        "fewer items",
        int((v[:, 2] < v[:, 3]).sum()),
        f"top sim median {np.median(v[:, 4]):.3f}",
    )
pickle.dump(res, open("../research/res.pkl", "wb"))
