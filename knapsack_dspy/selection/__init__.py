"""Exemplar selection as pure numpy / scipy (no DSPy): the knapsack ILP, constraints, pool, selectors."""
