"""Paired comparison of one selector's rows in two results directories: the same questions, EM and F1 (90 %
paired bootstrap, McNemar's exact p). No LM.

    python benchmarks/compare_runs.py DIR_A DIR_B --pairs seer:seer [kate:kate ...] [--all-shared] [--questions 61:120]

Details: ``knapsack_dspy/bench/scoring/paired_runs.py``.
"""

from knapsack_dspy.bench.scoring.paired_runs import main

if __name__ == "__main__":
    raise SystemExit(main())
