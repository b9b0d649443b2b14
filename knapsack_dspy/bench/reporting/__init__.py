"""Reports of a results directory: ``report.md``, ``metrics.json``, plots, the per-question HTML page,
re-scoring with the current metrics, and MLflow tracking.
"""
