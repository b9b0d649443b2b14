"""The approximate nearest-neighbour prefilter of a large pool, with each backend (faiss's IVF when installed, the
numpy IVF): its recall against exact search, measured on a synthetic pool (clustered unit vectors: neither uniform
noise nor near-duplicates), the index saved and loaded (alone and in a pool store) giving the same candidates, and
SEER's selections on its candidates against exact candidates (issue 25). The faiss tests skip without faiss
(``make test`` installs the ``ann`` extra, so CI runs them)."""

import json
import warnings

import numpy as np
import pytest

from knapsack_dspy.selection import ann_index
from knapsack_dspy.selection.ann_index import FaissIVFIndex, IVFIndex, build_index, exact_top_k, load_index
from knapsack_dspy.selection.exemplar_pool import ExemplarPool, SelectionRequest
from knapsack_dspy.selection.pool_store import PoolRecord, write_store
from knapsack_dspy.selection.selectors.base import CandidateValues, candidates
from knapsack_dspy.selection.selectors.case_coverage import CaseCoverageSelector
from knapsack_dspy.selection.selectors.seer import KnapsackSelector

N, DIM, K = 20_000, 48, 200
HAS_FAISS = ann_index.faiss_module() is not None
needs_faiss = pytest.mark.skipif(not HAS_FAISS, reason=f"faiss is not installed ({ann_index.INSTALL_HINT})")
BACKEND_PARAMS = [pytest.param("faiss", marks=needs_faiss), "numpy"]


def clustered(n: int, rng: np.random.Generator, centres: np.ndarray) -> np.ndarray:
    """Points around random centres with noise comparable to the spread between them (nearest-neighbour
    similarities spread over ~0.5-0.9, as real sentence embeddings; not near-duplicates)."""
    x = centres[rng.integers(len(centres), size=n)] + rng.normal(scale=0.18, size=(n, centres.shape[1]))
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(7)
    centres = rng.normal(size=(300, DIM)) / np.sqrt(DIM)
    return clustered(N, rng, centres), clustered(200, rng, centres)  # the queries are not pool members


_built: dict = {}


@pytest.fixture(scope="module", params=BACKEND_PARAMS)
def synthetic(request, data):
    """(pool, queries, index) with each backend (an index built once per backend)."""
    pool, queries = data
    if request.param not in _built:
        _built[request.param] = build_index(pool, backend=request.param, seed=0)
    return pool, queries, _built[request.param]


def test_recall_at_k_against_exact_search_is_at_least_095(synthetic):
    pool, queries, index = synthetic
    nn = np.sort(pool[:500] @ pool.T, axis=1)[:, -2]  # each vector's nearest other vector
    assert 0.4 < np.median(nn) < 0.95  # the pool is not a pool of near-duplicates
    recalls = []
    for q in queries:
        exact = set(exact_top_k(pool, q, K).tolist())
        found = index.search(q, K)
        assert len(found) == K and len(set(found.tolist())) == K
        recalls.append(len(exact & set(found.tolist())) / K)
    assert np.mean(recalls) >= 0.95, np.mean(recalls)
    assert index.nprobe < index.nlist  # it does not scan everything
    cal = index.calibration
    assert cal["method"] == ann_index.CALIBRATION_METHOD and cal["target_recall"] == ann_index.TARGET_RECALL == 0.97
    assert cal["recall"] >= cal["recall_lower_bound"] >= ann_index.TARGET_RECALL


