"""The fair comparator's budget of the tokens issue, from selection-only figures fixed before any LM row (no LM).

    kdspy bench benchmarks/tatqa_tokens_comparator.toml --selection-only
    python experiments/tokens/comparator_budget.py benchmarks/results/tatqa_tokens_comparator

Per run: mean prompt tokens (selection's count, the embedded 1.5B's tokenizer), exemplar tokens, exemplars per prompt
and prompts within budget on the gate's questions. The comparator's budget: the budget of KATE within budget on the
new setting's demos whose mean prompt tokens are closest to the new setting's (the lower budget on a tie), so that
a pass measures the selection, not the trimming.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

from knapsack_dspy.bench.results.store import load_rows

NEW = "case_coverage"  # the new setting's selector (token_price > 0)
COMPARATOR = "kate_within_budget"


def runs(results_dir: Path) -> list[dict]:
    grouped: dict[str, list] = {}
    for row in load_rows(results_dir):
        grouped.setdefault(row.run, []).append(row)
    out = []
    for rows in grouped.values():
        spec = rows[0].spec
        out.append({"selector": spec["selector"], "budget": spec["budget"], "demo_table": spec.get("demo_table", "all"),
                    "token_price": spec["selector_params"].get("token_price"), "questions": len(rows),
                    "prompt_tokens": statistics.fmean(r.prompt_tokens for r in rows),
                    "exemplar_tokens": statistics.fmean(r.exemplar_tokens for r in rows),
                    "exemplars": statistics.fmean(len(r.exemplar_ids) for r in rows),
                    "within_budget": sum(bool(r.within_budget) for r in rows) / len(rows)})
    return sorted(out, key=lambda r: (r["selector"], r["demo_table"], r["budget"]))


def comparator_budget(figures: list[dict]) -> int:
    new = [f for f in figures if f["selector"] == NEW and f["token_price"]]
    if len(new) != 1:
        raise SystemExit(f"comparator_budget: expected one {NEW} run with a token price, found {len(new)}")
    target = new[0]["prompt_tokens"]
    candidates = [f for f in figures if f["selector"] == COMPARATOR and f["demo_table"] == new[0]["demo_table"]]
    return min(candidates, key=lambda f: (abs(f["prompt_tokens"] - target), f["budget"]))["budget"]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("results", type=Path)
    args = parser.parse_args(argv)
    figures = runs(args.results)
    print(f"{'run':<44} {'questions':>9} {'prompt tok':>10} {'exemplar tok':>12} {'exemplars':>9} {'within':>7}")
    for f in figures:
        name = f"{f['selector']} b{f['budget']} demos {f['demo_table']}" + (
            f" price {f['token_price']:g}" if f["token_price"] else "")
        print(f"{name:<44} {f['questions']:>9} {f['prompt_tokens']:>10.1f} {f['exemplar_tokens']:>12.1f} "
              f"{f['exemplars']:>9.2f} {f['within_budget']:>7.1%}")
    print(f"the fair comparator's budget: {comparator_budget(figures)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
