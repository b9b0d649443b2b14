"""Per run of each results file: rows whose selection took at least 4.9 s -- SEER's and case_coverage's knapsack
time limit is 5 s, so such a set may be the best found when the limit ended the search (rows written before
``selection_status`` existed say nothing else).

    python experiments/pool_scale_diagnostics/time_limited_rows.py benchmarks/results/*/predictions.jsonl.gz
"""

import collections
import sys

from knapsack_dspy.bench.results.store import load_rows

for path in sys.argv[1:]:
    cut, total = collections.Counter(), collections.Counter()
    for row in load_rows(path):
        parts = row["run"].split("|")
        key = "|".join(parts[2:4]) + "|" + parts[-1]
        total[key] += 1
        cut[key] += (row.get("selection_ms") or 0) >= 4900
    print(path)
    for key in total:
        print(f"   {key} {cut[key]} of {total[key]}")
