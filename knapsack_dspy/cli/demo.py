"""``kdspy demo``: the product end to end, offline, on the embedded model.

Compiles the measured default TAT-QA configuration (docs/results.md, "Tokens": the routed pipeline -- span
questions extracted, the others answered by a program we execute --, demos cut to the rows and paragraphs their
gold solution reads, the default selector: case coverage with a price on prompt tokens, the fewest-token setting
whose accuracy is non-inferior to the most accurate one measured; budget 2,048 tokens, at most 4 exemplars; pool:
dev_pool) and answers a few dev_tune questions with the embedded
Qwen2.5-Coder model. The questions are picked by a rule, not by their answers: the first dev_tune question of each
answer type in turn (arithmetic, span, count, multi-span), in the file's order. For each question it prints what
the prompt held (the exemplars' questions, the prompt's tokens against the budget), the answer with a right /
wrong mark and the time it took, then the report. Everything is cached: a second run makes no LM calls.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from knapsack_dspy.cli.common import add_data_options, resolve_data_dir, setup_caches
from knapsack_dspy.docqa.pipelines.pipeline_names import UNCUT
from knapsack_dspy.docqa.pipelines.recorded_outputs import output_is_program
from knapsack_dspy.llm.default_model import DEFAULT_LOCAL_MODEL

if TYPE_CHECKING:  # the package loads inside run() (fast --help)
    from knapsack_dspy.bench.results.row_schema import ResultRow

#: The configuration the demo runs: the measured default (docs/results.md, "Tokens"); the selector and the demo cut
#: are the package defaults (``SelectionConfig``, the TAT-QA task's ``default_demo_cut``).
DEMO_SETTINGS = {"dataset": "tatqa", "pool_split": "dev_pool", "eval_split": "dev_tune", "pipeline": "pot",
                 "route": "extract_compute", "budget": 2048, "max_exemplars": 4,
                 "attributes": ["modality", "answer_type"]}
ANSWER_TYPE_ORDER = ("arithmetic", "span", "count", "multi-span")
#: Why the defaults are what they are, as the demo says it (docs/results.md, "Tokens"; issue 38's rule)
DEFAULT_EVIDENCE = ("why this default: the fewest prompt tokens whose accuracy is non-inferior to the most accurate "
                    "setting measured -- on 342 unseen TAT-QA questions with the embedded 1.5B, 53.5 % right with "
                    "1,114 prompt tokens against 50.9 % with 1,733 for the default before it (KATE within budget, "
                    "whole demos); docs/results.md, \"Tokens\"")


def register(subparsers) -> None:
    p = subparsers.add_parser("demo", help="offline end-to-end demo on the embedded model (TAT-QA)",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--lm", default=DEFAULT_LOCAL_MODEL, help=f"model (default {DEFAULT_LOCAL_MODEL})")
    p.add_argument("--api-base", default="", help="server address for OpenAI-compatible models")
    p.add_argument("--questions", type=int, default=3,
                   help="dev_tune questions to answer: the first of each answer type in turn (default 3)")
    p.add_argument("--out", default=None, help="results directory (default <cache>/demo)")
    p.add_argument("--no-cache", action="store_true", help="bypass the LM cache")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    add_data_options(p)
    p.set_defaults(func=run)


def run(args) -> int:
    from knapsack_dspy import paths
    from knapsack_dspy.bench.execution.runner import run_suite
    from knapsack_dspy.bench.results.store import load_rows
    from knapsack_dspy.bench.suites.suite import suite_from_dict
    from knapsack_dspy.cli.main import UserError
    from knapsack_dspy.docqa.data import load_examples
    from knapsack_dspy.selection import SelectionConfig

    if args.questions < 1:
        raise UserError(f"--questions must be at least 1, got {args.questions}")
    setup_caches(args)
    data_dir = resolve_data_dir(args)
    out = Path(args.out or paths.cache_dir() / "demo")
    tune = load_examples(DEMO_SETTINGS["dataset"], split=DEMO_SETTINGS["eval_split"], data_dir=data_dir)
    pool = load_examples(DEMO_SETTINGS["dataset"], split=DEMO_SETTINGS["pool_split"], data_dir=data_dir)
    questions = {ex.id: ex.question for ex in [*tune, *pool]}
    selector = SelectionConfig().selector
    suite = suite_from_dict({"name": "demo", **DEMO_SETTINGS, "selector": selector, "model": args.lm,
                             "api_base": args.api_base or "", "example_ids": mixed_sample(tune, args.questions)},
                            "demo")
    run = suite.runs[0]
    cut = "cut to the rows and paragraphs their gold solution reads" if (run.demo_table, run.demo_paragraphs) != (
        UNCUT, UNCUT) else "whole"
    print(f"knapsack-dspy demo: TAT-QA, routed pipeline (extraction for spans, a program otherwise), selector "
          f"{selector}, demos {cut}, budget {DEMO_SETTINGS['budget']} tokens, at most "
          f"{DEMO_SETTINGS['max_exemplars']} exemplars, model {args.lm}")
    print(DEFAULT_EVIDENCE)
    print(f"questions: the first dev_tune question of each answer type in turn ({args.questions})")
    print(f"data: {data_dir}\nresults: {out}\n")
    run_suite(suite, out, data_dir=data_dir, progress=not args.quiet,
              allow_mixed=True)  # a scratch directory: rows of earlier demos may come from other code
    rows = [row for row in load_rows(out) if row.run == suite.runs[0].key]  # not an earlier demo's questions
    order = {example_id: i for i, example_id in enumerate(suite.runs[0].example_ids)}
    rows.sort(key=lambda row: order.get(row.example_id, len(order)))
    for number, row in enumerate(rows, 1):
        print(describe_row(number, row, questions))
    right = sum(bool(row.correct) for row in rows)
    print(f"\n{right} of {len(rows)} answered right\n")
    print((out / "report.md").read_text())
    return 0


def describe_row(number: int, row: ResultRow, questions: dict) -> str:
    """What one demo question shows: the question, the prompt's exemplars and tokens, the answer marked right or
    wrong against the gold answer, and the seconds it took."""
    mark = "RIGHT" if row.correct else "WRONG"
    lines = [f"[{number}] {questions.get(row.example_id, row.example_id)}"]
    ids = row.exemplar_ids
    budget = row.spec.get("budget")
    lines.append(f"    prompt: {len(ids)} exemplar{'s' if len(ids) != 1 else ''}, {row.prompt_tokens} tokens "
                 f"of a {budget}-token budget" + ("" if row.within_budget in (True, None) else " (OVER)"))
    for exemplar in ids:
        lines.append(f"      - {questions.get(exemplar, exemplar)}")
    if row.route:
        lines.append(f"    route: {row.route}")
    if row.output and output_is_program(row.route):
        lines += ["    program:", *(f"      {line}" for line in str(row.output).strip().splitlines())]
    scale = f" ({row.scale})" if row.scale else ""
    gold_scale = f" ({row.gold_scale})" if row.gold_scale else ""
    seconds = f"{row.latency_s:.1f} s" if row.latency_s is not None else "time unknown"
    lines.append(f"    {mark}: answer {row.answer!r}{scale}; gold {row.gold!r}{gold_scale}; {seconds}"
                 + (f"; error: {row.error}" if row.error else ""))
    return "\n".join(lines)


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
