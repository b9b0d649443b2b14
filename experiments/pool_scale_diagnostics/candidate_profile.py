"""Where a query's candidate retrieval spends its time on the 10^6 store of build_store.py (cProfile over 300 of
the acceptance queries). Run at 8244761 while the LM decoded: the centroid product (``_probe``) took 2.9 ms of 5.6,
BLAS waiting for a busy core (matvec_threads.py)."""
import cProfile
import pickle
import pstats
import sys
import time

sys.path.insert(0, "benchmarks")
import pool_scale as ps

from knapsack_dspy.selection.selectors.base import candidates

job = pickle.load(open("../research/ps_job.pkl", "rb"))
store, index, ann_pool, common = ps._pools(job)
reqs = list(ps._requests(job, len(store)))[:300]
for _e, r in reqs[:50]:
    candidates(ann_pool, r, 200)


def run():
    for _e, r in reqs:
        candidates(ann_pool, r, 200)


t = time.perf_counter()
run()
print("per query ms", 1e3 * (time.perf_counter() - t) / len(reqs))
cProfile.run("run()", "../research/cand.out")
pstats.Stats("../research/cand.out").sort_stats("tottime").print_stats(15)
