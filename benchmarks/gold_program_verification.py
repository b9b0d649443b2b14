"""Share of pool records whose synthesised gold Python program is verified strictly.

For every record it writes the SEER-style program a demo shows (see ``knapsack_dspy.docqa.data.gold_programs``),
runs it in the sandbox, compares the result with the gold answer, and applies the strict checks of
``knapsack_dspy.docqa.data.gold_program_checks`` (structural rules on the derivation, perturbation of the cells
read); a candidate that gives the gold answer by coincidence is rejected (the next candidate, else the
literal-answer program).

    python benchmarks/gold_program_verification.py [--dataset tatqa] [--split dev_pool] [--failures 10]
    python benchmarks/gold_program_verification.py --dump programs.json       # id -> code of each record
    python benchmarks/gold_program_verification.py --audit programs.json      # the strict checks on those programs

``--audit`` reads a JSON object ``{record id: program}`` (e.g. the ``--dump`` of another commit) and lists
the programs the strict checks reject, by kind: how the coincidental gold programs of a commit are counted.
"""

from __future__ import annotations

import argparse
import json
import time
from collections import Counter

import knapsack_dspy  # noqa: F401  (first: LiteLLM then loads with its bundled model map, _env.py)
from knapsack_dspy.docqa.data.gold_program_checks import (
    finding_kind,
    perturbation_finding,
    structural_findings,
)
from knapsack_dspy.docqa.data.gold_programs import synthesise_python_program, verification_report
from knapsack_dspy.docqa.data.loader import load_examples


def audit(examples, programs: dict, *, show: int) -> int:
    """Prints the strict checks' findings on ``programs`` (id -> code); returns the number rejected."""
    by_id = {example.get("id"): example for example in examples}
    unknown = sorted(set(programs) - set(by_id))
    if unknown:
        raise SystemExit(f"--audit: {len(unknown)} ids are not in the split, e.g. {unknown[0]!r}")
    kinds: Counter = Counter()
    rejected = []
    for record_id, code in programs.items():
        example = by_id[record_id]
        findings = structural_findings(code, example)
        moved = perturbation_finding(code, example)
        findings += [moved] if moved else []
        if findings:
            rejected.append((record_id, findings))
            kinds.update({finding_kind(f) for f in findings})
    print(f"audit: {len(rejected)}/{len(programs)} programs rejected by the strict checks")
    for kind, n in sorted(kinds.items()):
        print(f"  {kind:<36} {n:>4}")
    for record_id, findings in rejected[:show]:
        print(f"  {record_id}: {'; '.join(findings)}")
    return len(rejected)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="tatqa", help="tatqa or finqa_cases (FinQA questions + programs)")
    parser.add_argument("--split", default="dev_pool")
    parser.add_argument("--path", default=None, help="a file in the dataset's own schema instead of a split")
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--failures", type=int, default=10, help="failures / rejections to list")
    parser.add_argument("--dump", default=None, help="write {record id: gold program} to this JSON file")
    parser.add_argument("--audit", default=None, help="check the programs of this JSON file instead")
    args = parser.parse_args(argv)
    examples = load_examples(args.dataset, args.split, data_dir=args.data_dir, path=args.path)
    if args.audit:
        with open(args.audit, encoding="utf-8") as handle:
            audit(examples, json.load(handle), show=args.failures)
        return 0
    started = time.perf_counter()
    report = verification_report(examples)
    seconds = time.perf_counter() - started
    print(f"{args.dataset}/{args.split}: {report['verified']}/{report['total']} verified strictly "
          f"({100 * report['share']:.1f} %) in {seconds:.2f} s")
    for answer_type, row in sorted(report["by_answer_type"].items()):
        share = 100 * row["verified"] / row["total"]
        print(f"  {answer_type:<11} {row['verified']:>5}/{row['total']:<5} ({share:.1f} %)")
    print(f"  verified arithmetic/FinQA programs with table look-ups: {report['table_lookups']}, "
          f"with text variables: {report['text_variables']}")
    print("  by source:", json.dumps(report["by_source"], sort_keys=True))
    coincidental = report["coincidental"]
    print(f"  records with a candidate rejected as coincidental: {coincidental['records']} "
          f"(left with the literal program: {coincidental['fell_back']})")
    for kind, n in sorted(coincidental["by_kind"].items()):
        print(f"    {kind:<36} {n:>4}")
    for record_id in coincidental["ids"][: args.failures]:
        print(f"    rejected a candidate: {record_id}")
    for record_id, reason in report["failures"][: args.failures]:
        print(f"  not verified: {record_id}: {reason}")
    if args.dump:
        programs = {example.get("id"): synthesise_python_program(example).code for example in examples}
        with open(args.dump, "w", encoding="utf-8") as handle:
            json.dump(programs, handle, indent=1, ensure_ascii=False)
        print(f"  wrote {len(programs)} programs to {args.dump}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
