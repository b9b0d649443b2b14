"""An approximate nearest-neighbour index for the candidate prefilter of a large pool: faiss's IVF when faiss is
installed, the same IVF in numpy otherwise.

SEER's selector solves its knapsack over the ``knn_k`` exemplars nearest the query. Exactly, that is one
similarity per pool exemplar per query (``n x d`` multiply-adds, all of the pool's embeddings read). A pool of at
least :data:`ANN_MIN_POOL` exemplars gets this index instead, an *inverted file* (IVF): k-means splits the pool
into ``nlist ~ CELLS_PER_SQRT_N sqrt(n)`` cells; a query scores the cell centroids, then only the exemplars of the
cells it probes, and the prefilter keeps the ``knn_k`` best of those by exact similarity. **The cells a query
probes** (:func:`probe_counts`): those whose centroid's similarity is within ``delta`` of the nearest centroid's,
at least ``floor`` of them. A query far from the pool sees flatter centroid similarities, so
it probes more cells than one in a dense region; a fixed ``nprobe`` (the rule before) under-probes far queries (at
10^6, FinQA questions against a TAT-QA-grown pool: recall@200 0.949 with 41 cells, TAT-QA's 0.982). What a query
reads is ``nlist`` centroids plus the probed cells' members (:meth:`~_IVF.vectors_scanned`, the
machine-independent cost of a query).

**Calibration** (:func:`calibrate_nprobe`, when the index is built, from the pool alone): ``(floor, delta)`` is the
pair that reads the fewest vectors among those (a floor, and the smallest ``delta`` of :data:`DELTA_GRID` for it)
whose recall@k reaches the target below (and, recorded beside it for searches that name their own ``nprobe``,
``nprobe`` is the fewest fixed cells whose recall@k does; ``floor = nprobe, delta = 0`` is one of the pairs, so the
rule never reads more than the fixed cells on the calibration's queries): recall@k (k = :data:`CALIBRATION_K`,
SEER's ``knn_k``) against exact search reaches :data:`TARGET_RECALL` = 0.97 *at 95 % confidence* (the mean less
1.645 standard errors) on each of two kinds of query made from the pool (:data:`CALIBRATION_QUERIES` = 1,024 in
all), the harder kind deciding:

- *pool vectors*, each without its own document (the pool's doc ids; without them, without itself): a query like
  the pool's questions, from a document the pool does not hold;
- *midpoints* of two random pool vectors, without either's document: a query between the pool's questions. In a
  pool of tight groups larger than k (near-duplicates; a synthetic pool grown far beyond its real seed) a pool
  vector finds its k nearest in its own group, in a cell or two, while a new question between groups needs many
  more cells: pool vectors alone would calibrate too few.

The recall of every ``delta`` (and ``nprobe``) comes from one pass: a true neighbour is found exactly when its cell
is among the probed ones (:func:`recall_curves`), so no search runs. ``calibration`` in the saved index records
the method, each kind's recall and lower bound at the chosen ``nprobe``, the share of the pool a query reads, and
the same for the rule under ``probe`` (with ``delta``, ``floor`` and ``cells_mean``); an index saved before the
rule (no ``probe``) searches with its fixed ``nprobe``, as built; an index
saved before the method was recorded (a mean recall of 0.99 on pool vectors, each without itself) loads and
searches as it was built.

Why 0.97, not the issue's recall bar 0.95 (``experiments/ann_calibration/``: synthetic pools of 10^4 - 2 x 10^5
grown from TAT-QA's, 404 TAT-QA questions no pool holds): SEER's chosen sets are what must stay within 95 % of
exact candidates' objective at the 5th percentile, and a missed cheap exemplar costs a whole item (one fewer fits
the budget): at 2 x 10^5 a calibration to 0.95 or 0.96 gave recall 0.975 / 0.983 but that 5th percentile 0.89 /
0.95; 0.97 gave recall >= 0.98 and the 5th percentile >= 0.98 at every size measured. The former target, a mean
of 0.99 on pool vectors, read 56-63 % of the pool at 10^4 - 10^5 and 32 % at 2 x 10^5; this one reads 42 / 31 /
23 / 5.5 % at 10^4 / 5 x 10^4 / 10^5 / 2 x 10^5 (~2.5 % at 10^6 if the cells a query needs stay as at 2 x 10^5).
``CELLS_PER_SQRT_N`` = 4: 8 reads about as much (5.2 % at 2 x 10^5) for four times the k-means work, 16 and 32
read more (more centroids than they save in members). A pool below :data:`ANN_MIN_POOL` is searched exactly.

**Backends** (:data:`BACKENDS`; :func:`default_backend`). The cells are the same for both: spherical k-means in
numpy, seeded, so a pool gets the same cells, the same calibration and the same store hash wherever it is built
(faiss's own k-means is multi-threaded and not bit-for-bit reproducible). What differs is the search:

- ``"faiss"`` -- used when ``faiss`` imports (the ``ann`` extra: ``pip install 'knapsack-dspy[ann]'``, the
  ``faiss-cpu`` wheel): a ``faiss.IndexIVFScalarQuantizer`` with the inner product holds the cells' vectors as
  8-bit codes (each dimension's range over the pool in 256 steps; no residuals); a probe is a SIMD scan in C++ and
  the top k a heap, with no Python per cell. The codes are a quarter of the vectors' bytes, so a probe reads a
  quarter of the memory: at 10^6 exemplars 1.8 ms a query against 5.9 ms for the float vectors (``IndexIVFFlat``,
  the former layout, which still loads). The codes only rank: the prefilter asks the index for twice the ``knn_k``
  it needs and keeps the best by exact similarity from the pool's float32 embeddings
  (``selectors.base.approximate_candidates``); for 300 queries near a 10^6 pool's vectors that kept the same 200
  as the float index did. The probe rule's cells are handed to faiss as they are (``search_preassigned``), so
  the centroids are scored once per query, not again by faiss's quantizer. It is written with
  ``faiss.write_index``
  (``ivf.faiss``) and read memory-mapped (``IO_FLAG_MMAP``): nothing is copied when a program loads, and the
  pages are shared by every process on the machine.
- ``"numpy"`` -- each cell's vectors stored contiguously (``ivf.vectors.npy``, memory-mapped); a probe is one slice
  and one matrix-vector product, a Python loop over the probed cells (measured at 10^5 exemplars, 748 of 1,265
  cells probed: 25 ms a query against exact search's 12 ms, ``benchmarks/results/pool_scale``).

A store whose index was built with faiss and is opened where faiss is not installed is searched by numpy over the
same cells (``ivf.order.npy`` names each cell's exemplars, whose vectors are read from the pool's embeddings): the
same ``knn_k`` nearest candidates (the cheap reserve, :data:`CHEAP_RESERVE`, comes from the rest each backend
fetched and can differ at that edge), more slowly, and a warning says so once. :func:`describe` is the one-line
account of the backend in use (the compile report, ``benchmarks/pool_scale.py``).

Why faiss is optional, not a dependency: the base install works without a compiled extension (``faiss-cpu`` is a
binary wheel per platform and Python), and the real suites' pools (at most 13,215 exemplars) are searched exactly
anyway. ``hnswlib`` (a source package compiled at install) is not used. ``benchmarks/pool_scale.py`` measures both
backends' recall and speed against exact search.
"""

