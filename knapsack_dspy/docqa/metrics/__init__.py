"""Scoring: official-style metrics per benchmark, confidence intervals, program similarity, selection quality.

Modules (imported on demand; this package imports nothing heavy):

- :mod:`~knapsack_dspy.docqa.metrics.tatqa` — TAT-QA exact match / numeracy-focused F1, as the official evaluation.
- :mod:`~knapsack_dspy.docqa.metrics.sara` — SARA accuracy (entailment labels, dollar amounts exact and within 10 %).
- :mod:`~knapsack_dspy.docqa.metrics.finqa` — FinQA execution / program accuracy (separate owner).
- :mod:`~knapsack_dspy.docqa.metrics.intervals` — Wilson and seeded bootstrap confidence intervals.
- :mod:`~knapsack_dspy.docqa.metrics.program_similarity` — CBR program similarity (FinQA programs, TAT-QA derivations).
- :mod:`~knapsack_dspy.docqa.metrics.derivation_steps` — TAT-QA derivation -> FinQA-style steps.
- :mod:`~knapsack_dspy.docqa.metrics.selection_quality` — model-free quality of exemplar selections.
- :mod:`~knapsack_dspy.docqa.metrics.errors`, :mod:`~knapsack_dspy.docqa.metrics.json_files` — input errors and
  file reading.
"""