def test_the_calibration_measures_a_search_s_recall_for_every_nprobe_without_searching(data):
    """``recall_curves`` counts, per query, the true neighbours in its p nearest cells: what a search of those
    cells returns (for both backends), so nprobe is read off the curves, not found by searching. The
    calibration's queries: pool vectors and midpoints of two, each without the documents it was made of."""
    pool, _queries = data
    docs = np.arange(len(pool)) // 6
    centroids, order, offsets, _rng = ann_index.ivf_cells(pool)
    queries, owners, kinds = ann_index.calibration_queries(pool, np.random.default_rng(5), 40)
    assert (kinds == 0).sum() == (kinds == 1).sum() == 20
    assert np.array_equal(queries[kinds == 0], pool[owners[kinds == 0, 0]])
    made = pool[owners[kinds == 1, 0]] + pool[owners[kinds == 1, 1]]
    assert np.allclose(queries[kinds == 1], made / np.linalg.norm(made, axis=1, keepdims=True), atol=1e-6)
    truths = ann_index.pool_neighbours(pool, queries, owners, K, docs)
    for query, own, truth in zip(queries, owners, truths, strict=True):  # exact search, own documents left out
        sims = np.where(np.isin(docs, docs[own]), -np.inf, pool @ query)
        assert set(truth.tolist()) == set(np.argsort(-sims)[:K].tolist())
    curves = ann_index.recall_curves(centroids, ann_index.cell_assignment(order, offsets), queries, truths)
    index = IVFIndex(centroids, order, offsets, pool[order], nprobe=1)
    for nprobe in (1, 4, 16, 64):
        searched = [len(set(index.search(query, 2 * K, nprobe=nprobe).tolist()) & set(truth.tolist())) / K
                    for query, truth in zip(queries, truths, strict=True)]
        assert np.allclose(curves[:, nprobe - 1], searched)
    assert np.all(np.diff(curves, axis=1) >= 0) and np.allclose(curves[:, -1], 1.0)


def lower_bounds(pool, centroids, order, offsets, queries, owners, docs):
    curves = ann_index.recall_curves(centroids, ann_index.cell_assignment(order, offsets), queries,
                                     ann_index.pool_neighbours(pool, queries, owners, K, docs))
    return curves.mean(axis=0) - ann_index.CONFIDENCE_Z * curves.std(axis=0, ddof=1) / np.sqrt(len(curves))


def test_nprobe_is_the_fewest_cells_whose_lower_confidence_bound_reaches_the_target_on_both_kinds(data):
    pool, _queries = data
    docs = np.arange(len(pool)) // 6
    centroids, order, offsets, _rng = ann_index.ivf_cells(pool)
    nprobe, cal = ann_index.calibrate_nprobe(pool, centroids, order, offsets, np.random.default_rng(3),
                                             doc_ids=docs, sample_queries=600)
    queries, owners, kinds = ann_index.calibration_queries(pool, np.random.default_rng(3), 600)  # the same draw
    fewest = {}
    for kind, name in enumerate(ann_index.CALIBRATION_KINDS):
        bound = lower_bounds(pool, centroids, order, offsets, queries[kinds == kind], owners[kinds == kind], docs)
        fewest[name] = int(np.flatnonzero(bound >= 0.97)[0]) + 1
        assert bound[fewest[name] - 1] >= 0.97 > bound[fewest[name] - 2]  # one cell fewer does not reach it
        assert cal["kinds"][name]["nprobe"] == fewest[name] and cal["kinds"][name]["queries"] == 300
        assert cal["kinds"][name]["recall_lower_bound"] == round(float(bound[nprobe - 1]), 4)
    assert nprobe == max(fewest.values()) == cal["nprobe"]  # the harder kind decides
    assert cal["recall_lower_bound"] == min(m["recall_lower_bound"] for m in cal["kinds"].values()) >= 0.97
    assert cal["queries"] == 600 and cal["documents_excluded"]
    sizes = np.diff(offsets)  # the share of the pool a query reads: every centroid, the probed cells' members
    read = [len(centroids) + sizes[np.argsort(-(centroids @ q))[:nprobe]].sum() for q in queries]
    assert cal["scanned_share"] == pytest.approx(np.mean(read) / len(pool), abs=1e-4)
    eager, _ = ann_index.calibrate_nprobe(pool, centroids, order, offsets, np.random.default_rng(3),
                                          doc_ids=docs, sample_queries=600, target_recall=0.99, z=0.0)
    assert eager > nprobe  # the former target (a mean of 0.99) reads more of the pool


