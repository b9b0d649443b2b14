"""DSPy teleprompters that compile exemplar selection (above ``modules/``): ``KnapsackFewShot``."""

from knapsack_dspy.teleprompt.knapsack_few_shot import CompileError, KnapsackFewShot

__all__ = ["CompileError", "KnapsackFewShot"]
