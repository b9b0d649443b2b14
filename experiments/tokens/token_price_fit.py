"""The token price of the tokens issue's setting, chosen on the TAT-QA pool alone by a rule fixed in advance (no LM).

    kdspy bench benchmarks/tatqa_token_price_fit.toml --selection-only
    python experiments/tokens/token_price_fit.py benchmarks/results/tatqa_token_price_fit [--json out.json]

The suite selects, for each half of the pool (by document), from the other half (cross-fitted), with case_coverage at
each price of a grid, with KATE within budget on the same (smallest) demos and with today's default (KATE within
budget, full demos). Per arm, pooled over the two halves: the questions, the gold-case hit rate (an exemplar whose
gold program or derivation is >= 0.9 similar to the question's: the case that solves it), the mean prompt tokens,
exemplar tokens and exemplars per prompt. The rule (docs/selection_objective.md, "Pre-registered: tokens"): the
smallest price whose mean prompt tokens are at most ``TOKEN_SHARE`` (65 %) of today's default's.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path

from knapsack_dspy.bench.results.store import load_rows

TOKEN_SHARE = 0.65  # the chosen price's prompt tokens, at most this share of today's default's (the gate: 70 %)
DEFAULT = ("kate_within_budget", None, "all")  # today's default: KATE within budget, full demos


def arms(results_dir: Path) -> dict[tuple[str, float | None, str], dict]:
    """(selector, token price or None, demo tables) -> figures pooled over the two halves."""
    grouped = defaultdict(list)
    for row in load_rows(results_dir):
        spec = row.spec
        price = spec["selector_params"].get("token_price", 0.0) if spec["selector"] == "case_coverage" else None
        grouped[(spec["selector"], price, spec.get("demo_table", "all"))].append(row)
    out = {}
    for key, rows in sorted(grouped.items(), key=lambda kv: (kv[0][0], kv[0][1] or 0.0, kv[0][2])):
        out[key] = {"questions": len(rows), "halves": sorted({r.spec["eval_split"] for r in rows}),
                    "gold_case_hit": sum(bool(r.gold_case_hit) for r in rows) / len(rows),
                    "prompt_tokens": statistics.fmean(r.prompt_tokens for r in rows),
                    "exemplar_tokens": statistics.fmean(r.exemplar_tokens for r in rows),
                    "exemplars": statistics.fmean(len(r.exemplar_ids) for r in rows),
                    "within_budget": sum(bool(r.within_budget) for r in rows) / len(rows)}
    return out


def chosen_price(figures: dict[tuple[str, float | None, str], dict], share: float = TOKEN_SHARE) -> float:
    """The smallest price whose pooled mean prompt tokens are at most ``share`` of today's default's."""
    if DEFAULT not in figures:
        raise SystemExit("token_price_fit: no run of today's default (kate_within_budget, demo_table all)")
    ceiling = share * figures[DEFAULT]["prompt_tokens"]
    priced = sorted(price for (selector, price, _), f in figures.items()
                    if selector == "case_coverage" and f["prompt_tokens"] <= ceiling)
    if not priced:
        raise SystemExit(f"token_price_fit: no price of the grid keeps the prompt within {ceiling:.0f} tokens")
    return priced[0]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("results", type=Path)
    parser.add_argument("--json", type=Path, help="write the figures and the chosen price here")
    args = parser.parse_args(argv)
    figures = arms(args.results)
    print(f"{'arm':<28} {'questions':>9} {'hit':>7} {'prompt tok':>10} {'exemplar tok':>12} {'exemplars':>9}")
    for (selector, price, tables), f in figures.items():
        name = (selector if price is None else f"{selector} price {price:g}") + ("" if tables != "all" else ", full")
        print(f"{name:<28} {f['questions']:>9} {f['gold_case_hit']:>7.1%} {f['prompt_tokens']:>10.1f} "
              f"{f['exemplar_tokens']:>12.1f} {f['exemplars']:>9.2f}")
    price = chosen_price(figures)
    print(f"chosen token price (the smallest with prompt tokens <= {TOKEN_SHARE:.0%} of today's default's, "
          f"{TOKEN_SHARE * figures[DEFAULT]['prompt_tokens']:.0f}): {price:g}")
    if args.json:
        args.json.write_text(json.dumps({"chosen_price": price, "token_share": TOKEN_SHARE,
                                         "arms": {f"{s}|{p}|{t}": f for (s, p, t), f in figures.items()}},
                                        indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
