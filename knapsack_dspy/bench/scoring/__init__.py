"""Scores: per example (the data sets' official metrics), per run (``metrics.json``), and paired comparisons
of runs within one results directory or across two.
"""
