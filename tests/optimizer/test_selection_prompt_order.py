"""Prompt order for prefix reuse: a static set and a hybrid core open every prompt in one fixed order; per-query
exemplars follow (least similar first, or one canonical order); an exemplar whose group an earlier one showed
refers to it, wherever it stands."""

import numpy as np
import pytest
from helpers import HashingEmbedder, WordCounter
from test_select_exemplars import compile_tiny, make_examples

from knapsack_dspy.selection import SelectionConfig
from knapsack_dspy.selection.config import SelectionConfigError
from knapsack_dspy.selection.exemplar_pool import (
    ExemplarPool,
    SelectionRequest,
    canonical_keys,
    in_canonical_order,
    make_selection,
)
from knapsack_dspy.selection.selectors import make_selector

IDS = ["a", "b", "c", "d", "e"]
GROUPS = np.array([0, 0, 1, -1, 1])


def grouped_pool():
    return ExemplarPool(IDS, np.eye(5, dtype=np.float32), np.full(5, 100.0), groups=GROUPS,
                        group_costs=np.array([300.0, 200.0]))


def test_a_prefix_opens_the_prompt_in_its_order_and_the_rest_follows_least_similar_first():
    pool = grouped_pool()
    sims = np.array([0.1, 0.2, 0.9, 0.5, 0.3])
    selection = make_selection(pool, SelectionRequest(embedding=np.ones(5), capacity=1e9), [3, 4], sims,
                               prefix=[2, 0])
    assert selection.indices == (2, 0, 4, 3) and selection.shared_prefix == 2
    # e (group 1) comes after c (group 1) showed the shared part, though not right after it: it refers to it
    assert selection.shared == (False, False, True, False)
    assert selection.total_cost == pool.cost_of([0, 2, 3, 4])
    assert selection.as_dict(pool)["shared_prefix"] == 2


def _static_selection():
    """(pool, the compiled static SelectExemplars, its fixed ids in their prompt order)."""
    pool = make_examples(40)
    program = compile_tiny(_embedder(), _counter(), pool, valset=make_examples(12, seed=2, prefix="v"),
                           mode="static", budget=4000)
    select = program.answer.selection
    return pool, select, select.selector_state["fixed_ids"]


def test_static_mode_sends_one_set_in_one_order_whatever_the_query():
    _, select, fixed = _static_selection()
    assert len(fixed) >= 2
    orders = set()
    for query in make_examples(12, seed=5, prefix="q"):
        out = select(base_tokens=10, question=query.question)
        assert out.selection["shared_prefix"] == len(out.ids)
        orders.add(tuple(out.ids))
    assert orders == {tuple(fixed)}  # every query: the same exemplars in the same order


def test_static_mode_keeps_the_order_when_a_query_loses_an_exemplar_of_its_own_document():
    pool, select, fixed = _static_selection()
    own = next(ex for ex in pool if ex.id == fixed[0])
    out = select(base_tokens=10, question="a question", doc_id=own.doc_id)
    assert fixed[0] not in out.ids
    assert list(out.ids) == [i for i in fixed if i in out.ids]


def test_hybrid_mode_puts_its_core_first_in_one_order_and_the_per_query_exemplars_after():
    pool = make_examples(40)
    program = compile_tiny(_embedder(), _counter(), pool, valset=make_examples(12, seed=2, prefix="v"),
                           mode="hybrid", budget=4000, core_size=2)
    select = program.answer.selection
    core = select.selector_state["fixed_ids"]
    assert len(core) == 2
    tails = set()
    for query in make_examples(8, seed=6, prefix="q"):
        out = select(base_tokens=10, question=query.question)
        assert list(out.ids[:2]) == core and out.selection["shared_prefix"] == 2
        tails.add(tuple(out.ids[2:]))
        pool_obj = select.pool()
        sims = pool_obj.similarities(_embedder().encode([query.question])[0])
        tail_sims = [sims[pool_obj.index_of([i])[0]] for i in out.ids[2:]]
        assert tail_sims == sorted(tail_sims)  # the most similar next to the question
    assert len(tails) > 1  # the rest really is per query


def test_fixed_set_selector_keeps_its_drawn_order_for_every_query():
    pool = ExemplarPool([f"x{i}" for i in range(20)], np.random.default_rng(0).normal(size=(20, 8)),
                        np.full(20, 10.0))
    selector = make_selector("fixed", max_exemplars=4, seed=3).fit(pool)
    rng = np.random.default_rng(1)
    orders = {selector.select(pool, SelectionRequest(embedding=rng.normal(size=8), capacity=1e9)).indices
              for _ in range(10)}
    assert orders == {tuple(pool.index_of(selector.fixed_ids_))}


