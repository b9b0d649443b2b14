"""The token price a pool gives (``token_price="auto"``, ``selection/token_price.py``), and what it keeps, LM-free.

    python benchmarks/token_price_rule.py tatqa                       # the task's compile pool and pipeline
    python benchmarks/token_price_rule.py finqa --pipeline python_pot --pool docs_pool
    python benchmarks/token_price_rule.py sara --pipeline cot --budget 4096 -M 2
    python benchmarks/token_price_rule.py gsm8k --pipeline cot --budget 1536 -M 8 [--json out.json]
    python benchmarks/token_price_rule.py tatqa --shares 0.8,0.85,0.9,0.95   # the price at other shares too

Compiles the task's pipeline on its pool with ``case_coverage`` and ``token_price="auto"`` (no LM call: the
embedded 1.5B's tokenizer counts the tokens), prints each selecting predictor's price as the compile read it
(the rule's grid: price, hit rate, exemplars and exemplar tokens per query) and then, on the rule's own halves and
query sample (each half's queries select from the other half, cross-fitted), the figures at the rule's price, at
the constant the default used before (0.004) and unpriced: the kind hit (the rule's measure), the gold-case hit
(an exemplar whose gold program or derivation is >= 0.9 similar to the query's, where the query's parses:
``docqa/metrics/selection_quality``), exemplars and exemplar tokens per prompt. ``--shares``: the price the rule
gives at other values of its constant (``SHARE``), on the same pool and capacity (how the constant was chosen).
"""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from pathlib import Path

import numpy as np

from knapsack_dspy.docqa.data import load_examples
from knapsack_dspy.docqa.metrics.program_similarity import GOLD_CASE_THRESHOLD
from knapsack_dspy.docqa.metrics.selection_quality import program_parses, program_score
from knapsack_dspy.docqa.tasks import build_pipeline, task_named
from knapsack_dspy.selection.exemplar_pool import SelectionRequest
from knapsack_dspy.selection.token_price import QUERIES_PER_HALF, fit_token_price, half_of, sub_pool
from knapsack_dspy.teleprompt import KnapsackFewShot

MODEL = "local/qwen2.5-coder-1.5b-instruct"
BEFORE = 0.004  # the default's constant before the rule (issue 38)


def figures(select, price_fit: dict, prices: dict[str, float], kind: str = "kind") -> dict[str, dict]:
    """Cross-fitted figures at each price, on the rule's halves and query sample (its seed, 0)."""
    pool = select.pool()
    programs = list(select.programs)
    labels = np.asarray(pool.attributes[kind], dtype=str)
    half, rng = half_of(pool), np.random.default_rng(0)
    index = {pool_id: k for k, pool_id in enumerate(pool.ids)}
    sides = []
    for h in (0, 1):
        other = sub_pool(pool, np.flatnonzero(half != h))
        selector = select.config.build_selector()
        selector.token_price = 0.0
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            selector.fit(other)
        askers = np.flatnonzero((half == h) & (labels != ""))
        if askers.size > QUERIES_PER_HALF:
            askers = np.sort(rng.choice(askers, QUERIES_PER_HALF, replace=False))
        sides.append((other, selector, askers))
    out = {}
    for name, price in prices.items():
        kind_hits = gold_hits = with_gold = shown = tokens = asked = 0
        for other, selector, askers in sides:
            other_kinds = np.asarray(other.attributes[kind], dtype=str)
            for q in askers:
                request = SelectionRequest(embedding=pool.embeddings[int(q)], capacity=float(price_fit["capacity"]),
                                           key=pool.ids[int(q)])
                chosen = list(selector.select_at_prices(other, request, (price,))[0].indices)
                kind_hits += bool(chosen) and bool((other_kinds[chosen] == labels[int(q)]).any())
                if program_parses(programs[int(q)]):
                    best = max([program_score(programs[index[other.ids[i]]], programs[int(q)]) for i in chosen]
                               or [0.0])
                    gold_hits += best >= GOLD_CASE_THRESHOLD
                    with_gold += 1
                shown += len(chosen)
                tokens += float(other.cost_of(chosen))
                asked += 1
        out[name] = {"price": price, "kind_hit": kind_hits / asked, "gold_case_hit": gold_hits / max(with_gold, 1),
                     "queries_with_gold": with_gold, "exemplars": shown / asked, "exemplar_tokens": tokens / asked,
                     "queries": asked}
    return out


def price_at_share(select, capacity: float, share: float) -> float:
    """The price the rule gives ``select``'s pool at another value of its constant."""
    def at_price(price: float):
        selector = select.config.build_selector()
        selector.token_price = price
        return selector

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fit_token_price(select.pool(), at_price, capacity, share=share).price


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("task")
    parser.add_argument("--pipeline", default="pot")
    parser.add_argument("--pool", help="the pool split (default: the task's compile pool)")
    parser.add_argument("--budget", type=int, default=2048)
    parser.add_argument("-M", "--max-exemplars", type=int, default=4)
    parser.add_argument("--json", type=Path, help="write the figures here")
    parser.add_argument("--shares", default="", help="comma-separated shares: the rule's price at each")
    args = parser.parse_args(argv)
    pool_split = args.pool or task_named(args.task).compile_splits[0]
    pool = load_examples(args.task, pool_split)
    student = build_pipeline(args.task, args.pipeline, model=MODEL)
    tele = KnapsackFewShot(selector="case_coverage", selector_params={"token_price": "auto"}, budget=args.budget,
                           max_exemplars=args.max_exemplars, lm_model=MODEL, progress=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        program = tele.compile(student, trainset=pool)
    result = {"task": args.task, "pipeline": args.pipeline, "pool": pool_split, "budget": args.budget,
              "max_exemplars": args.max_exemplars, "predictors": {}}
    for name, report in program.compile_report["predictors"].items():
        fit = report["token_price"]
        print(f"{args.task} / {args.pipeline} / {name}: pool {report['pool_size']}, {fit['summary']}")
        for point in fit["grid"]:
            print(f"    price {point['price']:.5f} (x{point['relative']:.3f} per median exemplar of "
                  f"{fit['median_cost']:.0f} tokens): hit {point['hit']:.1%}, {point['exemplars']:.2f} exemplars, "
                  f"{point['tokens']:.0f} exemplar tokens")
        select = next(p for n, p in program.named_predictors() if n == name).selection
        at = figures(select, fit, {"rule": fit["price"], "before": BEFORE, "unpriced": 0.0})
        for label, f in at.items():
            print(f"  {label:>8} price {f['price']:.5f}: kind hit {f['kind_hit']:.1%}, gold-case hit "
                  f"{f['gold_case_hit']:.1%} (of {f['queries_with_gold']}), {f['exemplars']:.2f} exemplars, "
                  f"{f['exemplar_tokens']:.0f} exemplar tokens ({f['queries']} queries)")
        result["predictors"][name] = {"token_price": fit, "figures": at}
        for share in [float(x) for x in args.shares.split(",") if x.strip()]:
            other = price_at_share(select, fit["capacity"], share)
            print(f"  share {share:g}: price {other:.5f}")
            result["predictors"][name].setdefault("shares", {})[str(share)] = other
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