def test_midpoints_calibrate_a_pool_of_tight_groups_for_queries_between_them():
    """A pool whose vectors come in tight groups bigger than k (near-duplicates of a few hundred questions, as a
    synthetic pool grown far from its real one): a pool vector finds its k nearest in its own group, one or two
    cells; a query between groups needs many more. Pool vectors alone calibrate too few cells for such
    queries; the midpoints of two pool vectors are such queries."""
    rng = np.random.default_rng(11)
    k, groups, per_group = 20, 300, 40
    centres = rng.normal(size=(groups, DIM))
    pool = centres.repeat(per_group, axis=0) + rng.normal(scale=0.25, size=(groups * per_group, DIM))
    pool = (pool / np.linalg.norm(pool, axis=1, keepdims=True)).astype(np.float32)
    between = centres[rng.integers(groups, size=200)] + centres[rng.integers(groups, size=200)]  # unseen queries
    between = (between / np.linalg.norm(between, axis=1, keepdims=True)).astype(np.float32)
    centroids, order, offsets, _rng = ann_index.ivf_cells(pool)
    nprobe, cal = ann_index.calibrate_nprobe(pool, centroids, order, offsets, np.random.default_rng(0), k=k)
    alone = cal["kinds"]["pool vectors"]["nprobe"]
    assert cal["kinds"]["midpoints"]["nprobe"] == nprobe > alone

    def recall(cells):
        index = IVFIndex(centroids, order, offsets, pool[order], nprobe=cells)
        return np.mean([len(set(exact_top_k(pool, q, k).tolist()) & set(index.search(q, k).tolist())) / k
                        for q in between])

    assert recall(nprobe) >= 0.95 > recall(alone)


def test_vectors_scanned_counts_the_centroids_and_the_probed_cells(synthetic):
    pool, queries, index = synthetic
    sizes = index.cell_sizes()
    assert sizes.sum() == len(pool) and len(sizes) == index.nlist
    for q in queries[:5]:
        cell_sims = index.centroids @ q
        count = int(ann_index.probe_counts(cell_sims[None, :], index.delta, index.floor)[0])
        probed = np.argsort(-cell_sims)[:count]  # the calibrated rule's cells
        assert set(index.probe_cells(q).tolist()) == set(probed.tolist())
        assert index.vectors_scanned(q) == index.nlist + sizes[probed].sum() < len(pool)
        fixed = np.argsort(-cell_sims)[:index.nprobe]  # an explicit nprobe: that many nearest cells
        assert index.vectors_scanned(q, nprobe=index.nprobe) == index.nlist + sizes[fixed].sum()
        assert index.vectors_scanned(q, nprobe=index.nlist) == index.nlist + len(pool)


def test_the_probe_rule_probes_the_cells_within_delta_and_gives_far_queries_more(data):
    """The calibrated rule: the cells whose centroid is within delta of the nearest one's similarity, at least a
    floor; (floor, delta) the pair reaching the target on both kinds of calibration query that reads the fewest
    vectors -- for its floor the smallest delta of the grid, and never more than the fixed nprobe reads. A query
    far from the pool (a pool vector with much noise added) sees flatter centroid similarities and, for a given
    delta, probes more cells than one near it."""
    pool, _queries = data
    docs = np.arange(len(pool)) // 6
    centroids, order, offsets, _rng = ann_index.ivf_cells(pool)
    nprobe, cal = ann_index.calibrate_nprobe(pool, centroids, order, offsets, np.random.default_rng(3),
                                             doc_ids=docs, sample_queries=600)
    rule = cal["probe"]
    delta, floor = rule["delta"], rule["floor"]
    assert delta in ann_index.DELTA_GRID and 1 <= floor <= len(centroids)
    queries, owners, kinds = ann_index.calibration_queries(pool, np.random.default_rng(3), 600)  # the same draw
    curves = ann_index.recall_curves(centroids, ann_index.cell_assignment(order, offsets), queries,
                                     ann_index.pool_neighbours(pool, queries, owners, K, docs))
    sizes = np.diff(offsets)

    def measured(d, f):
        counts = ann_index.probe_counts(queries @ centroids.T, d, f)
        recall = curves[np.arange(len(queries)), counts - 1]
        bounds = [recall[kinds == kind].mean() - ann_index.CONFIDENCE_Z * recall[kinds == kind].std(ddof=1)
                  / np.sqrt((kinds == kind).sum()) for kind in (0, 1)]
        read = np.mean([sizes[np.argsort(-(centroids @ q))[:c]].sum() for q, c in zip(queries, counts, strict=True)])
        return min(bounds), read

    bound, read = measured(delta, floor)
    assert bound >= 0.97 and rule["recall_lower_bound"] == pytest.approx(bound, abs=1e-4)
    assert rule["vectors_mean"] == pytest.approx(read, abs=0.06)
    if delta > 0:
        assert measured(round(delta - 0.005, 3), floor)[0] < 0.97  # for its floor, the smallest delta
    fixed_bound, fixed_read = measured(0.0, nprobe)  # the fixed rule is one of the pairs: never read less
    assert fixed_bound >= 0.97 and read <= fixed_read + 1e-6
    assert cal["probe"]["scanned_share"] <= cal["scanned_share"] + 1e-4
    rng = np.random.default_rng(9)
    base = pool[rng.integers(len(pool), size=100)]
    near, far = (base + rng.normal(scale=scale, size=base.shape) for scale in (0.02, 0.6))
    near, far = (x / np.linalg.norm(x, axis=1, keepdims=True) for x in (near, far))
    for d in (0.05, 0.1, 0.2):  # the rule itself (whatever pair this pool calibrated)
        assert (ann_index.probe_counts(far @ centroids.T, d, 1).mean()
                > 1.5 * ann_index.probe_counts(near @ centroids.T, d, 1).mean())


