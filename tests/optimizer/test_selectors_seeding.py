"""Randomised selectors (random, csp) are seeded by the query's identity, not by its embedding's last bits."""

from collections import Counter
from dataclasses import replace

import numpy as np
import pytest
from helpers import HashingEmbedder, WordCounter
from test_select_exemplars import compile_tiny, make_examples

from knapsack_dspy.selection.exemplar_pool import ExemplarPool, SelectionRequest
from knapsack_dspy.selection.selectors.registry import make_selector


def make_pool(n=40, dim=16, seed=1):
    rng = np.random.default_rng(seed)
    emb = rng.normal(size=(n, dim)).astype(np.float32)
    emb /= np.linalg.norm(emb, axis=1, keepdims=True)
    return ExemplarPool(ids=[f"p{i}" for i in range(n)], embeddings=emb, costs=np.full(n, 100.0),
                        attributes={"modality": np.array(["table", "text"] * (n // 2))})


def query(dim=16, seed=7):
    v = np.random.default_rng(seed).normal(size=dim).astype(np.float32)
    return v / np.linalg.norm(v)


@pytest.mark.parametrize("name", ["random", "csp"])
def test_selection_does_not_move_with_last_bit_noise_in_the_embedding(name):
    pool, q = make_pool(), query()
    selector = make_selector(name, max_exemplars=4).fit(pool)
    request = SelectionRequest(embedding=q, capacity=1000, key="What was the revenue in 2019?")
    noisy = replace(request, embedding=(q + np.float32(1e-7) * np.sign(q)).astype(np.float32))
    assert noisy.embedding.tobytes() != q.tobytes()
    assert selector.select(pool, request).indices == selector.select(pool, noisy).indices


def test_the_query_and_the_seed_decide_the_random_draw():
    pool, q = make_pool(), query()
    selector = make_selector("random", max_exemplars=4)
    base = SelectionRequest(embedding=q, capacity=1000, key="q1")
    picks = {selector.select(pool, replace(base, key=f"q{i}")).indices for i in range(20)}
    assert len(picks) > 15  # different questions, different draws
    seeds = {selector.select(pool, replace(base, seed=s)).indices for s in range(20)}
    assert len(seeds) > 15
    assert selector.select(pool, base).indices == selector.select(pool, replace(base)).indices
    # without a key the embedding stands in (still reproducible for identical bytes)
    keyless = replace(base, key="")
    assert selector.select(pool, keyless).indices == selector.select(pool, replace(keyless)).indices


def test_random_draws_are_uniform_over_the_eligible_pool():
    pool, q = make_pool(n=20), query()
    selector = make_selector("random", max_exemplars=2)
    counts = Counter()
    trials = 2000
    for i in range(trials):
        counts.update(selector.select(pool, SelectionRequest(embedding=q, capacity=1000, key=f"q{i}")).indices)
    expected = trials * 2 / 20
    assert set(counts) == set(range(20))
    assert all(abs(c - expected) < 0.3 * expected for c in counts.values()), counts


class JitteryEmbedder(HashingEmbedder):
    """Like a real encoder whose output depends slightly on the batch: last-bit noise on every call."""

    def __init__(self):
        super().__init__()
        self._rng = np.random.default_rng(0)

    def encode(self, texts):
        out = super().encode(texts)
        return out + self._rng.uniform(-1e-7, 1e-7, size=out.shape).astype(np.float32)


def test_select_exemplars_seeds_random_selection_with_the_question_text():
    pool = make_examples(60)
    program = compile_tiny(JitteryEmbedder(), WordCounter(), pool, budget=4000, selector="random")
    for ex in make_examples(5, seed=3, prefix="q"):
        first = program.answer.selection(base_tokens=0, question=ex.question).ids
        again = program.answer.selection(base_tokens=0, question=ex.question).ids
        # the same draw (prompt order follows similarity, whose exact ties the jitter may flip)
        assert sorted(first) == sorted(again) and len(first) == 4