def test_canonical_order_shows_shared_exemplars_in_the_same_order_for_every_query():
    rng = np.random.default_rng(0)
    embeddings = rng.normal(size=(30, 16))
    embeddings /= np.linalg.norm(embeddings, axis=1, keepdims=True)
    pool = ExemplarPool([f"x{i}" for i in range(30)], embeddings, np.full(30, 10.0))
    keys = canonical_keys(pool)
    assert keys.shape == (30,)
    selector = make_selector("kate", max_exemplars=5)
    for _ in range(20):
        selection = selector.select(pool, SelectionRequest(embedding=rng.normal(size=16), capacity=1e9))
        canonical = in_canonical_order(pool, selection, keys)
        assert sorted(canonical.indices) == sorted(selection.indices)
        assert [keys[i] for i in canonical.indices] == sorted(keys[i] for i in canonical.indices)
        assert canonical.total_cost == selection.total_cost


def test_canonical_order_keeps_groups_together_and_leaves_the_prefix_alone():
    pool = grouped_pool()
    keys = np.array([5.0, 1.0, 3.0, 2.0, 4.0])
    selection = make_selection(pool, SelectionRequest(embedding=np.ones(5), capacity=1e9), [0, 2, 3, 4],
                               np.zeros(5), prefix=[1])
    reordered = in_canonical_order(pool, selection, keys)
    assert reordered.indices[0] == 1  # the prefix stays first
    # after it: d (2.0), then group 1 placed by c (3.0): c, e; a (5.0) refers to b's table shown before it
    assert reordered.indices == (1, 3, 2, 4, 0)
    assert reordered.shared == (False, False, False, True, True)


def test_demo_order_setting_reorders_per_query_selections():
    pool = make_examples(40)
    similarity = compile_tiny(_embedder(), _counter(), pool, budget=4000, selector="kate")
    canonical = compile_tiny(_embedder(), _counter(), pool, budget=4000, selector="kate", demo_order="canonical")
    assert canonical.answer.selection.config.demo_order == "canonical"
    keys = canonical_keys(canonical.answer.selection.pool())
    index = canonical.answer.selection.pool().index_of
    differ = 0
    for query in make_examples(10, seed=8, prefix="q"):
        a = similarity.answer.selection(base_tokens=0, question=query.question).ids
        b = canonical.answer.selection(base_tokens=0, question=query.question).ids
        assert sorted(a) == sorted(b)
        assert [keys[index([i])[0]] for i in b] == sorted(keys[index([i])[0]] for i in b)
        differ += a != b
    assert differ  # it is a different order, not the same one


def test_demo_order_is_validated_and_saved():
    with pytest.raises(SelectionConfigError, match="demo_order"):
        SelectionConfig(demo_order="random")
    config = SelectionConfig(demo_order="canonical")
    assert SelectionConfig.from_dict(config.to_dict()) == config
    assert SelectionConfig.from_dict({k: v for k, v in config.to_dict().items()
                                      if k != "demo_order"}).demo_order == "similarity"  # older programs


EMBEDDER, COUNTER = HashingEmbedder(), WordCounter()


def _embedder():
    return EMBEDDER


def _counter():
    return COUNTER


def test_suites_take_demo_order_and_latency_budget_and_old_run_keys_stay():
    from knapsack_dspy.bench.suites.suite import SuiteError, suite_from_dict

    plain = suite_from_dict({"selector": "seer"}).runs[0]
    assert plain.key == suite_from_dict({"selector": "seer", "demo_order": "similarity"}).runs[0].key
    run = suite_from_dict({"selector": "seer", "demo_order": "canonical", "latency_budget": 12}).runs[0]
    assert run.key != plain.key
    config = run.selection_config()
    assert (config.demo_order, config.latency_budget) == ("canonical", 12.0)
    with pytest.raises(SuiteError, match=r"demo_order: demo_order must be one of \('similarity', 'canonical'\)"):
        suite_from_dict({"demo_order": "shuffled"})
    with pytest.raises(SuiteError, match="latency_budget: latency_budget must be a positive number of seconds"):
        suite_from_dict({"latency_budget": -1})
