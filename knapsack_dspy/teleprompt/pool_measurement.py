"""Measure: a predictor's pool priced in its own prompt, before any selection setting is tried.

Each pool demo's token cost is what it adds to the predictor's prompt as the pinned adapter formats it for the
target model's tokenizer (``modules/prompt_cost.PromptCostModel``, batched); demos sharing the values of the
config's ``shared_fields`` cost what they add without the shared value, the value itself a group cost paid once
(:func:`shared_costs`). A query's own prompt size (``base_tokens``) counts the demos the predictor already sends
(``fixed``: another optimizer's, a prefix of every prompt).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from knapsack_dspy.modules.pool_spec import PoolSpec
from knapsack_dspy.modules.prompt_cost import PromptCostModel
from knapsack_dspy.modules.selecting_predict import SelectingPredict
from knapsack_dspy.modules.shared_fields import group_demos, referring_demo
from knapsack_dspy.teleprompt.predictor_pools import PredictorPool

__all__ = ["PoolMeasurement", "measure_pool", "shared_costs"]


@dataclass(frozen=True)
class PoolMeasurement:
    """A predictor's pool as its prompt prices it: the cost model, the demos the predictor already sends
    (``fixed``), each pool demo's token cost and, for demos sharing a field value, their groups and each group's
    shared cost (``[]``: nothing shared)."""

    cost_model: PromptCostModel
    fixed: list[dict]
    costs: list[float]
    groups: list[int]
    group_costs: list[float]

    @property
    def pool_tokens(self) -> int:
        """The tokens measured: every demo's cost and every group's shared cost."""
        return int(sum(self.costs) + sum(self.group_costs))

    @property
    def prompt_format(self) -> str:
        """What else the costs depend on (the adapter; part of a pool store's hash)."""
        return self.cost_model.adapter_key

    def base_tokens(self, inputs: Mapping[str, Any]) -> int:
        """A query's prompt size without selected demos (the fixed ones included; a selectable field's ``Pieces`` with
        every piece shown)."""
        from knapsack_dspy.modules.selectable_context import Pieces  # selectable context: loaded when first used

        shown = {name: value.whole() if isinstance(value, Pieces) else value for name, value in inputs.items()}
        return self.cost_model.prompt_tokens(shown, self.fixed)

    def pool_spec(self, pool: PredictorPool, attributes: Mapping[str, Callable[[Any], Any]]) -> PoolSpec:
        """The pool with its costs, as ``SelectExemplars.fit`` takes it (``attributes``: the functions labelling
        its exemplars)."""
        return PoolSpec(pool.examples, pool.demos, self.costs, ids=pool.ids, attributes=attributes,
                        groups=self.groups or None, group_costs=self.group_costs or None,
                        query_inputs=pool.query_inputs)


def measure_pool(selecting: SelectingPredict, pool: PredictorPool, counter: Any, adapter: Any,
                 shared_fields: Sequence[str], progress: bool = False) -> PoolMeasurement:
    """Price ``pool``'s demos in ``selecting``'s prompt for ``counter`` (a ``TokenCounter``) formatted by
    ``adapter``, sharing the values of ``shared_fields``."""
    cost_model = PromptCostModel(selecting.signature, counter, adapter)
    fixed = [dict(d.toDict() if hasattr(d, "toDict") else d) for d in selecting.demos]
    costs = cost_model.demo_costs(pool.demos, progress=progress)  # batched: the same counts
    own_costs, groups, group_costs = shared_costs(pool.demos, costs, shared_fields, cost_model)
    return PoolMeasurement(cost_model, fixed, own_costs, groups, group_costs)


def shared_costs(demos, costs: list, fields, cost_model) -> tuple[list[float], list[int], list[float]]:
    """``(costs, groups, group_costs)`` for demos sharing the values of ``fields``
    (``knapsack_dspy.modules.shared_fields``): a grouped demo's cost is its cost without the shared value (its
    referring form), and its group's cost the most the value adds to a member (the same text in the same
    place: equal for all). Without ``fields``, or when no two demos share a value: ``(costs, [], [])``."""
    groups = group_demos(demos, fields) if fields else []
    if not any(g >= 0 for g in groups):
        return list(costs), [], []
    own_costs, group_costs = [], [0.0] * (max(groups) + 1)
    for demo, cost, g in zip(demos, costs, groups, strict=True):
        own = float(cost_model.demo_cost(referring_demo(demo, fields))) if g >= 0 else float(cost)
        own_costs.append(own)
        if g >= 0:
            group_costs[g] = max(group_costs[g], float(cost) - own)
    return own_costs, groups, group_costs
