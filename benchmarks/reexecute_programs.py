"""Re-run the programs recorded in a bench results directory with the current executor (no LM calls).

A model-free way to see what an executor change does to a finished run: every row's recorded program is
executed again against the table the model saw (the retriever's rows, as in the run) and re-scored. Rows
record only the *final* program (after the one repair attempt), so this estimates the change: a failure
that now executes might also have spared the repair call.

    python benchmarks/reexecute_programs.py benchmarks/results/embedded_seer_kate_random [--show 10]
"""

from __future__ import annotations

import argparse
import collections
from pathlib import Path

import knapsack_dspy  # noqa: F401  (first: LiteLLM then loads with its bundled model map, _env.py)
from knapsack_dspy.bench.results.store import ResultsFileError, load_rows, rows_file
from knapsack_dspy.bench.scoring.example_scores import score_prediction
from knapsack_dspy.docqa.data.loader import load_examples
from knapsack_dspy.docqa.sandbox import execute_program


def _rows(results_dir: Path) -> list:
    try:
        path = rows_file(results_dir)  # predictions.jsonl, or the committed .xz / .gz
        if not path.is_file():
            raise SystemExit(f"error: {path} does not exist")
        return load_rows(path)
    except ResultsFileError as exc:
        raise SystemExit(f"error: {exc}") from None


def _retrieved_table(retriever, example) -> list[list[str]]:
    table = list(example.get("table") or [])
    if retriever is None or not table:
        return table
    context = retriever(question=example["question"], table=table, paragraphs=list(example.get("paragraphs") or []))
    return [table[i] for i in context.row_ids]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results_dir", type=Path)
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--show", type=int, default=10, help="changed rows to print")
    parser.add_argument("--full-tables", action="store_true",
                        help="execute against the documents' whole tables, not the retrieved rows")
    args = parser.parse_args(argv)
    rows = [row for row in _rows(args.results_dir)
            if row.spec.get("pipeline") == "pot" and row.spec.get("dataset") == "tatqa"]
    if not rows:
        raise SystemExit("error: no TAT-QA program-of-thought rows in that directory")
    splits = {row.spec["eval_split"] for row in rows}
    examples = {ex["id"]: ex for split in splits for ex in load_examples("tatqa", split, data_dir=args.data_dir)}
    retriever = None
    if not args.full_tables:
        from knapsack_dspy.docqa.pipelines.hybrid_retriever import HybridRetriever

        retriever = HybridRetriever()
    counts: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    shown = 0
    for row in rows:
        selector = row.spec["selector"]
        example = examples.get(row.example_id)
        program = row.output
        if example is None or not program or (row.error or "").startswith("LM "):
            counts[selector]["skipped"] += 1
            continue
        result = execute_program(program, _retrieved_table(retriever, example))
        prediction = argparse.Namespace(answer=result.answer if result.ok else None,
                                        scale=(result.scale or "") if result.ok else "")
        rescored = score_prediction(example, prediction)
        tally = counts[selector]
        tally["rows"] += 1
        tally["em_before"] += row.em or 0.0
        tally["em_after"] += rescored["em"]
        tally["errors_before"] += bool(row.error)
        tally["errors_after"] += not result.ok
        if row.error and result.ok:
            tally["now_execute"] += 1
            tally["now_correct"] += rescored["em"] == 1.0
            if shown < args.show:
                shown += 1
                print(f"[{selector}] {row.example_id}: was {row.error[:90]!r}\n"
                      f"    now {result.answer!r} {result.scale or ''} (gold {row.gold!r}) em={rescored['em']}")
        elif not row.error and not result.ok:
            tally["now_fail"] += 1
    print(f"\n{'selector':<10} {'rows':>5} {'errors before':>14} {'after':>6} {'now execute':>12} "
          f"{'now correct':>12} {'now fail':>9} {'EM before':>10} {'EM after':>9}")
    for selector, tally in sorted(counts.items()):
        n = tally["rows"] or 1
        print(f"{selector:<10} {tally['rows']:>5} {tally['errors_before']:>14} {tally['errors_after']:>6} "
              f"{tally['now_execute']:>12} {tally['now_correct']:>12} {tally['now_fail']:>9} "
              f"{100 * tally['em_before'] / n:>10.1f} {100 * tally['em_after'] / n:>9.1f}"
              + (f"   ({tally['skipped']} LM-error rows skipped)" if tally["skipped"] else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
