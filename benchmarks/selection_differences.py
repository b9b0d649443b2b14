"""Which questions two runs of one results directory select differently for (no LM): per pair of runs, the questions
both answered, those whose exemplar ids differ, and each run's mean prompt tokens and exemplars per prompt.

    python benchmarks/selection_differences.py benchmarks/results/tatqa_token_price_rule
    python benchmarks/selection_differences.py DIR --toml       # also the differing ids, as a suite's example_ids

Runs are named by their selector and selector parameters (``case_coverage {'token_price': 'auto'}``).
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import sys
from collections import defaultdict
from pathlib import Path

from knapsack_dspy.bench.results.store import load_rows


def runs_of(results_dir: Path) -> dict[str, dict[str, object]]:
    """run name -> question id -> its row."""
    out: dict[str, dict[str, object]] = defaultdict(dict)
    for row in load_rows(results_dir):
        params = row.spec.get("selector_params") or {}
        out[f"{row.spec.get('selector')} {params}" if params else str(row.spec.get("selector"))][row.example_id] = row
    return dict(out)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("results_dir", type=Path)
    parser.add_argument("--toml", action="store_true", help="print the differing ids as a suite's example_ids")
    args = parser.parse_args(argv)
    runs = runs_of(args.results_dir)
    for name, rows in runs.items():
        print(f"{name}: {len(rows)} questions, {statistics.fmean(r.prompt_tokens for r in rows.values()):.0f} prompt "
              f"tokens, {statistics.fmean(len(r.exemplar_ids) for r in rows.values()):.2f} exemplars per prompt")
    for a, b in itertools.combinations(runs, 2):
        shared = [q for q in runs[a] if q in runs[b]]
        differ = [q for q in shared if list(runs[a][q].exemplar_ids) != list(runs[b][q].exemplar_ids)]
        print(f"{a} vs {b}: {len(differ)} of {len(shared)} questions select differently")
        if args.toml:
            print("example_ids = [\n" + "".join(f'    "{q}",\n' for q in differ) + "]")
    return 0


if __name__ == "__main__":
    sys.exit(main())
