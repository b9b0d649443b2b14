"""Exemplar selectors: SEER's knapsack and the baselines, behind one interface."""

from knapsack_dspy.selection.selectors.base import ExemplarSelector, NotFittedError
from knapsack_dspy.selection.selectors.registry import DEFAULT_ATTRIBUTE_SOURCE, SELECTORS, make_selector

__all__ = ["DEFAULT_ATTRIBUTE_SOURCE", "SELECTORS", "ExemplarSelector", "NotFittedError", "make_selector"]
