"""Compare two ``kdspy bench`` results directories: same rows (exemplar ids, prompt tokens, scores, ...) and
``metrics.json`` figures? Exit 0 when nothing differs, 1 otherwise, 2 for unreadable input.

    python benchmarks/compare_results.py DIR_A DIR_B [--match spec] [--ignore FIELD ...] [--show 5] [--json]

What is compared and what is skipped: ``knapsack_dspy/bench/scoring/results_diff.py``.
"""

import sys

from knapsack_dspy.bench.scoring.results_diff import main

if __name__ == "__main__":
    sys.exit(main())
