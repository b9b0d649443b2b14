"""What a bench runs: the TOML suite (runs = datasets x pipelines x selectors x budgets x models), its schema,
the selection settings a suite may set, and the names of DSPy's own optimizers as baselines.
"""
