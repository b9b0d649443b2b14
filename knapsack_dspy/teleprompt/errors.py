"""What the teleprompter raises and warns: a compile that cannot go on, a predictor that will send no exemplar."""

from __future__ import annotations

from knapsack_dspy.errors import KnapsackDspyError, KnapsackDspyWarning

__all__ = ["CompileError", "ZeroShotWarning"]


class CompileError(KnapsackDspyError, ValueError):
    """The student or the data cannot be compiled (message says why)."""


class ZeroShotWarning(KnapsackDspyWarning, UserWarning):
    """A compiled predictor will send no exemplar to most queries (the message says why, with the numbers): its
    budget leaves no room for the cheapest demo, or its values give the knapsack nothing worth taking."""
