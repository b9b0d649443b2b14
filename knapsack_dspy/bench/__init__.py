"""Benchmark suites: datasets x pipelines x selectors x budgets x models, resumable, with reports.

Six subpackages, each importing only those below it (``tests/test_architecture.py``): ``execution`` (running a
suite) > ``reporting`` (report.md, plots, the per-question page) > ``programs`` (a run's program) > ``scoring``
(scores, metrics, comparisons) > ``results`` (the row schema and the store) and ``suites`` (the TOML suite).
"""