from __future__ import annotations

import importlib.util
import json
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from knapsack_dspy._env import apply_openmp_wait_defaults
from knapsack_dspy.errors import KnapsackDspyWarning
from knapsack_dspy.selection.query_similarity import query_similarities

#: Pools of at least this many exemplars get the index (and the prefilter uses it); smaller pools: exact search.
ANN_MIN_POOL = 50_000
#: Besides the ``knn_k`` nearest, SEER's prefilter keeps this many of the cheapest other candidates the index
#: fetched (``KnapsackSelector.cheap_reserve``, ``selectors.base.approximate_candidates``): a knapsack's best set
#: hangs on its cheap members, and a cheap exemplar the index misses costs a whole exemplar (one fewer fits the
#: budget) -- at 10^6, the 5th percentile of SEER's objective against exact candidates' went from 0.881 to 0.985
#: (``experiments/pool_scale_diagnostics``).
CHEAP_RESERVE = 10
#: nprobe's calibration (:func:`calibrate_nprobe`; the module docstring): recall@k at least TARGET_RECALL at
#: one-sided confidence CONFIDENCE_Z (95 %) on CALIBRATION_QUERIES queries made from the pool
TARGET_RECALL = 0.97
CONFIDENCE_Z = 1.645
CALIBRATION_QUERIES = 1024
CALIBRATION_K = 200  # SEER's default knn_k
CALIBRATION_KINDS = ("pool vectors", "midpoints")  # the calibration's queries (calibration_queries)
CALIBRATION_METHOD = ("recall lower bound on pool vectors and midpoints of two, each without its documents; "
                      "the harder kind")
#: The probe rule (:func:`probe_counts`): a query probes the cells whose centroid's similarity is within ``delta`` of
#: its nearest centroid's, at least ``floor`` of them; (floor, delta) calibrated together (calibrate_nprobe): of the
#: pairs from FLOOR_STEPS floors (and the fixed nprobe) x DELTA_GRID reaching the target, the one reading least
DELTA_GRID = np.round(np.arange(0.0, 2.0001, 0.005), 3)
FLOOR_STEPS = 48
PROBE_RULE = "cells within delta of the nearest centroid's similarity, at least a floor"
_TRAIN_PER_CELL = 30  # k-means trains on at most this many vectors per cell (a sample of the pool)
CELLS_PER_SQRT_N = 4  # nlist = 4 sqrt(n): cells of ~sqrt(n) / 4 vectors (250 at 10^6); the module docstring
BACKENDS = ("faiss", "numpy")
FAISS_FILE = "ivf.faiss"
META_FILE = "ivf.json"
INSTALL_HINT = "pip install 'knapsack-dspy[ann]'"


class FaissMissingWarning(KnapsackDspyWarning, UserWarning):
    """A pool store's index was built with faiss, which is not installed here: searched with numpy instead."""


