"""Exemplar selectors: SEER's knapsack and the baselines, behind one interface, registered by name."""

from knapsack_dspy.selection.selectors.base import (
    ATTRIBUTE_SOURCES,
    FIT_ON_SCORING_FUNCTION,
    FIT_ON_VALIDATION_QUERIES,
    MODES,
    ExemplarSelector,
    NotFittedError,
)
from knapsack_dspy.selection.selectors.registry import (
    DEFAULT_SELECTOR,
    MODE_SELECTORS,
    SELECTORS,
    make_selector,
    register_selector,
    selector_class,
    selector_for_mode,
)

__all__ = ["ATTRIBUTE_SOURCES", "DEFAULT_SELECTOR", "FIT_ON_SCORING_FUNCTION", "FIT_ON_VALIDATION_QUERIES",
           "MODES", "MODE_SELECTORS", "SELECTORS", "ExemplarSelector", "NotFittedError", "make_selector",
           "register_selector", "selector_class", "selector_for_mode"]
