"""How often the document-based scale rule gives TAT-QA's gold scale (issue 9, part A, item 1).

Two measurements, no LM:

1. ``gold``: for every question of a split, ``decide_scale`` given the question, the document, the gold answer
   type, the gold answer and the numbers of the gold derivation (what a right program computes from) -> the
   share of questions whose gold scale it gives (denominator: every question of the split).
2. ``replay RESULTS_DIR``: the recorded rows of a bench run re-scored with the rule's scale instead of the
   model's: each row's recorded program re-executed on the table the model saw, its numbers and answer
   handed to the rule (answer type from the answer's form), the official TAT-QA metric applied.

    python experiments/answer_quality/scale_rule.py gold --split dev_tune
    python experiments/answer_quality/scale_rule.py replay benchmarks/results/embedded_seer_kate_random
"""

from __future__ import annotations

import argparse
import collections
import re
from pathlib import Path
from types import SimpleNamespace

import knapsack_dspy  # noqa: F401  (first: LiteLLM then loads with its bundled model map, _env.py)
from knapsack_dspy.bench.results.store import load_rows
from knapsack_dspy.bench.scoring.example_scores import score_prediction
from knapsack_dspy.docqa.data.answer_scale import decide_scale
from knapsack_dspy.docqa.data.loader import load_examples
from knapsack_dspy.docqa.number_text import parse_number
from knapsack_dspy.docqa.pipelines.hybrid_retriever import HybridRetriever
from knapsack_dspy.docqa.sandbox import execute_program
from knapsack_dspy.docqa.solvers.program_of_thought_answerer import answer_type_of, numbers_used

_NUMBER = re.compile(r"\d[\d,]*\.?\d*\s*%?")
_SHARE = re.compile(r"proportion|ratio|portion|share|fraction", re.IGNORECASE)


def derivation_numbers(derivation: str) -> list[float]:
    out = []
    for match in _NUMBER.finditer(derivation or ""):
        value = parse_number(match.group(0).replace(" ", ""))
        if value is not None:
            out.append(abs(value))
    return out


def gold(split: str, data_dir, show: int) -> None:
    examples = load_examples("tatqa", split, data_dir=data_dir)
    right, total, wrong = collections.Counter(), collections.Counter(), []
    for ex in examples:
        used = derivation_numbers(ex.derivation) if ex.answer_type == "arithmetic" else []
        times_100 = (ex.scale == "percent") if _SHARE.search(ex.question) else None  # a right program's form
        decision = decide_scale(ex.question, ex.answer_type, ex.answer, table=ex.table, paragraphs=ex.paragraphs,
                                used_values=used, multiplied_by_100=times_100)
        total[ex.answer_type] += 1
        right[ex.answer_type] += decision.scale == (ex.scale or "")
        if decision.scale != (ex.scale or ""):
            wrong.append((ex.answer_type, ex.scale or "-", decision.scale or "-", decision.reason, ex.question))
    n, k = sum(total.values()), sum(right.values())
    print(f"tatqa/{split}: the rule gives the gold scale for {k}/{n} questions ({100 * k / n:.1f} %)")
    for kind in sorted(total):
        print(f"  {kind:<11} {right[kind]:>4}/{total[kind]:<4}")
    for row in wrong[:show]:
        print("  wrong:", row)


def replay(results_dir: Path, data_dir) -> None:
    rows = load_rows(results_dir)  # predictions.jsonl, or the committed .xz / .gz
    rows = [r for r in rows if r.spec.get("dataset") == "tatqa" and r.spec.get("pipeline") == "pot"]
    splits = {r.spec["eval_split"] for r in rows}
    examples = {ex.id: ex for s in splits for ex in load_examples("tatqa", s, data_dir=data_dir)}
    retriever = HybridRetriever()
    tally: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for row in rows:
        selector, ex = row.spec["selector"], examples[row.example_id]
        tally[selector]["n"] += 1
        tally[selector]["before"] += row.em or 0.0
        program, answer = row.output, row.answer
        if answer is None or not program:
            tally[selector]["after"] += row.em or 0.0
            continue
        table = list(ex.table or [])
        context = retriever(question=ex.question, table=table, paragraphs=list(ex.paragraphs or []))
        result = execute_program(program, [table[i] for i in context.row_ids])
        used = numbers_used(result.variables) if result.ok else []
        kind = answer_type_of(answer)
        if kind == "arithmetic" and (row.predicted_attributes or {}).get("answer_type") == "count":
            kind = "count"
        decision = decide_scale(ex.question, kind, answer, table=ex.table, paragraphs=ex.paragraphs,
                                used_values=used, multiplied_by_100=bool(re.search(r"\*\s*100\b", program)),
                                model_scale=row.scale or "")
        after = score_prediction(ex, SimpleNamespace(answer=answer, scale=decision.scale))["em"]
        tally[selector]["after"] += after
        tally[selector]["up"] += after > (row.em or 0.0)
        tally[selector]["down"] += after < (row.em or 0.0)
    for selector, t in sorted(tally.items()):
        print(f"{selector}: n={t['n']} EM {100 * t['before'] / t['n']:.1f} -> {100 * t['after'] / t['n']:.1f} "
              f"(+{t['up']} / -{t['down']} rows)")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="what", required=True)
    g = sub.add_parser("gold")
    g.add_argument("--split", default="dev_tune")
    g.add_argument("--show", type=int, default=0, help="wrong decisions to list")
    r = sub.add_parser("replay")
    r.add_argument("results_dir", type=Path)
    parser.add_argument("--data-dir", default=None)
    args = parser.parse_args(argv)
    if args.what == "gold":
        gold(args.split, args.data_dir, args.show)
    else:
        replay(args.results_dir, args.data_dir)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
