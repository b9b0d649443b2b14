"""Exemplar selection as pure numpy / scipy (no DSPy import anywhere in this package).

- :mod:`~knapsack_dspy.selection.knapsack` — the knapsack ILP (``solve_knapsack``, ``AttributeConstraint``);
- :mod:`~knapsack_dspy.selection.constraints` — SEER's attribute templates and other constraint builders;
- :mod:`~knapsack_dspy.selection.exemplar_pool` — the pool, one query's request, the selection (plain data);
- :mod:`~knapsack_dspy.selection.attribute_classifier` — a query's attribute from its embedding;
- :mod:`~knapsack_dspy.selection.selectors` — the selectors and their registry (``register_selector``);
- :mod:`~knapsack_dspy.selection.config` — ``SelectionConfig``, the settings of one predictor's selection.
- :mod:`~knapsack_dspy.selection.pool_store` — a large pool's files (memory-mapped), referenced by content hash;
- :mod:`~knapsack_dspy.selection.ann_index` — the nearest-neighbour index of a large pool's candidate prefilter.

``knapsack_dspy.modules.select_exemplars.SelectExemplars`` (a DSPy module) runs this for a program.
"""

from knapsack_dspy.selection.config import SelectionConfig, SelectionConfigError
from knapsack_dspy.selection.constraints import attribute_constraint, max_per_value, seer_template
from knapsack_dspy.selection.exemplar_pool import ExemplarPool, Selection, SelectionRequest
from knapsack_dspy.selection.knapsack import AttributeConstraint, KnapsackSolution, solve_knapsack
from knapsack_dspy.selection.selectors import (
    SELECTORS,
    ExemplarSelector,
    NotFittedError,
    make_selector,
    register_selector,
    selector_class,
)

__all__ = ["SELECTORS", "AttributeConstraint", "ExemplarPool", "ExemplarSelector", "KnapsackSolution",
           "NotFittedError", "Selection", "SelectionConfig", "SelectionConfigError", "SelectionRequest",
           "attribute_constraint", "make_selector", "max_per_value", "register_selector", "seer_template",
           "selector_class", "solve_knapsack"]
