"""One query's similarities to many vectors, computed on the calling thread.

A query's similarities are a matrix-vector product: with the pool's embeddings (exact search), an index's
centroids (the cells to probe) and the candidates it fetched (their exact re-rank). Through BLAS
(``matrix @ vector``) OpenBLAS splits a product of more than a few thousand rows across its threads, and on a
machine whose cores are busy -- the embedded model decoding beside a server or a bench -- each split waits for a
core. Measured on this 2-core machine while the 1.5B model decoded (minimum of 20+ repeats, 384 dimensions):
4,000 rows (a 10^6 pool's centroids) 8.0 ms through BLAS against 0.16 ms on one thread; 6,251 rows (FinQA's case
pool) 7.5 ms against 0.26 ms. ``numpy.einsum`` computes the product on the calling thread, without BLAS threads:
about 1.7x BLAS's one-thread time on these sizes (0.28 / 0.45 ms), never the wait. Queries selected at once run on
the caller's own threads (bench workers, ``kdspy serve``), which is where the cores go.
"""

from __future__ import annotations

import numpy as np

__all__ = ["query_similarities"]


def query_similarities(vectors: np.ndarray, query: np.ndarray) -> np.ndarray:
    """``vectors @ query`` (one similarity per row) on the calling thread: no BLAS thread to wait for."""
    return np.einsum("ij,j->i", vectors, np.asarray(query, dtype=np.float32))
