"""Why FinQA's Python answers are wrong, and what the mechanical fixes would have scored (issue 37; no LM).

Reads the rows of a FinQA Python run (``pipeline = "python_pot"``, ``benchmarks/finqa_python.toml``) and, per run:

* **classes** (default): every wrong answer in one failure class (``metrics.finqa_python.failure_class``: invalid
  program, right value judged wrong, scale or sign, wrong operation, wrong cell), with counts and examples. The
  classifier reads the gold answer and program: it analyses recorded rows. The issue reads the classes of
  questions 1-60 only (``--questions 1:60``) to decide the mechanical fixes.
* ``--replay``: each recorded program executed again on the table the run showed the model (the retriever's rows,
  as ``benchmarks/reexecute_programs.py`` does), its value put through the mechanical fixes
  (``metrics.finqa_python.FIXES``: they read the question, the program and its value, never the gold answer) and
  scored by the official comparison: execution accuracy and the failure classes before and after, per run. A
  replayed value that differs from the recorded one (before any fix) is reported: the replay is then not exact
  for that row (the row's recorded answer is kept as "before"). The issue replays the clean part, ``--questions
  61:150``, with the fixes frozen at a named commit.

    python experiments/finqa_python/finqa_python_failures.py benchmarks/results/finqa_python_1p5b --questions 1:60 [--show 20]
    python experiments/finqa_python/finqa_python_failures.py benchmarks/results/finqa_python_1p5b --questions 61:150 --replay
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter, defaultdict
from pathlib import Path

import knapsack_dspy  # noqa: F401  (first: LiteLLM then loads with its bundled model map, _env.py)
from knapsack_dspy.bench.results.row_outcomes import could_not_ask
from knapsack_dspy.bench.results.store import ResultsFileError, load_rows
from knapsack_dspy.bench.scoring.question_range import QuestionRangeError, questions_of_rows
from knapsack_dspy.bench.scoring.run_metrics import selector_label
from knapsack_dspy.docqa.data.loader import load_examples
from knapsack_dspy.docqa.metrics.answer_matching import finqa_exact_match
from knapsack_dspy.docqa.metrics.finqa_python import FAILURE_CLASSES, apply_fixes, failure_class
from knapsack_dspy.docqa.sandbox import execute_program

PIPELINE = "python_pot"


def python_rows(results_dir: Path, questions: str | None, data_dir=None) -> list:
    """The LM rows of the directory's FinQA Python runs (at positions ``questions`` of their order, if given)."""
    try:
        rows = [row for row in load_rows(results_dir) if row.spec.get("pipeline") == PIPELINE
                and row.spec.get("dataset") == "finqa" and not row.spec.get("selection_only")]
    except ResultsFileError as exc:
        sys.exit(f"finqa_python_failures: {exc}")
    if not rows:
        sys.exit(f"finqa_python_failures: no FinQA {PIPELINE} LM rows in {results_dir}")
    if questions:
        try:
            keep = questions_of_rows(rows, questions, data_dir=data_dir)
        except QuestionRangeError as exc:
            sys.exit(f"finqa_python_failures: --questions {exc}")
        rows = [row for row in rows if row.example_id in keep]
    return rows


def classify(rows, examples: dict, table_of=None) -> dict[str, dict]:
    """Per run label: ``{"rows", "right", "classes": Counter, "examples": {class: [(id, answer, gold)]},
    "could_not_ask"}`` over ``rows`` (``table_of(example)``: the table a program reads, default the whole
    table)."""
    out: dict[str, dict] = defaultdict(lambda: {"rows": 0, "right": 0, "could_not_ask": 0, "classes": Counter(),
                                                "examples": defaultdict(list)})
    for row in rows:
        tally = out[selector_label(row.spec)]
        tally["rows"] += 1
        if row.correct:
            tally["right"] += 1
            continue
        if could_not_ask(row):
            tally["could_not_ask"] += 1
            continue
        example = examples[row.example_id]
        table = table_of(example) if table_of else example.get("table")
        kind = failure_class(row.answer, example.get("answer"), program=row.output or "",
                             gold_program=example.get("program") or "", table=table)
        kind = kind or "right value judged wrong"  # correct False but the comparison accepts it: a stale score
        tally["classes"][kind] += 1
        tally["examples"][kind].append((row.example_id, row.answer, example.get("answer")))
    return out


