"""Selectors by name (the names the CLI, suites and reports use)."""

from __future__ import annotations

from knapsack_dspy.selection.selectors.base import ExemplarSelector
from knapsack_dspy.selection.selectors.csp import CSPSelector
from knapsack_dspy.selection.selectors.diverse_kate import DiverseKATESelector
from knapsack_dspy.selection.selectors.fixed_set import FixedSetSelector
from knapsack_dspy.selection.selectors.kate import KATESelector
from knapsack_dspy.selection.selectors.random_selector import RandomSelector
from knapsack_dspy.selection.selectors.seer import KnapsackSelector
from knapsack_dspy.selection.selectors.static_knapsack import HybridKnapsackSelector, StaticKnapsackSelector

SELECTORS: dict[str, type[ExemplarSelector]] = {
    "random": RandomSelector,
    "fixed": FixedSetSelector,
    "kate": KATESelector,
    "diverse_kate": DiverseKATESelector,
    "csp": CSPSelector,
    "seer": KnapsackSelector,
    "seer_gold": KnapsackSelector,  # same selector; SelectExemplars feeds it gold attributes
    "static": StaticKnapsackSelector,
    "hybrid": HybridKnapsackSelector,
}

# Which attribute source a selector name implies ("seer_gold" is SEER with oracle attributes).
DEFAULT_ATTRIBUTE_SOURCE = {"seer_gold": "gold"}


def make_selector(name: str, **params) -> ExemplarSelector:
    """Build a selector by name, passing only the parameters it accepts."""
    try:
        cls = SELECTORS[name]
    except KeyError:
        raise ValueError(f"unknown selector {name!r}; choose from {', '.join(SELECTORS)}") from None
    accepted = set(cls._param_names())
    selector = cls(**{k: v for k, v in params.items() if k in accepted})
    selector.validate_params()
    return selector