def test_the_index_round_trips_through_files(tmp_path, synthetic):
    _pool, queries, index = synthetic
    index.save(tmp_path)
    loaded = load_index(tmp_path)
    assert type(loaded) is type(index) and loaded.backend == index.backend
    assert loaded.nprobe == index.nprobe and loaded.calibration == index.calibration
    for q in queries[:20]:
        assert np.array_equal(loaded.search(q, 2 * K), index.search(q, 2 * K))


def test_an_index_saved_before_the_calibration_recorded_its_method_loads(tmp_path, synthetic, monkeypatch):
    """An older store's ``ivf.json``: nprobe calibrated to recall 0.99 on pool vectors, no method recorded."""
    pool, queries, index = synthetic
    index.save(tmp_path)
    meta = json.loads((tmp_path / ann_index.META_FILE).read_text())
    meta["nprobe"] = 150
    meta["calibration"] = {"k": K, "queries": 64, "target_recall": 0.99, "recall": 0.9902, "nprobe": 150,
                           "nlist": index.nlist}
    (tmp_path / ann_index.META_FILE).write_text(json.dumps(meta))
    old = load_index(tmp_path, pool)
    assert old.nprobe == 150 and old.calibration == meta["calibration"]
    assert ann_index.describe(old, ann_index.ANN_MIN_POOL).endswith(
        f"150 of {index.nlist} cells probed, recall@200 0.9902 on pool vectors")
    monkeypatch.setattr(ann_index, "ANN_MIN_POOL", 1_000)
    idx, _ = candidates(make_pool(pool, old), SelectionRequest(queries[0], capacity=600), K)
    assert idx.size == K  # answered by the index
    assert old.delta is None  # no probe rule recorded: its fixed cells
    assert all(old.vectors_scanned(q) == old.vectors_scanned(q, nprobe=150) for q in queries[:5])
    assert "on pool vectors and midpoints (lower bound " in ann_index.describe(index, len(pool))  # a new index


@needs_faiss
def test_both_backends_search_the_same_cells_and_find_the_same_candidates(data, monkeypatch):
    pool, queries = data
    faiss_index, numpy_index = build_index(pool, backend="faiss"), build_index(pool, backend="numpy")
    assert np.array_equal(faiss_index.centroids, numpy_index.centroids)
    assert faiss_index.calibration == numpy_index.calibration
    monkeypatch.setattr(ann_index, "ANN_MIN_POOL", 1_000)
    for q in queries[:20]:
        # faiss ranks by 8-bit codes, numpy by the vectors: their 2K nearest differ only at the edge ...
        by_codes, by_vectors = set(faiss_index.search(q, 2 * K).tolist()), set(numpy_index.search(q, 2 * K).tolist())
        assert len(by_codes & by_vectors) >= 0.97 * 2 * K
        # ... and the K nearest candidates, kept by exact similarity, are the same (the cheap reserve comes from
        # the rest each fetched, so it can differ at that edge)
        request = SelectionRequest(q, capacity=600)
        faiss_idx, faiss_sims = candidates(make_pool(pool, faiss_index), request, K)
        numpy_idx, numpy_sims = candidates(make_pool(pool, numpy_index), request, K)
        assert faiss_idx.size == numpy_idx.size == K and np.array_equal(faiss_idx, numpy_idx)
        # with SEER's reserve of cheap ones beside them: the same K nearest (the reserve comes from the rest each
        # index fetched, so it can differ at that edge)
        faiss_idx, faiss_sims = candidates(make_pool(pool, faiss_index), request, K, reserve=ann_index.CHEAP_RESERVE)
        numpy_idx, numpy_sims = candidates(make_pool(pool, numpy_index), request, K, reserve=ann_index.CHEAP_RESERVE)
        assert faiss_idx.size == numpy_idx.size == K + ann_index.CHEAP_RESERVE
        assert np.array_equal(nearest(faiss_idx, faiss_sims), nearest(numpy_idx, numpy_sims))


