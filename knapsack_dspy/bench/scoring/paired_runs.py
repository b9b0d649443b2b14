"""Paired comparison of one selector's rows in two results directories: the same questions, EM and F1.

For two runs of the same questions made by different code (e.g. the answer-quality run against the recorded
embedded run): per pair ``A_SELECTOR:B_SELECTOR`` the questions both directories answered, EM and F1 of each, the
difference with its 90 % paired-bootstrap interval, better / worse counts and McNemar's exact p (EM). No LM.

    python benchmarks/compare_runs.py benchmarks/results/answer_quality_1p5b \\
        benchmarks/results/embedded_seer_kate_random --pairs seer:seer kate:kate

By default every pair is restricted to the questions every selector of directory A has answered (a run still
growing compares the same questions throughout); ``--all-shared`` takes every question the two selectors share.
``--questions 61:120`` keeps the questions at those positions (1-based, inclusive) of the eval split of A's rows,
in the order their run answered it (the suite's ``order_seed``, if any), e.g. the ones an analysis did not read;
one directory twice compares two of its selectors.
(``benchmarks/compare_runs.py`` runs :func:`main`.)
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from knapsack_dspy.bench.results.store import ResultsFileError, load_rows, rows_file
from knapsack_dspy.bench.scoring.question_range import QuestionRangeError, questions_of_rows
from knapsack_dspy.docqa.metrics.paired import paired_comparison


def scores(results_dir: Path) -> dict[str, dict[str, dict[str, float]]]:
    """selector -> metric ("em", "f1") -> question id -> score, from ``predictions.jsonl`` (or ``.xz`` / ``.gz``)."""
    out: dict[str, dict[str, dict[str, float]]] = {}
    for row in _rows(results_dir):
        by_metric = out.setdefault(row.spec["selector"], {"em": {}, "f1": {}})
        by_metric["em"][row.example_id] = float(row.em or 0.0)
        by_metric["f1"][row.example_id] = float(row.f1 or 0.0)
    return out


def _rows(results_dir: Path) -> list:
    try:
        if not rows_file(results_dir).is_file():  # predictions.jsonl, or the committed .xz / .gz
            sys.exit(f"compare_runs: no predictions.jsonl (nor .xz / .gz) in {results_dir}")
        return load_rows(results_dir)
    except ResultsFileError as exc:
        sys.exit(f"compare_runs: {exc}")


def split_positions(results_dir: Path, spec: str) -> set[str]:
    """The ids of the questions at positions ``FROM:TO`` (1-based, inclusive) of the eval split of the rows, in
    the order their run answered it (``order_seed``, ``example_ids``)."""
    try:
        return questions_of_rows(_rows(results_dir), spec)
    except QuestionRangeError as exc:
        sys.exit(f"compare_runs: --questions {exc}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="compare_runs.py", description=__doc__.split("\n")[0])
    parser.add_argument("dir_a", type=Path)
    parser.add_argument("dir_b", type=Path)
    parser.add_argument("--pairs", nargs="+", required=True, help="A_SELECTOR:B_SELECTOR ...")
    parser.add_argument("--all-shared", action="store_true",
                        help="every question the two selectors share (default: only the questions every selector "
                             "of dir_a answered)")
    parser.add_argument("--questions", metavar="FROM:TO",
                        help="only the questions at these positions of the eval split, in the order the run "
                             "answered it (1-based, inclusive)")
    args = parser.parse_args(argv)
    a, b = scores(args.dir_a), scores(args.dir_b)
    common = None if args.all_shared or not a else set.intersection(*(set(m["em"]) for m in a.values()))
    if args.questions:
        chosen = split_positions(args.dir_a, args.questions)
        common = chosen if common is None else common & chosen
    print("| A − B | n | EM A | EM B | EM difference [90 %] | better / worse | McNemar p | F1 difference [90 %] |")
    print("|---|---|---|---|---|---|---|---|")
    for pair in args.pairs:
        sel_a, _, sel_b = pair.partition(":")
        if sel_a not in a or sel_b not in b:
            sys.exit(f"compare_runs: {pair!r}: selector {sel_a if sel_a not in a else sel_b!r} not in "
                     f"{args.dir_a if sel_a not in a else args.dir_b}")
        keep = (lambda d: {k: v for k, v in d.items() if k in common}) if common is not None else dict
        em = paired_comparison(keep(a[sel_a]["em"]), b[sel_b]["em"])
        f1 = paired_comparison(keep(a[sel_a]["f1"]), b[sel_b]["f1"])
        p = "–" if em.mcnemar_p is None else f"{em.mcnemar_p:.2f}"
        print(f"| {sel_a} − {sel_b} | {em.n} | {100 * em.mean_a:.1f} | {100 * em.mean_b:.1f} | "
              f"{100 * em.difference:+.1f} [{100 * em.low:+.1f}, {100 * em.high:+.1f}] | {em.wins} / {em.losses} | "
              f"{p} | {100 * f1.difference:+.1f} [{100 * f1.low:+.1f}, {100 * f1.high:+.1f}] |")
    return 0
