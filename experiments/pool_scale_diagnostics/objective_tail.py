"""Why SEER's chosen sets on the index's candidates fall short of exact candidates' in the tail (issue 25), and
what a reserve of candidates past the k nearest recovers. Needs the store and job of build_store.py."""
import pickle
import sys
import time

import numpy as np

sys.path.insert(0, "benchmarks")
import pool_scale as ps

from knapsack_dspy.selection.exemplar_pool import ExemplarPool
from knapsack_dspy.selection.selectors import seer as seer_module
from knapsack_dspy.selection.selectors.base import CandidateValues, candidates, eligible_among
from knapsack_dspy.selection.selectors.seer import KnapsackSelector

job = pickle.load(open("../research/ps_job.pkl", "rb"))
store, index, ann_pool, common = ps._pools(job)
exact_pool = ExemplarPool(**common)
seer = KnapsackSelector()
reqs = list(ps._requests(job, len(store)))
limit = int(sys.argv[1]) if len(sys.argv) > 1 else len(reqs)
K = 200


def fetched(pool, request):
    found = np.sort(eligible_among(pool, request, pool.index.search(request.embedding, 2 * K + len(request.exclude_ids))))
    return found, pool.embeddings[found] @ np.asarray(request.embedding, dtype=np.float32)


def variant(extra_rule):
    def cands(pool, request, knn_k=None):
        found, values = fetched(pool, request)
        order = np.argsort(-values)
        keep = list(order[:K])
        keep += extra_rule(pool, request, found, values, order[K:])
        keep = np.sort(np.asarray(keep))
        return found[keep], CandidateValues(found[keep], values[keep])
    return cands


def cheapest(r, same_modality):
    def rule(pool, request, found, values, rest):
        rest = np.asarray(rest)
        if same_modality:
            target = request.target_attributes["modality"]
            mod = pool.attributes["modality"][found[rest]]
            rest = rest[mod == target]
        costs = pool.costs[found[rest]]
        return list(rest[np.argsort(costs, kind="stable")[:r]])
    return rule


variants = {"top200": variant(lambda *a: []), "all_fetched": variant(lambda p, r, f, v, rest: list(rest)),
            "+10 cheapest": variant(cheapest(10, False)), "+20 cheapest": variant(cheapest(20, False)),
            "+10 cheapest target modality": variant(cheapest(10, True)),
            "+20 cheapest target modality": variant(cheapest(20, True))}
original = seer_module.candidates
rows = []
detail = []
for q, (embedding, request) in enumerate(reqs[:limit]):
    sims = np.asarray(exact_pool.embeddings @ np.asarray(embedding, dtype=np.float32), dtype=float)
    exact_idx, _ = candidates(exact_pool, request, K)
    x = seer.select(exact_pool, request)
    ev = sims[list(x.indices)].sum()
    row = {}
    for name, fn in variants.items():
        seer_module.candidates = fn
        t = time.perf_counter()
        a = seer.select(ann_pool, request)
        row[name] = (sims[list(a.indices)].sum() / ev, time.perf_counter() - t, len(a.indices))
    seer_module.candidates = original
    ann_idx, _ = candidates(ann_pool, request, K)
    missing = sorted(set(x.indices) - set(ann_idx.tolist()))
    rank = {int(i): r for r, i in enumerate(exact_idx[np.argsort(-sims[exact_idx])])}
    detail.append({"q": q, "source": job["sources"][q], "target": request.target_attributes["modality"],
                   "exact_n": len(x.indices), "ann_n": row["top200"][2], "ratio": row["top200"][0],
                   "missing": [(rank[int(i)], float(store.costs[i]), str(store.attributes["modality"][i]))
                               for i in missing],
                   "recall": len(set(exact_idx.tolist()) & set(ann_idx.tolist())) / K,
                   "exact_costs": sorted(float(store.costs[i]) for i in x.indices),
                   "exact_mods": [str(store.attributes["modality"][i]) for i in x.indices], "relaxed": x.info.get("relaxed") if hasattr(x, "info") else None})
    rows.append(row)
    if q % 100 == 99:
        print(q + 1, flush=True)
pickle.dump({"rows": rows, "detail": detail}, open("../research/objective_tail.pkl", "wb"))
src = np.asarray(job["sources"][:limit])
for name in variants:
    r = np.asarray([row[name][0] for row in rows])
    t = np.asarray([row[name][1] for row in rows])
    by = " ".join(f"{s}: {r[src == s].mean():.4f}/{np.percentile(r[src == s], 5):.4f}" for s in sorted(set(src)))
    print(f"{name:32s} mean {r.mean():.4f} p5 {np.percentile(r, 5):.4f} | {by} | select ms median {1e3 * np.median(t):.1f}")
tail = [d for d in detail if d["ratio"] < 0.95]
print("tail queries", len(tail))
for d in tail[:25]:
    print(d["q"], d["source"], d["target"], d["exact_n"], d["ann_n"], round(d["ratio"], 3), "recall", d["recall"],
          "missing", d["missing"], "exact costs", [int(c) for c in d["exact_costs"]], d["exact_mods"])