@needs_faiss
def test_faiss_scans_exactly_the_cells_of_the_probe_rule_and_no_others(synthetic):
    """The faiss backend hands the rule's cells to faiss (no second centroid search): its hits are those of faiss's
    own search over the same number of nearest cells, and a hit outside the rule's cells is impossible."""
    _pool, queries, index = synthetic
    if index.backend != "faiss":
        pytest.skip("faiss backend only")
    faiss = ann_index.faiss_module()
    order, offsets = index._cells_arrays()
    cell_of = ann_index.cell_assignment(order, offsets)
    for q, nprobe in zip(queries[:30], [None] * 15 + [3, 7, 1, 40, 9] * 3, strict=True):
        cells = index.probe_cells(q, nprobe)
        found = index.search(q, 2 * K, nprobe)
        _, own = index.index.search(np.asarray(q, dtype=np.float32).reshape(1, -1), 2 * K,
                                    params=faiss.SearchParametersIVF(nprobe=len(cells)))
        assert np.array_equal(found, own[0][own[0] >= 0])
        assert set(cell_of[found].tolist()) <= set(cells.tolist())
    # the cells faiss scans are the rule's, whatever they are: given the farthest cells, every hit is in them
    # (faiss's own search would scan the nearest)
    q = queries[0]
    farthest = np.argsort(index.centroids @ np.asarray(q, dtype=np.float32))[:5]
    sims = (index.centroids @ np.asarray(q, dtype=np.float32))[farthest]
    index._probe = lambda query, nprobe=None: (farthest, sims)
    try:
        found = index.search(q, 50)
    finally:
        del index._probe
    assert found.size and set(cell_of[found].tolist()) <= set(farthest.tolist())


def nearest(idx: np.ndarray, sims, k: int = K) -> np.ndarray:
    """The ``k`` most similar of a prefilter's candidates (without the cheap reserve), sorted by pool index."""
    return np.sort(idx[np.argsort(-np.asarray(sims[idx]), kind="stable")[:k]])


def store_records(n: int) -> list[PoolRecord]:
    return [PoolRecord(f"e{i}", {"question": f"q{i}"}, f"doc{i // 6}", f"q{i}") for i in range(n)]


@needs_faiss
def test_a_store_built_with_faiss_loads_it_memory_mapped_and_without_faiss_searches_its_cells(tmp_path, data,
                                                                                          monkeypatch):
    pool, queries = data
    monkeypatch.setattr(ann_index, "ANN_MIN_POOL", 1_000)  # the synthetic pool counts as large
    store = write_store(tmp_path, store_records(len(pool)), pool, np.full(len(pool), 100.0), embedder="e",
                        prompt_format="p", index=True)
    assert store.manifest["index_backend"] == "faiss" and (store.path / ann_index.FAISS_FILE).is_file()
    with_faiss = store.index()
    assert isinstance(with_faiss, FaissIVFIndex)
    assert "faiss backend" in ann_index.describe(with_faiss, len(store))
    def candidates_by(index):  # the K kept by exact similarity (the 2K asked of each index differ at the edge)
        return [nearest(*candidates(make_pool(pool, index), SelectionRequest(q, capacity=600), K))
                for q in queries[:20]]

    expected = candidates_by(with_faiss)
    monkeypatch.setattr(ann_index, "faiss_module", lambda: None)  # a machine without faiss
    with pytest.warns(ann_index.FaissMissingWarning, match="pip install"):
        without = store.index()
    assert isinstance(without, IVFIndex) and without.nprobe == with_faiss.nprobe
    assert "built with faiss, which is not installed here" in ann_index.describe(without, len(store))
    for found, by_numpy in zip(expected, candidates_by(without), strict=True):
        assert found.size == K and np.array_equal(found, by_numpy)


