"""Replay recorded FinQA programs through today's program cleaning (no LM call): what an LM-free fix would have scored.

Every FinQA-DSL row (``pipeline = "finqa_pot"``) answered in one LM call recorded the program as the cleaning of
its day read it (``output``); today's ``clean_program_text`` (which flattens nested and many-argument calls,
``execution/finqa_flattening.py``) is applied to it again, the program executed on the question's table and
scored by the official evaluation (execution and program accuracy, ``score_prediction``). For a row of one call the
replay is exact: the cleaning is all that differs, and a program that now runs would have needed no repair call.
Rows of two calls (a repair) are counted apart and not replayed (the repair's prompt would differ).

    python benchmarks/replay_finqa_cleaning.py benchmarks/results/finqa_tune_1p5b [--show 10] [--questions 61:150]

``--questions FROM:TO`` keeps the questions at those positions of the order each run answered its eval split in
(the suite's ``order_seed``; all FinQA runs of the directory must share it): ``61:150`` is the FinQA tuning
suite's clean part.
"""

from __future__ import annotations

import argparse
import collections
from pathlib import Path
from types import SimpleNamespace

import knapsack_dspy  # noqa: F401  (first: LiteLLM then loads with its bundled model map, _env.py)
from knapsack_dspy.bench.results.store import ResultsFileError, load_rows
from knapsack_dspy.bench.scoring.example_scores import score_prediction
from knapsack_dspy.bench.scoring.question_range import QuestionRangeError, questions_of_rows
from knapsack_dspy.docqa.data.loader import load_examples
from knapsack_dspy.docqa.sandbox import execute_program
from knapsack_dspy.docqa.solvers.program_of_thought_answerer import clean_program_text


def _label(row) -> str:
    spec = row.spec
    label = spec["selector"] + ("+greedy" if (spec.get("selector_params") or {}).get("solver") == "greedy" else "")
    if spec.get("exemplar_budget"):
        label += f"@L{spec['exemplar_budget']}"
    return label


def replay(rows, examples) -> tuple[dict, list]:
    """Per run label: counts before / after; and the rows whose program changed (label, row, new program,
    new scores)."""
    counts: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    changed = []
    for row in rows:
        if row.spec.get("pipeline") != "finqa_pot" or row.spec.get("selection_only"):
            continue
        label, example, tally = _label(row), examples.get(row.example_id), None
        tally = counts[label]
        if example is None or (row.error or "").startswith("LM "):
            tally["skipped"] += 1
            continue
        if (row.attempts or 1) > 1:
            tally["repaired, not replayed"] += 1
            continue
        tally["rows"] += 1
        tally["EA before"] += bool(row.correct)
        tally["PA before"] += bool(row.program_correct)
        tally["invalid before"] += row.answer is None
        program = clean_program_text(row.output or "", "finqa")
        if program == (row.output or ""):
            tally["EA after"] += bool(row.correct)
            tally["PA after"] += bool(row.program_correct)
            tally["invalid after"] += row.answer is None
            continue
        result = execute_program(program, example.get("table"), kind="finqa")
        scores = score_prediction(example, SimpleNamespace(
            program=program, answer=result.answer if result.ok else None, scale="", language="finqa"))
        tally["changed"] += 1
        tally["EA after"] += bool(scores["correct"])
        tally["PA after"] += bool(scores.get("program_correct"))
        tally["invalid after"] += not result.ok
        changed.append((label, row, program, result, scores))
    return counts, changed


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results_dir", type=Path)
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--show", type=int, default=10, help="changed rows to print")
    parser.add_argument("--questions", metavar="FROM:TO", default=None,
                        help="only the questions at these positions of the runs' order (1-based, inclusive)")
    args = parser.parse_args(argv)
    try:
        rows = load_rows(args.results_dir)  # predictions.jsonl, or the committed .xz / .gz; a missing file: one line
    except ResultsFileError as exc:
        raise SystemExit(f"error: {exc}") from None
    if args.questions:
        finqa = [row for row in rows if row.spec.get("pipeline") == "finqa_pot"]
        try:
            chosen = questions_of_rows(finqa, args.questions, data_dir=args.data_dir)
        except QuestionRangeError as exc:
            raise SystemExit(f"error: --questions {exc}") from None
        rows = [row for row in finqa if row.example_id in chosen]
        if finqa and not rows:
            raise SystemExit(f"error: no FinQA program row answers a question at positions {args.questions}")
    splits = {row.spec["eval_split"] for row in rows if row.spec.get("pipeline") == "finqa_pot"}
    if not splits:
        raise SystemExit("error: no FinQA program rows (pipeline finqa_pot) in that directory")
    examples = {ex["id"]: ex for split in splits for ex in load_examples("finqa", split, data_dir=args.data_dir)}
    counts, changed = replay(rows, examples)
    for label, row, program, result, scores in changed[:args.show]:
        print(f"[{label}] {row.example_id}: {row.output[:100]!r}\n    -> {program[:100]!r}: "
              f"{result.answer if result.ok else result.error[:80]!r} (gold {row.gold!r}) correct={scores['correct']}")
    print(f"\n{'run':<28} {'rows':>5} {'changed':>8} {'invalid':>12} {'EA %':>14} {'PA %':>14}")
    for label, tally in sorted(counts.items()):
        n = tally["rows"] or 1

        def pair(key, tally=tally, n=n):
            return f"{100 * tally[key + ' before'] / n:5.1f} -> {100 * tally[key + ' after'] / n:5.1f}"

        invalid = f"{tally['invalid before']:>4} -> {tally['invalid after']:<4}"
        extra = ", ".join(f"{tally[k]} {k}" for k in ("skipped", "repaired, not replayed") if tally[k])
        print(f"{label:<28} {tally['rows']:>5} {tally['changed']:>8} {invalid:>12} {pair('EA'):>14} {pair('PA'):>14}"
              + (f"   ({extra})" if extra else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
