"""``kdspy demo``: the main job end to end, offline, on the embedded model.

Compiles a TAT-QA program-of-thought pipeline with SEER's knapsack selection (pool: dev_pool), answers a
few dev_tune questions with the embedded Qwen2.5-Coder model, and prints what happened and a report.
Everything is cached: a second run makes no LM calls.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from knapsack_dspy.cli.common import add_data_options, resolve_data_dir, setup_caches
from knapsack_dspy.llm.default_model import DEFAULT_LOCAL_MODEL


def register(subparsers) -> None:
    p = subparsers.add_parser("demo", help="offline end-to-end demo on the embedded model (TAT-QA)",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--lm", default=DEFAULT_LOCAL_MODEL, help=f"model (default {DEFAULT_LOCAL_MODEL})")
    p.add_argument("--api-base", default="", help="server address for OpenAI-compatible models")
    p.add_argument("--questions", type=int, default=3,
                   help="dev_tune questions to answer, a mix of answer types (default 3)")
    p.add_argument("--out", default=None, help="results directory (default <cache>/demo)")
    p.add_argument("--no-cache", action="store_true", help="bypass the LM cache")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    add_data_options(p)
    p.set_defaults(func=run)


def run(args) -> int:
    from knapsack_dspy import config
    from knapsack_dspy.bench.results_store import load_rows
    from knapsack_dspy.bench.runner import run_suite
    from knapsack_dspy.bench.suite import suite_from_dict
    from knapsack_dspy.cli.main import UserError
    from knapsack_dspy.data import load_examples

    if args.questions < 1:
        raise UserError(f"--questions must be at least 1, got {args.questions}")
    setup_caches(args)
    data_dir = resolve_data_dir(args)
    out = Path(args.out or config.cache_dir() / "demo")
    tune = load_examples("tatqa", split="dev_tune", data_dir=data_dir)
    questions = {ex.id: ex.question for ex in tune}
    suite = suite_from_dict({"name": "demo", "dataset": "tatqa", "pool_split": "dev_pool", "eval_split": "dev_tune",
                             "pipeline": "pot", "selector": "seer", "budget": 2048, "max_exemplars": 4,
                             "attributes": ["modality", "answer_type"], "model": args.lm,
                             "api_base": args.api_base or "", "example_ids": mixed_sample(tune, args.questions)},
                            "demo")
    print(f"knapsack-dspy demo: TAT-QA, program of thought, SEER knapsack selection, model {args.lm}")
    print(f"data: {data_dir}\nresults: {out}\n")
    run_suite(suite, out, data_dir=data_dir, progress=not args.quiet,
              allow_mixed=True)  # a scratch directory: rows of earlier demos may come from other code
    rows = [row for row in load_rows(out) if row.run == suite.runs[0].key]  # not an earlier demo's questions
    for row in rows:
        print(f"--- {questions.get(row.example_id, row.example_id)}")
        print(f"    exemplars {row.exemplar_ids} "
              f"(prompt ~{row.prompt_tokens} tokens, within budget: {row.within_budget})")
        if row.output:
            print(str(row.output).strip())
        print(f"=> answer {row.answer!r} scale {row.scale!r}; gold {row.gold!r}; "
              f"correct: {row.correct}" + (f"; error: {row.error}" if row.error else ""))
    print()
    print((out / "report.md").read_text())
    return 0


ANSWER_TYPE_ORDER = ("arithmetic", "span", "count", "multi-span")


def mixed_sample(examples, n: int) -> list[str]:
    """Ids of ``n`` questions that show the kinds of TAT-QA questions: the first of each answer type in turn
    (arithmetic first: what program of thought is for), then the next of each, and so on."""
    by_type: dict[str, list[str]] = {}
    for ex in examples:
        by_type.setdefault(str(ex.get("answer_type")), []).append(ex.id)
    order = [t for t in ANSWER_TYPE_ORDER if t in by_type] + sorted(set(by_type) - set(ANSWER_TYPE_ORDER))
    chosen: list[str] = []
    for round_ in range(max(len(ids) for ids in by_type.values())):
        for answer_type in order:
            if len(chosen) < n and round_ < len(by_type[answer_type]):
                chosen.append(by_type[answer_type][round_])
    return chosen
