"""How often two selectors choose different exemplar sets for the same questions (no LM: rows of any results dir).

    python benchmarks/selection_agreement.py benchmarks/results/finqa_figure8
    python benchmarks/selection_agreement.py DIR --a seer --b kate_within_budget --json

Rows (``predictions.jsonl``, or the committed ``predictions.jsonl.xz`` / ``.gz`` when only that is there) are
grouped by setting: the run's spec without its selector (dataset, pool, budget, exemplar budget, M, ...). In each
setting where both selectors ran, a question counts as "different" when the two chose different sets of exemplar ids
(order aside).
Issue 26's rule for the tight exemplar budget: if SEER and KATE within budget choose different sets for fewer than
25 % of the questions, their LM rows are skipped. Prints one line per setting: questions compared, the share that
differ (with its 90 % Wilson interval), and the mean exemplar tokens of each selector.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path

import knapsack_dspy  # noqa: F401  (offline defaults)
from knapsack_dspy.bench.results.row_schema import rows_of
from knapsack_dspy.bench.results.store import ResultsFileError, load_rows, rows_file
from knapsack_dspy.docqa.metrics.intervals import proportion_ci

SETTING_KEYS = ("dataset", "pipeline", "pool_dataset", "pool_split", "budget", "exemplar_budget", "max_exemplars",
                "retrieval", "eval_split")


def read_rows(directory: Path) -> list:
    """The rows of ``directory`` (``results_store.load_rows``: ``predictions.jsonl``, else the committed ``.xz`` /
    ``.gz``), the last row of each (run, question) only (a resumed run's last row counts)."""
    try:
        if not rows_file(directory).is_file():
            raise SystemExit(f"{directory}: no predictions.jsonl(.xz/.gz)")
        rows = load_rows(directory)
    except ResultsFileError as exc:
        raise SystemExit(f"selection_agreement: {exc}") from None
    return list({(row.run, row.example_id): row for row in rows}.values())


def agreement(rows: list, a: str, b: str) -> list[dict]:
    """Per setting where both selectors ran: questions compared, how many differ, mean exemplar tokens."""
    chosen: dict[tuple, dict[str, dict]] = defaultdict(lambda: defaultdict(dict))
    for row in rows_of(rows):
        spec = row.spec
        if spec.get("selector") in (a, b) and row.error is None:
            setting = tuple((key, spec.get(key)) for key in SETTING_KEYS)
            chosen[setting][spec["selector"]][row.example_id] = row
    out = []
    for setting, by_selector in sorted(chosen.items(), key=lambda kv: str(kv[0])):
        shared = sorted(set(by_selector.get(a, {})) & set(by_selector.get(b, {})))
        if not shared:
            continue
        differ = sum(set(by_selector[a][q].exemplar_ids) != set(by_selector[b][q].exemplar_ids) for q in shared)
        low, high = proportion_ci(differ, len(shared), level=0.9)[:2]
        tokens = {name: sum(by_selector[name][q].exemplar_tokens or 0 for q in shared) / len(shared)
                  for name in (a, b)}
        out.append({"setting": dict(setting), "questions": len(shared), "different": differ,
                    "share_different": 100.0 * differ / len(shared), "ci90": [100.0 * low, 100.0 * high],
                    "mean_exemplar_tokens": tokens})
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("directory", type=Path)
    parser.add_argument("--a", default="seer")
    parser.add_argument("--b", default="kate_within_budget")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    results = agreement(read_rows(args.directory), args.a, args.b)
    if args.json:
        json.dump(results, sys.stdout, indent=2)
        print()
        return 0
    print(f"| pool | budget | exemplar budget | M | questions | {args.a} ≠ {args.b} (90 % interval) | "
          f"exemplar tokens {args.a} / {args.b} |")
    print("|---|---|---|---|---|---|---|")
    for r in results:
        s = r["setting"]
        pool = f"{s['pool_dataset'] or s['dataset']} {s['pool_split']}"
        print(f"| {pool} | {s['budget']} | {s['exemplar_budget'] or '–'} | {s['max_exemplars']} | {r['questions']} | "
              f"{r['share_different']:.1f} % ({r['different']}) [{r['ci90'][0]:.1f}, {r['ci90'][1]:.1f}] | "
              f"{r['mean_exemplar_tokens'][args.a]:.0f} / {r['mean_exemplar_tokens'][args.b]:.0f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
