"""Does a FinQA prompt show the facts its gold answer needs? Retrieval recall without ``gold_inds`` (no LM).

    python benchmarks/finqa_retrieval_recall.py                    # the 150 tuning questions, seed 26's order
    python benchmarks/finqa_retrieval_recall.py --top-n 3,5,all --out benchmarks/results/finqa_retrieval_recall.json

FinQA's ``dev_docs`` carry no ``gold_inds``, so retrieval is measured by what the gold program reads
(``knapsack_dspy.docqa.data.program_evidence.program_reads_shown``): each number argument shown in a data cell or a
sentence of the query's context, each table operation's row present. The context is the one the FinQA pipeline
(``DocumentQA``'s ``HybridRetriever(top_n_paragraphs=n)``, the suites' n = 3) puts in a query's prompt: the
table rows it keeps and the ``n`` sentences most similar to the question. Per ``n``: the share of questions whose
every read is shown (with its 90 % Wilson interval), the mean share of reads shown, and for comparison the whole
document (``all``: a number the whole document does not show either comes from the annotators' arithmetic).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import knapsack_dspy  # noqa: F401  (offline defaults)
from knapsack_dspy.docqa.data.loader import load_examples
from knapsack_dspy.docqa.data.program_evidence import program_reads_shown
from knapsack_dspy.docqa.data.seeded_order import in_seeded_order
from knapsack_dspy.docqa.metrics.intervals import proportion_ci
from knapsack_dspy.docqa.pipelines.hybrid_retriever import HybridRetriever


def recall(examples: list, top_n: int | None) -> dict:
    """Reads shown in the context a query's prompt holds with ``top_n`` sentences (``None``: all of them)."""
    retriever = HybridRetriever(top_n_paragraphs=top_n)
    complete = shares = counted = 0
    missing: list[str] = []
    for example in examples:
        table, paragraphs = list(example.get("table") or []), list(example.get("paragraphs") or [])
        kept = retriever(question=example["question"], table=table, paragraphs=paragraphs)
        result = program_reads_shown(example.get("program") or "", [table[i] for i in kept.row_ids],
                                     [paragraphs[i] for i in kept.paragraph_ids])
        if result is None or result[1] == 0:
            continue
        shown, total = result
        counted += 1
        complete += shown == total
        shares += shown / total
        if shown < total:
            missing.append(str(example.get("id")))
    low, high = proportion_ci(complete, counted, level=0.9)[:2] if counted else (float("nan"), float("nan"))
    return {"top_n": "all" if top_n is None else top_n, "questions": counted, "all_reads_shown": complete,
            "all_reads_shown_pct": 100 * complete / counted if counted else float("nan"),
            "ci90": [100 * low, 100 * high], "mean_share_shown": shares / counted if counted else float("nan"),
            "missing_ids": missing}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--split", default="dev_docs_tune", help="FinQA split (default dev_docs_tune: the 150)")
    parser.add_argument("--order-seed", type=int, default=26, help="question order (the suites' seed 26)")
    parser.add_argument("--limit", type=int, default=150, help="first N questions in that order")
    parser.add_argument("--top-n", default="3,5,all", help="sentences kept per query, comma-separated ('all')")
    parser.add_argument("--out", help="write the figures as JSON here")
    args = parser.parse_args(argv)
    examples = in_seeded_order(list(load_examples("finqa", split=args.split)), args.order_seed)[: args.limit]
    results = [recall(examples, None if n.strip() == "all" else int(n)) for n in args.top_n.split(",")]
    print(f"FinQA {args.split}, first {len(examples)} questions (seed {args.order_seed}): gold-program reads shown")
    print("| sentences kept | questions | every read shown % [90 % CI] | mean share of reads shown |")
    print("|---|---|---|---|")
    for r in results:
        print(f"| {r['top_n']} | {r['questions']} | {r['all_reads_shown_pct']:.1f} [{r['ci90'][0]:.1f}, "
              f"{r['ci90'][1]:.1f}] | {r['mean_share_shown']:.3f} |")
    if args.out:
        Path(args.out).write_text(json.dumps({"split": args.split, "order_seed": args.order_seed,
                                              "limit": args.limit, "results": results}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
