"""A run's program: its data splits, compiling (``KnapsackFewShot``, or DSPy's own optimizers as baselines)
or reloading it from the results directory.
"""
