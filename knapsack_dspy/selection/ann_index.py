"""An approximate nearest-neighbour index for the candidate prefilter of a large pool (numpy only).

SEER's selector solves its knapsack over the ``knn_k`` exemplars nearest the query. Exactly, that is one
similarity per pool exemplar per query (``n x d`` multiply-adds, all of the pool's embeddings read). A pool of at
least :data:`ANN_MIN_POOL` exemplars gets this index instead, an *inverted file* (IVF): k-means splits the pool
into ``nlist ~ 4 sqrt(n)`` cells (~250 vectors each at 10^6); a query scores the cell centroids, then only the
exemplars of its ``nprobe`` nearest cells (each cell's vectors are stored contiguously, so a probe is one slice
and one matrix-vector product), and the prefilter keeps the ``knn_k`` best of those by exact similarity.

``nprobe`` is calibrated when the index is built: the smallest number of cells whose recall@k against exact
search, on a sample of pool vectors used as queries (each excluding itself), reaches :data:`TARGET_RECALL`
(``calibration`` in the saved index records what was measured). A smaller pool is searched exactly (recall 1).

Why not faiss / hnswlib: ``faiss-cpu`` is a binary wheel on PyPI and ``hnswlib`` a source package (compiled at
install), and the base install must work without a compiled extension; an IVF over numpy arrays memory-maps from
the pool store like the embeddings (nothing to deserialise when a program loads). ``benchmarks/pool_scale.py``
measures its recall and speed against exact search.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

#: Pools of at least this many exemplars get the index (and the prefilter uses it); smaller pools: exact search.
ANN_MIN_POOL = 50_000
TARGET_RECALL = 0.99  # on pool vectors; queries that are not pool members come out lower (the bar is 0.95)
CALIBRATION_K = 200  # SEER's default knn_k
_TRAIN_PER_CELL = 30  # k-means trains on at most this many vectors per cell (a sample of the pool)
CELLS_PER_SQRT_N = 4  # nlist = 4 sqrt(n): cells of ~sqrt(n) / 4 vectors (250 at 10^6), so a probe reads little


def _kmeans(vectors: np.ndarray, nlist: int, rng: np.random.Generator, iterations: int = 10) -> np.ndarray:
    """Spherical k-means centroids (unit rows) of ``vectors``."""
    centroids = vectors[rng.choice(len(vectors), nlist, replace=False)].copy()
    for _ in range(iterations):
        assign = _nearest_cell(vectors, centroids)
        counts = np.bincount(assign, minlength=nlist)
        sums = np.zeros_like(centroids)
        order = np.argsort(assign, kind="stable")  # each cell's members together: one reduceat, no np.add.at
        starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
        filled = counts > 0
        sums[filled] = np.add.reduceat(vectors[order], starts[filled], axis=0)
        empty = counts == 0
        if empty.any():  # reseed an empty cell on a random vector
            sums[empty] = vectors[rng.choice(len(vectors), int(empty.sum()), replace=False)]
        norms = np.linalg.norm(sums, axis=1, keepdims=True)
        centroids = (sums / np.maximum(norms, 1e-12)).astype(np.float32)
    return centroids


def _nearest_cell(vectors: np.ndarray, centroids: np.ndarray, chunk: int = 16_384) -> np.ndarray:
    out = np.empty(len(vectors), dtype=np.int64)
    for start in range(0, len(vectors), chunk):
        block = np.asarray(vectors[start:start + chunk], dtype=np.float32)
        out[start:start + chunk] = np.argmax(block @ centroids.T, axis=1)
    return out


def exact_top_k(embeddings: np.ndarray, query: np.ndarray, k: int, exclude: int | None = None) -> np.ndarray:
    """The ``k`` most similar rows of ``embeddings`` to ``query`` (indices, unordered)."""
    sims = np.asarray(embeddings @ np.asarray(query, dtype=np.float32), dtype=np.float64)
    if exclude is not None:
        sims[exclude] = -np.inf
    k = min(k, len(sims))
    return np.argpartition(-sims, k - 1)[:k]


class IVFIndex:
    """An inverted-file index over unit vectors (see the module docstring). ``order``: pool indices grouped by
    cell; ``offsets[c]:offsets[c + 1]``: cell ``c``'s part of ``order`` and of ``vectors`` (the same rows of the
    pool's embeddings, stored in cell order)."""

    def __init__(self, centroids: np.ndarray, order: np.ndarray, offsets: np.ndarray, vectors: np.ndarray,
                 nprobe: int, calibration: dict | None = None):
        self.centroids = centroids
        self.order = order
        self.offsets = offsets
        self.vectors = vectors
        self.nprobe = int(nprobe)
        self.calibration = dict(calibration or {})

    def __len__(self) -> int:
        return len(self.order)

    @property
    def nlist(self) -> int:
        return len(self.centroids)

    @classmethod
    def build(cls, embeddings: np.ndarray, *, nlist: int | None = None, seed: int = 0,
              target_recall: float = TARGET_RECALL, k: int = CALIBRATION_K, sample_queries: int = 64) -> IVFIndex:
        """Train the cells on a sample, assign every vector, calibrate ``nprobe`` (see the module docstring)."""
        embeddings = np.asarray(embeddings, dtype=np.float32)
        n = len(embeddings)
        if n == 0:
            raise ValueError("cannot index an empty pool")
        rng = np.random.default_rng(seed)
        nlist = int(nlist or max(1, min(n // 8 or 1, round(CELLS_PER_SQRT_N * np.sqrt(n)))))
        sample = embeddings[np.sort(rng.choice(n, min(n, nlist * _TRAIN_PER_CELL), replace=False))]
        centroids = _kmeans(sample, nlist, rng)
        assign = _nearest_cell(embeddings, centroids)
        order = np.argsort(assign, kind="stable").astype(np.int64)
        offsets = np.zeros(nlist + 1, dtype=np.int64)
        offsets[1:] = np.cumsum(np.bincount(assign, minlength=nlist))
        index = cls(centroids, order, offsets, embeddings[order], nprobe=nlist)
        index.calibrate(embeddings, rng, target_recall, k, sample_queries)
        return index

    def calibrate(self, embeddings: np.ndarray, rng: np.random.Generator, target_recall: float, k: int,
                  sample_queries: int) -> None:
        """Set ``nprobe`` to the fewest cells reaching ``target_recall`` on pool vectors asked as queries."""
        n = len(embeddings)
        k = min(k, n - 1)
        if k < 1:
            self.nprobe = self.nlist
            return
        queries = rng.choice(n, min(sample_queries, n), replace=False)
        truths = [set(exact_top_k(embeddings, embeddings[q], k, exclude=int(q)).tolist()) for q in queries]
        lo, hi = 1, self.nlist
        recall_at = {}
        while lo < hi:  # recall grows with nprobe: the smallest nprobe reaching the target
            mid = (lo + hi) // 2
            recall_at[mid] = self._recall(embeddings, queries, truths, k, mid)
            if recall_at[mid] >= target_recall:
                hi = mid
            else:
                lo = mid + 1
        self.nprobe = lo
        measured = recall_at.get(lo)
        if measured is None:
            measured = self._recall(embeddings, queries, truths, k, lo)
        self.calibration = {"k": k, "queries": len(queries), "target_recall": target_recall,
                            "recall": round(float(measured), 4), "nprobe": lo, "nlist": self.nlist}

    def _recall(self, embeddings, queries, truths, k: int, nprobe: int) -> float:
        hits = 0
        for q, truth in zip(queries, truths, strict=True):
            found = self.search(embeddings[q], k + 1, nprobe=nprobe)
            hits += len(truth & set(found.tolist()) - {int(q)})
        return hits / (k * len(queries))

    def search(self, query: np.ndarray, k: int, nprobe: int | None = None) -> np.ndarray:
        """Pool indices of (about) the ``k`` nearest vectors to ``query``, most similar first (fewer when the
        probed cells hold fewer)."""
        query = np.asarray(query, dtype=np.float32)
        nprobe = min(self.nlist, int(nprobe or self.nprobe))
        cell_sims = self.centroids @ query
        cells = np.argpartition(-cell_sims, nprobe - 1)[:nprobe] if nprobe < self.nlist else np.arange(self.nlist)
        rows, sims = [], []
        for c in cells:
            start, end = int(self.offsets[c]), int(self.offsets[c + 1])
            if end > start:
                rows.append(np.arange(start, end))
                sims.append(self.vectors[start:end] @ query)
        if not rows:
            return np.zeros(0, dtype=np.int64)
        rows_all, sims_all = np.concatenate(rows), np.concatenate(sims)
        if len(rows_all) > k:
            top = np.argpartition(-sims_all, k - 1)[:k]
            rows_all, sims_all = rows_all[top], sims_all[top]
        best = np.argsort(-sims_all, kind="stable")
        return np.asarray(self.order[rows_all[best]], dtype=np.int64)

    # -- files (beside a pool store's) --------------------------------------------------------------
    def save(self, directory: str | Path) -> None:
        directory = Path(directory)
        np.save(directory / "ivf.centroids.npy", self.centroids)
        np.save(directory / "ivf.order.npy", self.order)
        np.save(directory / "ivf.offsets.npy", self.offsets)
        np.save(directory / "ivf.vectors.npy", self.vectors)
        (directory / "ivf.json").write_text(json.dumps({"nprobe": self.nprobe, "calibration": self.calibration},
                                                       sort_keys=True))

    @classmethod
    def load(cls, directory: str | Path) -> IVFIndex:
        directory = Path(directory)
        meta = json.loads((directory / "ivf.json").read_text())
        return cls(np.load(directory / "ivf.centroids.npy"), np.load(directory / "ivf.order.npy", mmap_mode="r"),
                   np.load(directory / "ivf.offsets.npy"), np.load(directory / "ivf.vectors.npy", mmap_mode="r"),
                   meta["nprobe"], meta.get("calibration"))


__all__ = ["ANN_MIN_POOL", "CALIBRATION_K", "TARGET_RECALL", "IVFIndex", "exact_top_k"]
