"""The approximate nearest-neighbour prefilter of a large pool: its recall against exact search, measured on a
synthetic pool (clustered unit vectors: neither uniform noise nor near-duplicates), and SEER's selections on its
candidates against exact candidates (issue 25)."""

import numpy as np
import pytest

from knapsack_dspy.selection import ann_index
from knapsack_dspy.selection.ann_index import IVFIndex, exact_top_k
from knapsack_dspy.selection.exemplar_pool import ExemplarPool, SelectionRequest
from knapsack_dspy.selection.selectors.base import CandidateValues, candidates
from knapsack_dspy.selection.selectors.case_coverage import CaseCoverageSelector
from knapsack_dspy.selection.selectors.seer import KnapsackSelector

N, DIM, K = 20_000, 48, 200


def clustered(n: int, rng: np.random.Generator, centres: np.ndarray) -> np.ndarray:
    """Points around random centres with noise comparable to the spread between them (nearest-neighbour
    similarities spread over ~0.5-0.9, as real sentence embeddings; not near-duplicates)."""
    x = centres[rng.integers(len(centres), size=n)] + rng.normal(scale=0.18, size=(n, centres.shape[1]))
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


@pytest.fixture(scope="module")
def synthetic():
    rng = np.random.default_rng(7)
    centres = rng.normal(size=(300, DIM)) / np.sqrt(DIM)
    pool = clustered(N, rng, centres)
    queries = clustered(200, rng, centres)  # not pool members
    return pool, queries, IVFIndex.build(pool, seed=0)


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
    assert index.calibration["recall"] >= ann_index.TARGET_RECALL


def test_the_index_round_trips_through_files(tmp_path, synthetic):
    _pool, queries, index = synthetic
    index.save(tmp_path)
    loaded = IVFIndex.load(tmp_path)
    assert loaded.nprobe == index.nprobe and loaded.calibration == index.calibration
    assert np.array_equal(loaded.search(queries[0], K), index.search(queries[0], K))


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
    attributes = {"modality": plain.attributes["modality"],
                  "answer_type": np.where(np.arange(len(pool)) % 3 == 0, "span", "arithmetic")}
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
