"""No selector ever returns the query itself or an exemplar from the query's own document — including the
compiled-set selectors (fixed, static, hybrid), whose sets are chosen before the query is known."""

import numpy as np
import pytest

from knapsack_dspy.selection.config import SelectionConfig
from knapsack_dspy.selection.exemplar_pool import ExemplarPool, SelectionRequest
from knapsack_dspy.selection.selectors import FIT_ON_SCORING_FUNCTION, FIT_ON_VALIDATION_QUERIES, SELECTORS


def make_pool(n=30, dim=12, seed=3, doc_ids=None):
    rng = np.random.default_rng(seed)
    emb = rng.normal(size=(n, dim)).astype(np.float32)
    emb /= np.linalg.norm(emb, axis=1, keepdims=True)
    return ExemplarPool(ids=[f"p{i}" for i in range(n)], embeddings=emb, costs=np.full(n, 100.0),
                        attributes={"modality": np.array(["table", "text", "hybrid"] * (n // 3)),
                                    "answer_type": np.array(["span", "arithmetic"] * (n // 2)),
                                    "kind": np.array(["span", "arithmetic"] * (n // 2))},
                        doc_ids=[f"d{i // 3}" for i in range(n)] if doc_ids is None else doc_ids)


def fitted(name, pool):
    selector = SelectionConfig(selector=name, max_exemplars=4, attributes=("modality",)).build_selector()
    if selector.fit_on == FIT_ON_VALIDATION_QUERIES:
        selector.fit(pool, val_embeddings=pool.embeddings, capacity=1000.0)
    elif selector.fit_on == FIT_ON_SCORING_FUNCTION:
        selector.fit(pool, score_fn=lambda indices: -sum(indices), capacity=1000.0)
    else:
        selector.fit(pool)
    return selector


@pytest.mark.parametrize("name", sorted(SELECTORS))
def test_no_selector_returns_the_query_or_its_document(name):
    pool = make_pool()
    selector = fitted(name, pool)
    for i, pid in enumerate(pool.ids):  # every pool record as a query, as compile's validation queries are
        request = SelectionRequest(embedding=pool.embeddings[i], capacity=1000.0, exclude_ids=frozenset({pid}),
                                   doc_id=str(pool.doc_ids[i]), key=pid,
                                   target_attributes={"modality": "table", "answer_type": "span"})
        chosen = selector.select(pool, request).indices
        assert i not in chosen, (name, pid)
        assert all(pool.doc_ids[j] != pool.doc_ids[i] for j in chosen), (name, pid, chosen)


@pytest.mark.parametrize("name", ["kate", "random", "seer"])
def test_an_empty_document_id_excludes_nothing(name):
    pool = make_pool(doc_ids=[""] * 30)  # no document ids known
    selector = fitted(name, pool)
    request = SelectionRequest(embedding=pool.embeddings[0], capacity=1000.0, doc_id="", key="q",
                               target_attributes={"modality": "table", "answer_type": "span"})
    assert len(selector.select(pool, request).indices) == 4


def test_a_documents_rows_are_the_rows_holding_its_id():
    doc_ids = [f"d{(i * 7) % 5}" for i in range(30)]  # documents interleaved in the pool
    pool = make_pool(doc_ids=doc_ids)
    for doc in [*sorted(set(doc_ids)), "d9", ""]:
        expected = [i for i, d in enumerate(doc_ids) if d == doc]
        assert pool.rows_of_doc(doc).tolist() == expected
    assert make_pool(doc_ids=None).rows_of_doc("d0").tolist() == [0, 1, 2]
