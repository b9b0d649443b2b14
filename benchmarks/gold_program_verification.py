"""Share of pool records whose synthesised gold Python program reproduces the gold answer.

For every record it writes the SEER-style program a demo shows (see
``knapsack_dspy.data.gold_programs``), runs it in the sandbox and compares the result with
the gold answer (and scale); records that do not verify fall back to a literal-answer program.

    python benchmarks/gold_program_verification.py [--dataset tatqa] [--split dev_pool] [--failures 10]
"""

from __future__ import annotations

import argparse
import json
import time

import knapsack_dspy  # noqa: F401  (environment defaults first)
from knapsack_dspy.data.gold_programs import verification_report
from knapsack_dspy.data.loader import load_examples


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="tatqa", help="tatqa or finqa_cases (FinQA questions + programs)")
    parser.add_argument("--split", default="dev_pool")
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--failures", type=int, default=10, help="failures to list")
    args = parser.parse_args(argv)
    examples = load_examples(args.dataset, args.split, data_dir=args.data_dir)
    started = time.perf_counter()
    report = verification_report(examples)
    seconds = time.perf_counter() - started
    print(f"{args.dataset}/{args.split}: {report['verified']}/{report['total']} verified "
          f"({100 * report['share']:.1f} %) in {seconds:.2f} s")
    for answer_type, row in sorted(report["by_answer_type"].items()):
        share = 100 * row["verified"] / row["total"]
        print(f"  {answer_type:<11} {row['verified']:>5}/{row['total']:<5} ({share:.1f} %)")
    print(f"  verified arithmetic/FinQA programs with table look-ups: {report['table_lookups']}, "
          f"with text variables: {report['text_variables']}")
    print("  by source:", json.dumps(report["by_source"], sort_keys=True))
    for record_id, reason in report["failures"][: args.failures]:
        print(f"  not verified: {record_id}: {reason}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
