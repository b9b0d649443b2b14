"""A query's similarities on the calling thread (``selection/query_similarity.py``): the same values as the BLAS
product, from an array or a memory-mapped file."""

import numpy as np

from knapsack_dspy.selection.query_similarity import query_similarities


def test_the_similarities_are_the_matrix_vector_product(tmp_path):
    rng = np.random.default_rng(0)
    vectors = rng.normal(size=(5_000, 384)).astype(np.float32)
    query = rng.normal(size=384)  # float64 in: the pool's float32 is what counts
    expected = vectors @ query.astype(np.float32)
    got = query_similarities(vectors, query)
    assert got.shape == (5_000,) and got.dtype == np.float32
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-4)
    np.save(tmp_path / "v.npy", vectors)
    mapped = np.load(tmp_path / "v.npy", mmap_mode="r")
    np.testing.assert_array_equal(query_similarities(mapped, query), got)
    np.testing.assert_array_equal(query_similarities(vectors[[3, 1, 4]], list(query)), got[[3, 1, 4]])