def test_without_faiss_a_new_index_is_built_with_numpy(tmp_path, data, monkeypatch):
    pool, _queries = data
    monkeypatch.setattr(ann_index, "faiss_module", lambda: None)
    assert ann_index.default_backend() == "numpy"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        store = write_store(tmp_path, store_records(2_000), pool[:2_000], np.full(2_000, 100.0), embedder="e",
                            prompt_format="p", index=True)
    assert store.manifest["index_backend"] == "numpy" and isinstance(store.index(), IVFIndex)
    assert store.index().calibration["documents_excluded"]  # the records' documents: each query leaves its own out
    assert not (store.path / ann_index.FAISS_FILE).exists()
    with pytest.raises(ImportError, match="knapsack-dspy\\[ann\\]"):
        build_index(pool[:2_000], backend="faiss")


def make_pool(pool: np.ndarray, index=None) -> ExemplarPool:
    rng = np.random.default_rng(1)
    n = len(pool)
    return ExemplarPool([f"e{i}" for i in range(n)], pool, rng.integers(40, 300, size=n).astype(float),
                        {"modality": np.where(rng.random(n) < 0.5, "table", "text")},
                        np.asarray([f"doc{i // 6}" for i in range(n)]), index=index)


def test_seer_on_prefiltered_candidates_keeps_the_exact_objective(synthetic, monkeypatch):
    pool, queries, index = synthetic
    monkeypatch.setattr(ann_index, "ANN_MIN_POOL", 1_000)  # the synthetic pool counts as large
    exact_pool, ann_pool = make_pool(pool), make_pool(pool, index)
    seer = KnapsackSelector(max_exemplars=4)
    ratios = []
    for k, q in enumerate(queries[:40]):
        request = SelectionRequest(q, capacity=600, target_attributes={"modality": "table"},
                                   exclude_ids=frozenset({f"e{k}"}), doc_id=f"doc{k * 11}")
        idx, sims = candidates(ann_pool, request, K)
        assert isinstance(sims, CandidateValues) and idx.size == K
        assert f"e{k}" not in {ann_pool.ids[i] for i in idx}
        assert not (ann_pool.doc_ids[idx] == f"doc{k * 11}").any()
        exact = seer.select(exact_pool, request)
        approx = seer.select(ann_pool, request)
        objective = pool @ q
        ratios.append(objective[list(approx.indices)].sum() / objective[list(exact.indices)].sum())
        assert approx.within_budget
    assert np.mean(ratios) >= 0.99 and np.percentile(ratios, 5) >= 0.95, ratios


class WholeColumn(np.ndarray):
    """A pool column that fails any computation over the whole of it (a per-query pass over the pool); indexing
    it gives a plain array of the rows asked for."""

    def __getitem__(self, key):
        return np.asarray(np.ndarray.__getitem__(self.view(np.ndarray), key))

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        raise AssertionError(f"{ufunc.__name__}.{method} over a whole pool column during a query")

    def __array_function__(self, func, types, args, kwargs):
        raise AssertionError(f"np.{func.__name__} over a whole pool column during a query")


def guard_columns(pool: ExemplarPool) -> None:
    for name in ("embeddings", "costs", "groups", "doc_ids"):
        setattr(pool, name, getattr(pool, name).view(WholeColumn))
    pool.attributes = {name: values.view(WholeColumn) for name, values in pool.attributes.items()}


@pytest.mark.parametrize("selector", [KnapsackSelector(max_exemplars=4), CaseCoverageSelector(max_exemplars=4)],
                         ids=["seer", "case_coverage"])
def test_a_query_on_an_indexed_pool_reads_only_its_candidates(synthetic, monkeypatch, selector):
    """Selection time independent of the pool's size: past the first query (a selector's own per-pool caches),
    a query on an indexed pool computes nothing over a whole pool column (no mask, no scan, no copy), and
    selects what it selects on the unguarded pool."""
    pool, queries, index = synthetic
    monkeypatch.setattr(ann_index, "ANN_MIN_POOL", 1_000)
    plain, guarded = make_pool(pool, index), make_pool(pool, index)
    answer_types = np.where(np.arange(len(pool)) % 3 == 0, "span", "arithmetic")
    attributes = {"modality": plain.attributes["modality"], "answer_type": answer_types,
                  "kind": np.char.add("answer_type:", answer_types)}
    plain.attributes = guarded.attributes = attributes
    selector.fit(plain)
    requests = [SelectionRequest(q, capacity=600, target_attributes={"modality": "table"},
                                 exclude_ids=frozenset({f"e{k}"}), doc_id=f"doc{k * 11}")
                for k, q in enumerate(queries[:6])]
    selector.select(guarded, requests[0])
    guard_columns(guarded)
    for request in requests[1:]:
        assert selector.select(guarded, request) == selector.select(plain, request)


