"""Exemplars of one group share a cost (a document's table shown once): every selector counts it so, and
prompt order keeps a group together with the first member showing the shared part."""

import numpy as np
import pytest

from knapsack_dspy.selection.exemplar_pool import ExemplarPool, SelectionRequest, prompt_order
from knapsack_dspy.selection.selectors import make_selector

# four exemplars: a, b from document 0 (its table costs 500), c from document 1 (table 400), d alone
IDS = ["a", "b", "c", "d"]
OWN = np.array([100.0, 100.0, 100.0, 300.0])
GROUPS = np.array([0, 0, 1, -1])
SHARED = np.array([500.0, 400.0])
QUERY = np.array([0.9, 0.8, 0.7, 0.6], dtype=np.float32)


def pool():
    return ExemplarPool(IDS, np.eye(4, dtype=np.float32), OWN, groups=GROUPS, group_costs=SHARED)


def test_cost_of_pays_each_group_once():
    p = pool()
    assert p.cost_of([0]) == 600 and p.cost_of([0, 1]) == 700 and p.cost_of([0, 1, 2, 3]) == 1500
    assert p.cost_of([0, 1], paid_groups=[0]) == 200


def test_prompt_order_keeps_a_group_together_placed_by_its_most_similar_member():
    sims = np.array([0.9, 0.2, 0.5, 0.6])
    # a (0.9) and b (0.2) together, placed by a: c 0.5, d 0.6, then b, a (least similar first)
    assert prompt_order([0, 1, 2, 3], sims, GROUPS) == (2, 3, 1, 0)
    assert prompt_order([0, 1, 2, 3], sims) == (1, 2, 3, 0)


@pytest.mark.parametrize("name", ["seer", "kate_within_budget", "csp", "random"])
def test_selections_are_costed_with_shared_parts_and_never_exceed_the_capacity(name):
    selector = make_selector(name, max_exemplars=3, **({"respect_budget": True} if name == "random" else {}))
    for capacity in (650, 700, 1100, 1500, 5000):
        selection = selector.select(pool(), SelectionRequest(embedding=QUERY, capacity=capacity, key="q"))
        chosen = list(selection.indices)
        assert selection.total_cost == pool().cost_of(chosen)
        if name != "random" or capacity >= 1500:
            assert selection.within_budget and selection.total_cost <= capacity
        # the exemplar right after a member of its group is marked as sharing
        for k, i in enumerate(chosen):
            expected = k > 0 and GROUPS[i] >= 0 and GROUPS[i] == GROUPS[chosen[k - 1]]
            assert (selection.shared[k] if selection.shared else False) == expected


def test_the_knapsack_fits_two_questions_of_one_document_where_counted_apart_they_would_not():
    selection = make_selector("seer", max_exemplars=2, attributes=()).select(
        pool(), SelectionRequest(embedding=QUERY, capacity=700))
    assert sorted(IDS[i] for i in selection.indices) == ["a", "b"] and selection.total_cost == 700
    assert selection.shared == (False, True)


def test_a_pool_without_groups_behaves_as_before():
    plain = ExemplarPool(IDS, np.eye(4, dtype=np.float32), OWN + 500)
    selection = make_selector("seer", max_exemplars=2, attributes=()).select(
        plain, SelectionRequest(embedding=QUERY, capacity=1200))
    assert selection.shared == () and selection.total_cost == 1200


def test_bad_groups_are_rejected():
    with pytest.raises(ValueError, match="groups hold ids outside"):
        ExemplarPool(IDS, np.eye(4, dtype=np.float32), OWN, groups=np.array([0, 0, 5, -1]), group_costs=SHARED)
    with pytest.raises(ValueError, match="group_costs"):
        ExemplarPool(IDS, np.eye(4, dtype=np.float32), OWN, groups=GROUPS, group_costs=np.array([1.0, -2.0]))
