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

import importlib

#: public name -> the module that defines it (loaded on first use, PEP 562: ``import knapsack_dspy.selection``
#: loads none of them)
_PUBLIC = {
    "SelectionConfig": "config", "SelectionConfigError": "config",
    "attribute_constraint": "constraints", "max_per_value": "constraints", "seer_template": "constraints",
    "ExemplarPool": "exemplar_pool", "Selection": "exemplar_pool", "SelectionRequest": "exemplar_pool",
    "AttributeConstraint": "knapsack", "KnapsackSolution": "knapsack", "solve_knapsack": "knapsack",
    "SELECTORS": "selectors", "ExemplarSelector": "selectors", "NotFittedError": "selectors",
    "make_selector": "selectors", "register_selector": "selectors", "selector_class": "selectors",
}

__all__ = sorted(_PUBLIC)


def __getattr__(name: str):
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module 'knapsack_dspy.selection' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"knapsack_dspy.selection.{module}"), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted({*globals(), *_PUBLIC})