def test_a_small_pool_is_searched_exactly_even_with_an_index(synthetic):
    pool, queries, index = synthetic
    assert len(pool) < ann_index.ANN_MIN_POOL
    request = SelectionRequest(queries[0], capacity=600)
    idx, sims = candidates(make_pool(pool, index), request, K)
    exact_idx, _exact_sims = candidates(make_pool(pool), request, K)
    assert np.array_equal(idx, exact_idx) and isinstance(sims, np.ndarray)


def test_a_candidate_count_beyond_the_calibrated_k_is_searched_exactly(synthetic, monkeypatch):
    pool, queries, index = synthetic
    monkeypatch.setattr(ann_index, "ANN_MIN_POOL", 1_000)
    assert index.calibration["k"] == K
    request = SelectionRequest(queries[1], capacity=600)
    _, within = candidates(make_pool(pool, index), request, K)
    idx, beyond = candidates(make_pool(pool, index), request, 3 * K)  # recall measured for K only: exact
    assert isinstance(within, CandidateValues) and isinstance(beyond, np.ndarray)
    assert np.array_equal(idx, candidates(make_pool(pool), request, 3 * K)[0])


class RankedIndex:
    """An index that answers with a fixed ranking (the true one, less the exemplars it is told to miss)."""

    def __init__(self, ranking, missed=()):
        self.ranking = [int(i) for i in ranking if int(i) not in set(missed)]
        self.calibration = {"k": 50}

    def search(self, query, k, nprobe=None):
        return np.asarray(self.ranking[:k], dtype=np.int64)


def test_a_cheap_exemplar_the_index_misses_is_replaced_from_the_reserve(monkeypatch):
    """The true 50 nearest hold one cheap exemplar (cost 50; the others 100): with 350 tokens SEER fits it and
    three more. An index that misses it would leave room for three; the reserve (the cheapest of the other fetched
    candidates) brings the one cheap exemplar just past the 50 nearest, and four fit again."""
    monkeypatch.setattr(ann_index, "ANN_MIN_POOL", 100)
    rng = np.random.default_rng(3)
    pool = rng.normal(size=(400, 16)).astype(np.float32)
    pool /= np.linalg.norm(pool, axis=1, keepdims=True)
    query = pool[0] + 0.1 * rng.normal(size=16).astype(np.float32)
    query /= np.linalg.norm(query)
    ranking = np.argsort(-(pool @ query), kind="stable")
    costs = np.full(400, 100.0)
    cheap_near, cheap_past = int(ranking[30]), int(ranking[60])
    costs[[cheap_near, cheap_past]] = 50.0

    def make(index=None):
        return ExemplarPool([f"e{i}" for i in range(400)], pool, costs, {"modality": np.full(400, "table")},
                            index=index)

    request = SelectionRequest(query, capacity=350, target_attributes={"modality": "table"})
    seer = KnapsackSelector(max_exemplars=4, knn_k=50)
    exact = seer.select(make(), request)
    assert cheap_near in exact.indices and len(exact.indices) == 4
    missing = make(RankedIndex(ranking, missed=[cheap_near]))
    idx, _ = candidates(missing, request, 50, reserve=ann_index.CHEAP_RESERVE)
    assert candidates(missing, request, 50)[0].size == 50  # no reserve asked: the 50 nearest alone
    others = [i for i in ranking if i != cheap_near][50:100]  # fetched (2 x 50) but not among the 50 nearest
    reserve = sorted(others, key=lambda i: (costs[i], others.index(i)))[:ann_index.CHEAP_RESERVE]
    assert sorted(idx.tolist()) == sorted([i for i in ranking if i != cheap_near][:50] + reserve)
    assert cheap_past in idx
    approx = seer.select(missing, request)
    assert len(approx.indices) == 4 and cheap_past in approx.indices
    seer.cheap_reserve = 0  # without the reserve: one exemplar fewer
    assert len(seer.select(missing, request).indices) == 3
