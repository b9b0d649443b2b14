"""How the answer-type router routes TAT-QA questions (no LM): its confusion matrix against the gold answer types.

The router (``knapsack_dspy.docqa.pipelines.answer_type_router``) is fitted on the pool's questions, as compile does, and
routes each question of the evaluation split to "extract" (span / multi-span) or "compute" (arithmetic /
count). ``--skip`` leaves out a range of questions (the final evaluation's questions 101-200 were not looked at
during development: ``--skip 100:200``).

    python experiments/answer_quality/routing.py --split dev_tune --skip 100:200
"""

from __future__ import annotations

import argparse
import collections

import knapsack_dspy  # noqa: F401  (first: LiteLLM then loads with its bundled model map, _env.py)
from knapsack_dspy.docqa.data.loader import load_examples
from knapsack_dspy.docqa.pipelines.answer_type_router import EXTRACT_TYPES, AnswerTypeRouter
from knapsack_dspy.embeddings import TextEmbedder


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pool", default="dev_pool")
    parser.add_argument("--split", default="dev_tune")
    parser.add_argument("--skip", default="", help="START:END, 0-based, questions left out")
    parser.add_argument("--data-dir", default=None)
    args = parser.parse_args(argv)
    pool = load_examples("tatqa", args.pool, data_dir=args.data_dir)
    questions = list(load_examples("tatqa", args.split, data_dir=args.data_dir))
    if args.skip:
        start, end = (int(x) for x in args.skip.split(":"))
        questions = questions[:start] + questions[end:]
    embedder = TextEmbedder()
    router = AnswerTypeRouter().fit_on_trainset(pool, embedder)
    confusion: collections.Counter = collections.Counter()
    for example, vector in zip(questions, embedder.encode([q.question for q in questions]), strict=True):
        confusion[example.answer_type, router.route(example.question, vector).route] += 1
    right = sum(n for (kind, route), n in confusion.items() if (route == "extract") == (kind in EXTRACT_TYPES))
    print(f"{args.split} ({len(questions)} questions{', without ' + args.skip if args.skip else ''}): "
          f"{right}/{len(questions)} routed to their gold type's route ({100 * right / len(questions):.1f} %)")
    print("| gold answer type | extract | compute |\n|---|---|---|")
    for kind in ("span", "multi-span", "arithmetic", "count"):
        print(f"| {kind} | {confusion[kind, 'extract']} | {confusion[kind, 'compute']} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