def faiss_module():
    """The ``faiss`` module, or ``None`` when it is not installed."""
    if importlib.util.find_spec("faiss") is None:
        return None
    apply_openmp_wait_defaults()  # faiss-cpu brings its own libgomp, which reads its waits when it loads
    try:
        import faiss  # the optional ann extra: a compiled wheel, loaded only when an index is built or opened
    except ImportError:
        return None
    return faiss


def default_backend() -> str:
    """``"faiss"`` when faiss is installed, else ``"numpy"`` (the backend a new index is built with)."""
    return "faiss" if faiss_module() is not None else "numpy"


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


def ivf_cells(embeddings: np.ndarray, *, nlist: int | None = None, seed: int = 0):
    """The cells of an IVF over ``embeddings``: ``(centroids, order, offsets, rng)`` -- ``order`` lists the pool
    indices cell by cell, ``offsets[c]:offsets[c + 1]`` is cell ``c``'s part of it; ``rng`` continues the seeded
    draws (the calibration's queries)."""
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
    return centroids, order, offsets, rng


def cell_assignment(order: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """Each pool vector's cell (``order`` / ``offsets`` as :func:`ivf_cells` gives them)."""
    assign = np.empty(len(order), dtype=np.int64)
    assign[np.asarray(order)] = np.repeat(np.arange(len(offsets) - 1), np.diff(offsets))
    return assign


def calibration_queries(embeddings: np.ndarray, rng: np.random.Generator, count: int):
    """``(queries, owners, kinds)``: about ``count / 2`` pool vectors (kind 0) and as many midpoints of two
    different pool vectors (kind 1, normalised), drawn with ``rng``; ``owners[j]`` are the pool rows query ``j``
    was made of (twice the same row for a pool vector)."""
    n = len(embeddings)
    rows = np.sort(rng.choice(n, min(n, count - count // 2), replace=False))
    first = rng.integers(n, size=count // 2) if n > 1 else np.zeros(0, dtype=np.int64)
    second = (first + rng.integers(1, n, size=len(first))) % n if n > 1 else first
    mids = np.asarray(embeddings[first], dtype=np.float32) + np.asarray(embeddings[second], dtype=np.float32)
    mids /= np.maximum(np.linalg.norm(mids, axis=1, keepdims=True), 1e-12)
    queries = np.concatenate([np.asarray(embeddings[rows], dtype=np.float32), mids])
    owners = np.concatenate([np.stack([rows, rows], axis=1), np.stack([first, second], axis=1)]).astype(np.int64)
    kinds = np.repeat([0, 1], [len(rows), len(first)])
    return queries, owners, kinds


def pool_neighbours(embeddings: np.ndarray, queries: np.ndarray, owners: np.ndarray, k: int,
                    doc_ids: np.ndarray | None = None, block: int = 16_384) -> np.ndarray:
    """The ``k`` nearest pool vectors to each of ``queries`` (one pass over the pool, in blocks), none of the
    documents of its ``owners`` (rows of the pool, ``(len(queries), r)``; with ``doc_ids``, their documents;
    without, those rows): ``(len(queries), k)`` pool indices, ``-1`` where fewer are eligible."""
    queries = np.asarray(queries, dtype=np.float32)
    docs = (np.arange(len(embeddings)) if doc_ids is None
            else np.unique(np.asarray(doc_ids), return_inverse=True)[1].ravel())
    own = docs[np.asarray(owners, dtype=np.int64)]  # (queries, r): the documents each query leaves out
    best_sims = np.full((len(queries), k), -np.inf, dtype=np.float32)
    best_idx = np.full((len(queries), k), -1, dtype=np.int64)
    for start in range(0, len(embeddings), block):
        part = np.asarray(embeddings[start:start + block], dtype=np.float32)
        sims = queries @ part.T
        part_docs = docs[start:start + len(part)]
        for column in own.T:
            sims[column[:, None] == part_docs[None, :]] = -np.inf
        if len(part) > k:  # the block's own k best first: the merge below is then small
            top = np.argpartition(-sims, k - 1, axis=1)[:, :k]
            sims, idx = np.take_along_axis(sims, top, 1), top + start
        else:
            idx = np.broadcast_to(np.arange(start, start + len(part)), sims.shape)
        sims, idx = np.concatenate([best_sims, sims], axis=1), np.concatenate([best_idx, idx], axis=1)
        top = np.argpartition(-sims, k - 1, axis=1)[:, :k]
        best_sims, best_idx = np.take_along_axis(sims, top, 1), np.take_along_axis(idx, top, 1)
    best_idx[~np.isfinite(best_sims)] = -1
    return best_idx


def recall_curves(centroids: np.ndarray, assign: np.ndarray, queries: np.ndarray,
                  truths: np.ndarray) -> np.ndarray:
    """``(len(queries), nlist)``: entry ``[j, p - 1]`` is query ``j``'s recall of its ``truths`` (pool indices,
    ``-1`` for none) when its ``p`` nearest cells are probed. A search of those cells returns every true
    neighbour they hold (fewer than ``k`` vectors can beat one), so this is the search's recall@k, for every
    ``nprobe`` at once, without searching."""
    nlist = len(centroids)
    cell_sims = np.asarray(queries, dtype=np.float32) @ centroids.T
    rank = np.empty(cell_sims.shape, dtype=np.int64)
    np.put_along_axis(rank, np.argsort(-cell_sims, axis=1, kind="stable"), np.arange(nlist)[None, :], axis=1)
    valid = truths >= 0
    found_at = np.take_along_axis(rank, assign[np.where(valid, truths, 0)], axis=1)  # the probe finding each
    counts = np.zeros((len(queries), nlist), dtype=np.float32)
    np.add.at(counts, (np.nonzero(valid)[0], found_at[valid]), 1)
    return np.cumsum(counts, axis=1) / np.maximum(valid.sum(axis=1, keepdims=True), 1)


def probe_counts(cell_sims: np.ndarray, delta: float, floor: int) -> np.ndarray:
    """How many cells each query probes (``cell_sims``: one row of centroid similarities per query): those within
    ``delta`` of its nearest centroid's similarity, at least ``floor``. A query far from the pool sees flatter
    similarities to the centroids, so more of them fall within ``delta``: it probes more cells than a query in a
    dense region, where a fixed ``nprobe`` under-probes the one and over-probes the other."""
    cell_sims = np.atleast_2d(np.asarray(cell_sims, dtype=np.float64))
    near = (cell_sims >= cell_sims.max(axis=1, keepdims=True) - float(delta)).sum(axis=1)
    return np.clip(near, min(int(floor), cell_sims.shape[1]), cell_sims.shape[1])


def _relative_rule(curves: np.ndarray, cell_sims: np.ndarray, kinds: np.ndarray, target_recall: float, z: float,
                   sizes: np.ndarray, nprobe: int) -> dict:
    """The probe rule's ``(floor, delta)``: among ~:data:`FLOOR_STEPS` floors (geometric from 1 to ``nlist``, and the
    fixed ``nprobe``) and, for each, the smallest ``delta`` of :data:`DELTA_GRID` whose recall lower bound reaches
    ``target_recall`` on each kind of calibration query, the pair whose queries read the fewest vectors on average
    (``floor = nprobe, delta = 0`` is the fixed rule: the pair chosen never reads more than it). Returns the pair
    and what it measured (each kind's recall and bound, the cells and vectors a query reads)."""
    nlist = cell_sims.shape[1]
    cell_sims = np.asarray(cell_sims, dtype=np.float64)
    by_sim = np.argsort(-cell_sims, axis=1, kind="stable")
    read = np.cumsum(np.asarray(sizes, dtype=np.float64)[by_sim], axis=1)  # vectors read probing the p nearest
    gaps = np.sort(cell_sims.max(axis=1, keepdims=True) - cell_sims, axis=1)
    within = np.stack([np.searchsorted(row, DELTA_GRID, side="right") for row in gaps])  # (queries, grid)
    floors = sorted({int(f) for f in np.round(np.geomspace(1, nlist, FLOOR_STEPS))} | {int(nprobe)})
    names = [(kind, name) for kind, name in enumerate(CALIBRATION_KINDS) if (kinds == kind).any()]
    best = None
    for floor in floors:
        counts = np.clip(within, floor, nlist)
        recall = np.take_along_axis(curves, counts - 1, axis=1)  # (queries, grid)
        reached = np.ones(len(DELTA_GRID), dtype=bool)
        for kind, _name in names:
            part = recall[kinds == kind]
            sd = part.std(axis=0, ddof=1) if len(part) > 1 else np.zeros(part.shape[1])
            reached &= part.mean(axis=0) - z * sd / np.sqrt(len(part)) >= target_recall - 1e-9
        if not reached.any():
            continue
        first = int(np.flatnonzero(reached)[0])  # the smallest delta where every kind reaches the target
        cost = float(np.take_along_axis(read, counts[:, first:first + 1] - 1, axis=1).mean())
        if best is None or cost < best[0] - 1e-9:
            best = (cost, floor, first, counts[:, first], recall[:, first])
    if best is None:  # nothing reaches the target short of every cell
        counts = np.full(len(cell_sims), nlist)
        best = (float(read[:, -1].mean()), nlist, len(DELTA_GRID) - 1, counts, curves[:, -1])
    cost, floor, first, counts, recall = best
    kinds_at = {}
    for kind, name in names:
        part = recall[kinds == kind]
        sd = float(part.std(ddof=1)) if len(part) > 1 else 0.0
        kinds_at[name] = {"queries": len(part), "recall": round(float(part.mean()), 4),
                          "recall_lower_bound": round(float(part.mean() - z * sd / np.sqrt(len(part))), 4)}
    return {"rule": PROBE_RULE, "delta": float(DELTA_GRID[first]), "floor": int(floor),
            "cells_mean": round(float(counts.mean()), 1), "vectors_mean": round(cost, 1), "kinds": kinds_at}


def calibrate_nprobe(embeddings: np.ndarray, centroids: np.ndarray, order: np.ndarray, offsets: np.ndarray,
                     rng: np.random.Generator, *, target_recall: float = TARGET_RECALL, k: int = CALIBRATION_K,
                     sample_queries: int = CALIBRATION_QUERIES, doc_ids: np.ndarray | None = None,
                     z: float = CONFIDENCE_Z) -> tuple[int, dict]:
    """``(nprobe, calibration)``: the fewest cells whose recall@k reaches ``target_recall`` with one-sided
    confidence ``z`` (the mean less ``z`` standard errors) on each kind of :func:`calibration_queries`
    (``sample_queries`` in all): pool vectors, and midpoints of two pool vectors, each query without the
    documents it was made of (``doc_ids``; without them, without those vectors). ``calibration`` records the
    method and what was measured at that ``nprobe``: each kind's mean recall and lower bound, the lower of
    them (``recall``, ``recall_lower_bound``), and the share of the pool a query reads; and under ``probe`` the
    same for the rule searches use (:func:`probe_counts`): its ``floor`` and ``delta`` (``_relative_rule``: the pair
    reaching the target on each kind alike that reads the fewest vectors), the cells and vectors a calibration
    query reads on average (``cells_mean``, ``vectors_mean``). ``nprobe`` is kept: an explicit ``nprobe`` search,
    and what older code reads."""
    n, nlist = len(embeddings), len(centroids)
    k = min(k, n - 1)
    if k < 1:
        return nlist, {}
    queries, owners, kinds = calibration_queries(embeddings, rng, sample_queries)
    truths = pool_neighbours(embeddings, queries, owners, k, doc_ids)
    curves = recall_curves(centroids, cell_assignment(order, offsets), queries, truths)
    measured = {}
    for kind, name in enumerate(CALIBRATION_KINDS):
        part = curves[kinds == kind]
        if not len(part):
            continue
        mean = part.mean(axis=0)
        sd = part.std(axis=0, ddof=1) if len(part) > 1 else np.zeros(nlist)
        bound = mean - z * sd / np.sqrt(len(part))
        reached = np.flatnonzero(bound >= target_recall - 1e-9)
        measured[name] = (int(reached[0]) + 1 if reached.size else nlist, mean, bound, len(part))
    nprobe = max(m[0] for m in measured.values())  # the harder kind decides
    sizes = np.diff(offsets)
    cell_sims = queries @ centroids.T
    probed = np.argpartition(-cell_sims, nprobe - 1, axis=1)[:, :nprobe] if nprobe < nlist else None
    scanned = nlist + (sizes[probed].sum(axis=1).mean() if probed is not None else sizes.sum())
    kinds_at = {name: {"queries": m[3], "nprobe": m[0], "recall": round(float(m[1][nprobe - 1]), 4),
                       "recall_lower_bound": round(float(m[2][nprobe - 1]), 4)} for name, m in measured.items()}
    # the rule searches use (probe_counts): the cells within delta of the nearest centroid, delta calibrated alike
    rule = _relative_rule(curves, cell_sims, kinds, target_recall, z, sizes, nprobe)
    rule.update(recall=min(m["recall"] for m in rule["kinds"].values()),
                recall_lower_bound=min(m["recall_lower_bound"] for m in rule["kinds"].values()),
                scanned_share=round(float(nlist + rule["vectors_mean"]) / n, 4))
    return nprobe, {"method": CALIBRATION_METHOD, "k": k, "queries": len(queries), "target_recall": target_recall,
                    "confidence_z": z, "recall": min(m["recall"] for m in kinds_at.values()),
                    "recall_lower_bound": min(m["recall_lower_bound"] for m in kinds_at.values()),
                    "nprobe": nprobe, "nlist": nlist, "documents_excluded": doc_ids is not None,
                    "scanned_share": round(float(scanned) / n, 4), "kinds": kinds_at, "probe": rule}


class _Gathered:
    """A cell-ordered view of the pool's embeddings without a copy: ``[start:end]`` reads the rows
    ``order[start:end]`` (the numpy search of a store whose cells' vectors are in its faiss file)."""

    def __init__(self, embeddings: np.ndarray, order: np.ndarray):
        self.embeddings, self.order = embeddings, order

    def __getitem__(self, key: slice) -> np.ndarray:
        return np.asarray(self.embeddings[np.asarray(self.order[key])], dtype=np.float32)


class _IVF:
    """What both backends share: the cells' centroids, ``nprobe`` and its calibration."""

    backend = ""

    def __init__(self, centroids: np.ndarray, nprobe: int, calibration: dict | None = None):
        self.centroids = centroids
        self.nprobe = int(nprobe)
        self.calibration = dict(calibration or {})
        self.built_with = self.backend  # the backend the saved index was built with (faiss, searched by numpy)
        probe = self.calibration.get("probe") or {}
        # the relative rule's delta and floor (an index calibrated before the rule: None, a fixed nprobe)
        self.delta = None if probe.get("delta") is None else float(probe["delta"])
        self.floor = int(probe.get("floor") or 1)

    @property
    def nlist(self) -> int:
        return len(self.centroids)

    def probe_cells(self, query: np.ndarray, nprobe: int | None = None) -> np.ndarray:
        """The cells a search for ``query`` probes, nearest first: the calibrated rule (:func:`probe_counts`; an
        older index: its fixed ``nprobe``), or the ``nprobe`` nearest when one is given."""
        return self._probe(query, nprobe)[0]

    def _probe(self, query: np.ndarray, nprobe: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`probe_cells` and the query's similarity to each of their centroids."""
        cell_sims = query_similarities(self.centroids, query)
        if nprobe is None and self.delta is not None:
            count = int(probe_counts(cell_sims[None, :], self.delta, self.floor)[0])
        else:
            count = min(self.nlist, int(nprobe or self.nprobe))
        if count >= self.nlist:
            cells = np.argsort(-cell_sims, kind="stable")
        else:
            cells = np.argpartition(-cell_sims, count - 1)[:count]
            cells = cells[np.argsort(-cell_sims[cells], kind="stable")]
        return cells, cell_sims[cells]

    def search(self, query: np.ndarray, k: int, nprobe: int | None = None) -> np.ndarray:
        """Pool indices of (about) the ``k`` nearest vectors to ``query``, most similar first (fewer when the
        probed cells hold fewer)."""
        raise NotImplementedError

    def cell_sizes(self) -> np.ndarray:
        """The number of pool vectors in each cell."""
        raise NotImplementedError

    def save(self, directory: str | Path) -> None:
        """Write the index into ``directory`` (a pool store's folder: :func:`load_index` reads it back)."""
        raise NotImplementedError

    def vectors_scanned(self, query: np.ndarray, nprobe: int | None = None) -> int:
        """How many vectors a search for ``query`` scores: every centroid, then the members of the cells it probes
        (:meth:`probe_cells`; the machine-independent cost of a query)."""
        return self.nlist + int(self.cell_sizes()[self.probe_cells(query, nprobe)].sum())

    def _meta(self) -> dict:
        return {"backend": self.backend, "nprobe": self.nprobe, "calibration": self.calibration}


class IVFIndex(_IVF):
    """The numpy backend (see the module docstring). ``order``: pool indices grouped by cell;
    ``offsets[c]:offsets[c + 1]``: cell ``c``'s part of ``order`` and of ``vectors`` (the same rows of the pool's
    embeddings, in cell order: an array, or read from the embeddings by ``order``)."""

    backend = "numpy"

    def __init__(self, centroids: np.ndarray, order: np.ndarray, offsets: np.ndarray, vectors: Any,
                 nprobe: int, calibration: dict | None = None):
        super().__init__(centroids, nprobe, calibration)
        self.order = order
        self.offsets = offsets
        self.vectors = vectors

    def __len__(self) -> int:
        return len(self.order)

    @classmethod
    def build(cls, embeddings: np.ndarray, *, nlist: int | None = None, seed: int = 0,
              doc_ids: np.ndarray | None = None, **calibration) -> IVFIndex:
        """Train the cells on a sample, assign every vector, calibrate ``nprobe`` (:func:`calibrate_nprobe`;
        ``calibration``: its ``target_recall``, ``k``, ``sample_queries``)."""
        embeddings = np.asarray(embeddings, dtype=np.float32)
        centroids, order, offsets, rng = ivf_cells(embeddings, nlist=nlist, seed=seed)
        nprobe, measured = calibrate_nprobe(embeddings, centroids, order, offsets, rng, doc_ids=doc_ids,
                                            **calibration)
        return cls(centroids, order, offsets, embeddings[order], nprobe, measured)

    def cell_sizes(self) -> np.ndarray:
        return np.diff(np.asarray(self.offsets))

    def search(self, query: np.ndarray, k: int, nprobe: int | None = None) -> np.ndarray:
        query = np.asarray(query, dtype=np.float32)
        cells = self.probe_cells(query, nprobe)
        rows, sims = [], []
        for c in cells:
            start, end = int(self.offsets[c]), int(self.offsets[c + 1])
            if end > start:
                rows.append(np.arange(start, end))
                sims.append(query_similarities(self.vectors[start:end], query))
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
        _save_cells(directory, self.centroids, self.order, self.offsets)
        np.save(directory / "ivf.vectors.npy", self.vectors)
        (directory / META_FILE).write_text(json.dumps(self._meta(), sort_keys=True))

    @classmethod
    def load(cls, directory: str | Path, embeddings: np.ndarray | None = None) -> IVFIndex:
        """The numpy index saved in ``directory``; a faiss index's cells searched with numpy when its vectors are
        not saved for numpy (then read from ``embeddings``, the pool's)."""
        directory = Path(directory)
        meta = json.loads((directory / META_FILE).read_text())
        order = np.load(directory / "ivf.order.npy", mmap_mode="r")
        if (directory / "ivf.vectors.npy").is_file():
            vectors = np.load(directory / "ivf.vectors.npy", mmap_mode="r")
        elif embeddings is not None:
            vectors = _Gathered(embeddings, order)
        else:
            raise ValueError(f"{directory} holds no vectors for the numpy search: give the pool's embeddings")
        index = cls(np.load(directory / "ivf.centroids.npy"), order, np.load(directory / "ivf.offsets.npy"),
                    vectors, meta["nprobe"], meta.get("calibration"))
        index.built_with = meta.get("backend", "numpy")
        return index


class FaissIVFIndex(_IVF):
    """The faiss backend (see the module docstring): ``index`` is a ``faiss.IndexIVFScalarQuantizer`` (inner
    product, 8-bit codes; an index saved as ``faiss.IndexIVFFlat`` before loads and searches too) whose lists hold
    the cells' pool indices and codes."""

    backend = "faiss"

    def __init__(self, centroids: np.ndarray, index: Any, nprobe: int, calibration: dict | None = None):
        super().__init__(centroids, nprobe, calibration)
        self.index = index

    def __len__(self) -> int:
        return int(self.index.ntotal)

    @classmethod
    def build(cls, embeddings: np.ndarray, *, nlist: int | None = None, seed: int = 0,
              doc_ids: np.ndarray | None = None, **calibration) -> FaissIVFIndex:
        """The cells of :func:`ivf_cells` in a ``faiss.IndexIVFScalarQuantizer`` (8-bit codes of the vectors
        themselves, no residuals), ``nprobe`` calibrated as numpy's."""
        faiss = _require_faiss()
        embeddings = np.asarray(embeddings, dtype=np.float32)
        centroids, order, offsets, rng = ivf_cells(embeddings, nlist=nlist, seed=seed)
        dim = embeddings.shape[1]
        quantizer = faiss.IndexFlatIP(dim)
        quantizer.add(centroids)
        index = faiss.IndexIVFScalarQuantizer(quantizer, dim, len(centroids), faiss.ScalarQuantizer.QT_8bit,
                                              faiss.METRIC_INNER_PRODUCT, False)
        index.own_fields = True  # the index frees its quantizer
        quantizer.this.disown()
        index.sq.train(embeddings)  # each dimension's range over the whole pool: no vector is clipped
        index.is_trained = True  # the centroids are the cells (faiss's own training is not used)
        lists = index.invlists
        for cell in range(len(centroids)):  # each cell's members as numpy assigned them (no reassignment)
            start, end = int(offsets[cell]), int(offsets[cell + 1])
            if end > start:
                ids = np.ascontiguousarray(order[start:end], dtype=np.int64)
                codes = index.sq.compute_codes(np.ascontiguousarray(embeddings[ids], dtype=np.float32))
                lists.add_entries(cell, end - start, faiss.swig_ptr(ids), faiss.swig_ptr(codes))
        index.ntotal = len(embeddings)
        nprobe, measured = calibrate_nprobe(embeddings, centroids, order, offsets, rng, doc_ids=doc_ids,
                                            **calibration)
        built = cls(centroids, index, nprobe, measured)
        built._cells = (order, offsets)
        return built

    def cell_sizes(self) -> np.ndarray:
        sizes = self.__dict__.get("_sizes")
        if sizes is None:
            lists = self.index.invlists
            sizes = self._sizes = np.asarray([lists.list_size(c) for c in range(self.nlist)], dtype=np.int64)
        return sizes

    def search(self, query: np.ndarray, k: int, nprobe: int | None = None) -> np.ndarray:
        query = np.ascontiguousarray(np.asarray(query, dtype=np.float32).reshape(1, -1))
        faiss = _require_faiss()
        # the rule's cells given to faiss as they are (its quantizer would search the centroids a second time)
        cells, sims = self._probe(query[0], nprobe)
        cells = np.ascontiguousarray(cells, dtype=np.int64)
        sims = np.ascontiguousarray(sims, dtype=np.float32)
        distances, found = np.empty(int(k), dtype=np.float32), np.empty(int(k), dtype=np.int64)
        # the C++ call: the Python wrapper takes the count of cells from the index's shared nprobe (not per query)
        self.index.search_preassigned_c(1, faiss.swig_ptr(query), int(k), faiss.swig_ptr(cells), faiss.swig_ptr(sims),
                                        faiss.swig_ptr(distances), faiss.swig_ptr(found), False,
                                        faiss.SearchParametersIVF(nprobe=len(cells)))
        return np.asarray(found[found >= 0], dtype=np.int64)

    # -- files (beside a pool store's) --------------------------------------------------------------
    def save(self, directory: str | Path) -> None:
        """``ivf.faiss`` (``faiss.write_index``), the cells for a numpy search where faiss is missing, and the
        calibration."""
        directory = Path(directory)
        faiss = _require_faiss()
        order, offsets = self._cells_arrays()
        _save_cells(directory, self.centroids, order, offsets)
        faiss.write_index(self.index, str(directory / FAISS_FILE))
        (directory / META_FILE).write_text(json.dumps(self._meta(), sort_keys=True))

    def _cells_arrays(self):
        cells = self.__dict__.get("_cells")
        if cells is None:  # read back from the faiss lists (an index loaded from files)
            faiss = _require_faiss()
            lists = self.index.invlists
            parts, sizes = [], []
            for cell in range(self.nlist):
                size = lists.list_size(cell)
                sizes.append(size)
                if size:
                    parts.append(faiss.rev_swig_ptr(lists.get_ids(cell), size).copy())
            order = np.concatenate(parts).astype(np.int64) if parts else np.zeros(0, dtype=np.int64)
            offsets = np.zeros(self.nlist + 1, dtype=np.int64)
            offsets[1:] = np.cumsum(sizes)
            cells = self._cells = (order, offsets)
        return cells

    @classmethod
    def load(cls, directory: str | Path) -> FaissIVFIndex:
        """The faiss index saved in ``directory``, its lists memory-mapped."""
        directory = Path(directory)
        faiss = _require_faiss()
        meta = json.loads((directory / META_FILE).read_text())
        index = faiss.read_index(str(directory / FAISS_FILE), faiss.IO_FLAG_MMAP | faiss.IO_FLAG_READ_ONLY)
        return cls(np.load(directory / "ivf.centroids.npy"), index, meta["nprobe"], meta.get("calibration"))


def _require_faiss():
    faiss = faiss_module()
    if faiss is None:
        raise ImportError(f"the faiss backend needs faiss ({INSTALL_HINT})")
    return faiss


def _save_cells(directory: Path, centroids: np.ndarray, order: np.ndarray, offsets: np.ndarray) -> None:
    np.save(directory / "ivf.centroids.npy", centroids)
    np.save(directory / "ivf.order.npy", np.asarray(order, dtype=np.int64))
    np.save(directory / "ivf.offsets.npy", np.asarray(offsets, dtype=np.int64))


def build_index(embeddings: np.ndarray, *, backend: str | None = None, **options) -> _IVF:
    """An IVF index of ``embeddings`` with ``backend`` (default :func:`default_backend`); ``options``: ``nlist``,
    ``seed``, ``doc_ids`` (each vector's document: the calibration's queries exclude their own), and
    :func:`calibrate_nprobe`'s ``target_recall``, ``k``, ``sample_queries``."""
    backend = backend or default_backend()
    if backend not in BACKENDS:
        raise ValueError(f"unknown nearest-neighbour backend {backend!r}; known: {', '.join(BACKENDS)}")
    return (FaissIVFIndex if backend == "faiss" else IVFIndex).build(embeddings, **options)


def load_index(directory: str | Path, embeddings: np.ndarray | None = None) -> _IVF:
    """The index saved in ``directory`` with the backend it was built with; a faiss index where faiss is not
    installed: its cells searched with numpy over ``embeddings`` (the same nearest candidates; a
    :class:`FaissMissingWarning`)."""
    directory = Path(directory)
    backend = json.loads((directory / META_FILE).read_text()).get("backend", "numpy")
    if backend == "faiss":
        if faiss_module() is not None:
            return FaissIVFIndex.load(directory)
        warnings.warn(f"the pool store's nearest-neighbour index in {directory} was built with faiss, which is not "
                      f"installed: searching its cells with numpy, more slowly ({INSTALL_HINT})", FaissMissingWarning,
                      stacklevel=2)
    return IVFIndex.load(directory, embeddings)


def describe(index: _IVF | None, pool_size: int | None = None) -> str:
    """One line on how candidates are searched: the backend, the cells probed and the calibrated recall, or exact
    search (no index, or a pool below :data:`ANN_MIN_POOL`)."""
    if pool_size is not None and pool_size < ANN_MIN_POOL:
        return f"exact search (a pool of {pool_size:,}; an index from {ANN_MIN_POOL:,} exemplars)"
    if index is None:
        return "exact search (no index)"
    cal = index.calibration
    if index.delta is not None:  # the recall the rule in use measured (the fixed nprobe's stays in the file)
        cal = {**cal, **{key: cal["probe"][key] for key in ("recall", "recall_lower_bound", "scanned_share", "kinds")
                         if key in cal["probe"]}}
    recall = ""
    if cal.get("k"):  # an index saved before the calibration recorded its method: recall on pool vectors only
        where = " outside their documents" if cal.get("documents_excluded") else ""
        bound = (f" (lower bound {cal['recall_lower_bound']}, target {cal['target_recall']})"
                 if "recall_lower_bound" in cal else "")
        read = f"; a query reads {cal['scanned_share']:.1%} of the pool" if "scanned_share" in cal else ""
        queries = " and ".join(cal.get("kinds") or ("pool vectors",))
        recall = f", recall@{cal['k']} {cal['recall']} on {queries}{where}{bound}{read}"
    fallback = (f" (built with {index.built_with}, which is not installed here)"
                if index.built_with != index.backend else "")
    if index.delta:  # a positive delta (0: the calibration kept fixed probing, its floor the cells)
        probe = cal.get("probe") or {}
        cells = (f"the cells within {index.delta:g} of the nearest centroid's similarity probed (at least "
                 f"{index.floor}; {probe.get('cells_mean', '?')} of {index.nlist} for the calibration's queries)")
    else:
        cells = f"{index.floor if index.delta == 0 else index.nprobe} of {index.nlist} cells probed"
    return f"IVF index, {index.backend} backend{fallback}: {cells}{recall}"


__all__ = ["ANN_MIN_POOL", "BACKENDS", "CALIBRATION_K", "CALIBRATION_KINDS", "CALIBRATION_METHOD",
           "CALIBRATION_QUERIES", "CONFIDENCE_Z", "DELTA_GRID", "FLOOR_STEPS", "PROBE_RULE", "TARGET_RECALL",
           "FaissIVFIndex", "FaissMissingWarning", "IVFIndex",
           "build_index", "calibrate_nprobe", "calibration_queries", "cell_assignment", "default_backend", "describe",
           "exact_top_k", "faiss_module", "ivf_cells", "load_index", "pool_neighbours", "probe_counts", "recall_curves"]
