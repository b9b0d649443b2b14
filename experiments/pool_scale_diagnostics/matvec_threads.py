"""One query's similarities through BLAS's threads, BLAS on one thread, and einsum (the calling thread), for
matrices of 1,000-50,000 x 384: minimum and median of repeats. Run it while the embedded model decodes (the busy
case that motivated ``knapsack_dspy/selection/query_similarity.py``) and on the idle machine."""

import time

import numpy as np
from threadpoolctl import ThreadpoolController

blas = next(lib for lib in ThreadpoolController().select(user_api="blas").lib_controllers if "numpy" in lib.filepath)
rng = np.random.default_rng(0)


def timed(f, n):
    f()
    ts = []
    for _ in range(n):
        t = time.perf_counter()
        f()
        ts.append(time.perf_counter() - t)
    return round(1e3 * min(ts), 3), round(1e3 * float(np.median(ts)), 3)


q = rng.standard_normal(384).astype(np.float32)
threads = blas.get_num_threads()
for rows in (1000, 4000, 6251, 20000, 50000):
    m = rng.standard_normal((rows, 384)).astype(np.float32)
    n = max(20, 100000 // rows)
    through_blas = timed(lambda m=m: m @ q, n)
    blas.set_num_threads(1)
    one_thread = timed(lambda m=m: m @ q, n)
    blas.set_num_threads(threads)
    einsum = timed(lambda m=m: np.einsum("ij,j->i", m, q), n)
    print(rows, "ms (min, median): BLAS", through_blas, "BLAS one thread", one_thread, "einsum", einsum)