def replay(rows, examples: dict, table_of) -> dict[str, dict]:
    """Per run label: execution accuracy and failure classes before / after the mechanical fixes, the fixes
    applied, the rows whose replayed value differs from the recorded one."""
    out: dict[str, dict] = defaultdict(lambda: {"rows": 0, "right before": 0, "right after": 0, "not exact": [],
                                                "fixes": Counter(), "gained": [], "lost": [],
                                                "classes before": Counter(), "classes after": Counter()})
    for row in rows:
        tally = out[selector_label(row.spec)]
        example = examples[row.example_id]
        tally["rows"] += 1
        gold, table = example.get("answer"), table_of(example)
        before = row.answer
        if could_not_ask(row) or not row.output:
            after, applied = before, []
        else:
            result = execute_program(row.output, table or None, kind="python")
            value = result.answer if result.ok else None
            if value != before and not (value is not None and before is not None
                                        and finqa_exact_match(value, before)):
                tally["not exact"].append((row.example_id, before, value))
            after, applied = apply_fixes(example.get("question") or "", row.output, before)
        right_before = bool(row.correct)
        right_after = after is not None and finqa_exact_match(after, gold) if applied else right_before
        tally["right before"] += right_before
        tally["right after"] += right_after
        tally["fixes"].update(applied)
        if right_after and not right_before:
            tally["gained"].append((row.example_id, before, after, gold, applied))
        if right_before and not right_after:
            tally["lost"].append((row.example_id, before, after, gold, applied))
        for when, answer, right in (("before", before, right_before), ("after", after, right_after)):
            if not right and not could_not_ask(row):
                kind = failure_class(answer, gold, program=row.output or "",
                                     gold_program=example.get("program") or "", table=table)
                tally[f"classes {when}"][kind or "right value judged wrong"] += 1
    return out


def _retrieved_tables(top_n_paragraphs: int | None):
    """The table a run showed the model for a question: the retriever's rows (``DocumentQA._retrieved``)."""
    from knapsack_dspy.docqa.pipelines.hybrid_retriever import HybridRetriever

    retriever = HybridRetriever(top_n_paragraphs=top_n_paragraphs)

    def table_of(example):
        table = list(example.get("table") or [])
        if not table:
            return table
        context = retriever(question=example["question"], table=table,
                            paragraphs=list(example.get("paragraphs") or []))
        return [table[i] for i in context.row_ids]
    return table_of


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results_dir", type=Path)
    parser.add_argument("--questions", metavar="FROM:TO", default=None,
                        help="only the questions at these positions of the runs' order (1:60 for the classes)")
    parser.add_argument("--replay", action="store_true", help="re-execute the programs through the mechanical fixes")
    parser.add_argument("--full-tables", action="store_true",
                        help="execute against the documents' whole tables, not the retrieved rows")
    parser.add_argument("--show", type=int, default=5, help="examples to list per class / changed rows per run")
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    rows = python_rows(args.results_dir, args.questions, args.data_dir)
    splits = sorted({row.spec["eval_split"] for row in rows})
    examples = {ex["id"]: ex for split in splits for ex in load_examples("finqa", split, data_dir=args.data_dir)}
    top_n = rows[0].spec.get("top_n_paragraphs", 3)
    table_of = (lambda example: example.get("table")) if args.full_tables else _retrieved_tables(top_n)
    where = f"questions {args.questions}" if args.questions else "all questions"
    if not args.replay:
        result = classify(rows, examples, table_of)
        for label, tally in sorted(result.items()):
            wrong = tally["rows"] - tally["right"]
            print(f"{label} ({where}): {tally['right']}/{tally['rows']} right; {wrong} wrong"
                  + (f", of which {tally['could_not_ask']} could not ask" if tally["could_not_ask"] else ""))
            for kind in FAILURE_CLASSES:
                print(f"  {kind:<26} {tally['classes'][kind]:>4}")
                for example_id, answer, gold in tally["examples"][kind][: args.show]:
                    print(f"      {example_id}: {answer!r} (exe_ans {gold!r})")
    else:
        result = replay(rows, examples, table_of)
        print(f"| run ({where}) | rows | EA before | EA after | fixes applied | gained / lost | replay not exact |")
        print("|---|---|---|---|---|---|---|")
        for label, tally in sorted(result.items()):
            n = tally["rows"] or 1
            fixes = ", ".join(f"{name} {count}" for name, count in sorted(tally["fixes"].items())) or "none"
            print(f"| {label} | {tally['rows']} | {100 * tally['right before'] / n:.1f} | "
                  f"{100 * tally['right after'] / n:.1f} | {fixes} | {len(tally['gained'])} / {len(tally['lost'])} | "
                  f"{len(tally['not exact'])} |")
        for label, tally in sorted(result.items()):
            print(f"\n{label}: failure classes before -> after")
            for kind in FAILURE_CLASSES:
                print(f"  {kind:<26} {tally['classes before'][kind]:>4} -> {tally['classes after'][kind]:<4}")
            for example_id, before, after, gold, applied in (tally["gained"] + tally["lost"])[: args.show]:
                print(f"    {example_id}: {before!r} -> {after!r} ({', '.join(applied)}; exe_ans {gold!r})")
            for example_id, before, value in tally["not exact"][: args.show]:
                print(f"    not exact: {example_id}: recorded {before!r}, replayed {value!r}")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
