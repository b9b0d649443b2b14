"""The RAG-CoT paper's Table 3 on SARA from a results directory: the three statute strategies with chain of thought.

Reads the rows of ``benchmarks/sara_rag_cot.toml`` (a run per strategy, ``spec["retrieval"]``) and prints, per
strategy: entailment accuracy with its 90 % interval bootstrapped by case group (a subsection's ``_pos`` / ``_neg``
twins resampled together: the rows' ``doc_id``), how often the model said "Entailment", how many twin pairs it told
apart (answered both, with opposite labels: the facts differ in one detail and the labels are opposite, so a model
that gives both twins one label is right on exactly one); each pair of strategies' paired difference on the cases
both answered, bootstrapped by group; the numerical cases by exact dollars, within 10 % and the SARA authors' rule
(within max(10 %, $5,000)). Only the cases every strategy answered are counted, so the rows compare like with like.

    python benchmarks/sara_table3.py benchmarks/results/sara_rag_cot_1p5b [--json OUT]
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from pathlib import Path

from knapsack_dspy.bench.results.store import ResultsFileError, load_rows
from knapsack_dspy.docqa.metrics.intervals import cluster_bootstrap_ci
from knapsack_dspy.docqa.metrics.paired import paired_comparison

STRATEGIES = ("mentioned_only", "entire_section", "references")
MAJORITY = 50.0


def read_rows(results_dir: Path) -> dict:
    """strategy -> case id -> row (LM runs only)."""
    try:
        rows = load_rows(results_dir)
    except ResultsFileError as exc:
        sys.exit(f"sara_table3: {exc}")
    out: dict[str, dict] = {}
    for row in rows:
        if row.spec.get("selection_only") or row.spec.get("dataset") != "sara":
            continue
        out.setdefault(row.spec.get("retrieval", ""), {})[row.example_id] = row
    return out


def shared_cases(by_strategy: dict, case_type: str) -> list[str]:
    missing = [s for s in STRATEGIES if s not in by_strategy]
    if missing:
        sys.exit(f"sara_table3: no SARA rows for {missing}")
    sets = [{i for i, r in by_strategy[s].items() if r.case_type == case_type} for s in STRATEGIES]
    return sorted(set.intersection(*sets))


def twins_told_apart(rows: dict, cases: list[str]) -> tuple[int, int]:
    """(pairs answered with opposite labels, pairs with both twins among ``cases``)."""
    groups: dict[str, list] = {}
    for case in cases:
        groups.setdefault(rows[case].doc_id or case, []).append(rows[case])
    pairs = [g for g in groups.values() if len(g) == 2]
    apart = sum(1 for a, b in pairs if a.answer in ("Entailment", "Contradiction")
                and b.answer in ("Entailment", "Contradiction") and a.answer != b.answer)
    return apart, len(pairs)


def entailment_summary(by_strategy: dict) -> dict:
    cases = shared_cases(by_strategy, "entailment")
    first = by_strategy[STRATEGIES[0]]
    groups = [first[c].doc_id or c for c in cases]  # a case's group is the same in every run
    out = {"n": len(cases), "groups": len(set(groups)), "strategies": {}, "differences": {}}
    if not cases:
        return out
    for strategy in STRATEGIES:
        rows = by_strategy[strategy]
        values = [100.0 * bool(rows[c].correct) for c in cases]
        low, high = cluster_bootstrap_ci(values, groups)
        apart, pairs = twins_told_apart(rows, cases)
        out["strategies"][strategy] = {
            "accuracy": sum(values) / len(values), "low": low, "high": high,
            "said_entailment": 100.0 * sum(rows[c].answer == "Entailment" for c in cases) / len(cases),
            "no_label": sum(rows[c].answer not in ("Entailment", "Contradiction") for c in cases),
            "twins_told_apart": apart, "twin_pairs": pairs,
            "prompt_tokens": sum(rows[c].prompt_tokens or 0 for c in cases) / len(cases)}
    for a, b in itertools.combinations(STRATEGIES, 2):
        ra, rb = by_strategy[a], by_strategy[b]
        comparison = paired_comparison({c: 100.0 * bool(ra[c].correct) for c in cases},
                                       {c: 100.0 * bool(rb[c].correct) for c in cases},
                                       groups=dict(zip(cases, groups, strict=True)))
        out["differences"][f"{a} - {b}"] = comparison.to_dict()
    return out


def numerical_summary(by_strategy: dict) -> dict:
    cases = shared_cases(by_strategy, "numerical")
    out = {"n": len(cases), "strategies": {}}
    for strategy in STRATEGIES:
        rows = [by_strategy[strategy][c] for c in cases]
        if not rows:
            continue
        out["strategies"][strategy] = {
            "exact": 100.0 * sum(bool(r.correct) for r in rows) / len(rows),
            "within_10pct": 100.0 * sum(bool(r.within_10pct) for r in rows) / len(rows),
            "authors_rule": 100.0 * sum(bool(r.authors_rule) for r in rows) / len(rows),
            "no_amount": sum(r.answer is None for r in rows)}
    return out


def render(result: dict) -> str:
    ent, num = result["entailment"], result["numerical"]
    lines = [f"### Entailment ({ent['n']} cases, {ent['groups']} groups; majority baseline {MAJORITY:.0f} %)", "",
             "| strategy | accuracy [90 % by group] | said Entailment | no label | twins told apart | prompt tokens |",
             "|---|---|---|---|---|---|"]
    for strategy, s in ent["strategies"].items():
        lines.append(f"| {strategy} | {s['accuracy']:.1f} [{s['low']:.1f}, {s['high']:.1f}] | "
                     f"{s['said_entailment']:.1f} % | {s['no_label']} | {s['twins_told_apart']} / {s['twin_pairs']} | "
                     f"{s['prompt_tokens']:.0f} |")
    if ent["differences"]:
        lines += ["", "| difference | points [90 % by group] | wins / losses |", "|---|---|---|"]
        for name, d in ent["differences"].items():
            lines.append(f"| {name} | {d['difference']:+.1f} [{d['cluster_low']:+.1f}, {d['cluster_high']:+.1f}] | "
                         f"{d['wins']} / {d['losses']} |")
    lines += ["", f"### Numerical ({num['n']} cases)", "",
              "| strategy | exact $ | within 10 % | authors' rule | no amount |", "|---|---|---|---|---|"]
    for strategy, s in num["strategies"].items():
        lines.append(f"| {strategy} | {s['exact']:.1f} | {s['within_10pct']:.1f} | {s['authors_rule']:.1f} | "
                     f"{s['no_amount']} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("results", type=Path, help="the results directory of benchmarks/sara_rag_cot.toml")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures as JSON")
    args = parser.parse_args(argv)
    by_strategy = read_rows(args.results)
    result = {"entailment": entailment_summary(by_strategy), "numerical": numerical_summary(by_strategy)}
    print(render(result))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
