"""FinQA under SEER's tight budget (issue 26): the runs with an exemplar budget (SEER's L), with the model, compared
with KATE within budget on the questions every one of them answered.

Reads the rows of ``benchmarks/finqa_tune.toml``'s tight group (``exemplar_budget`` = 1,024): per selector the
execution accuracy (the official FinQA evaluation, the rows' ``correct``; an LM failure counts as wrong), the program
accuracy (over the rows where it is defined), the mean exemplars and prompt tokens; then each selector minus KATE
within budget with the 90 % interval bootstrapped by page (a page's questions resampled together), wins and losses.
The issue's aim: SEER or the new selector ahead of KATE within budget with the lower bound above 0.

    python experiments/finqa_tight_budget/finqa_tight_budget.py benchmarks/results/finqa_tune_1p5b [--questions 61:150] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from knapsack_dspy.bench.results.store import ResultsFileError, load_rows
from knapsack_dspy.bench.scoring.question_range import QuestionRangeError, questions_of_rows
from knapsack_dspy.bench.scoring.run_metrics import selector_label
from knapsack_dspy.docqa.metrics.paired import paired_comparison

REFERENCE = "kate_within_budget"


def tight_rows(results_dir: Path, exemplar_budget: int | None = None) -> list:
    """The LM rows of the runs with an exemplar budget (that one, if given); one run per selector."""
    try:
        rows = [row for row in load_rows(results_dir)
                if row.spec.get("exemplar_budget") and not row.spec.get("selection_only")
                and (exemplar_budget is None or row.spec.get("exemplar_budget") == exemplar_budget)]
    except ResultsFileError as exc:
        sys.exit(f"finqa_tight_budget: {exc}")
    if not rows:
        sys.exit("finqa_tight_budget: no LM rows with an exemplar budget"
                 + (f" of {exemplar_budget}" if exemplar_budget else "") + f" in {results_dir}")
    runs: dict[str, dict] = {}
    for row in rows:
        runs.setdefault(run_label(row.spec), {})[row.run] = row.spec.get("exemplar_budget")
    for label, keys in runs.items():
        if len(keys) > 1:
            hint = ("; name the exemplar budget (--exemplar-budget)" if len(set(keys.values())) > 1
                    else "; keep one run of it in the directory")
            sys.exit(f"finqa_tight_budget: {results_dir} has {len(keys)} runs of {label} with an exemplar budget "
                     f"({', '.join(sorted(keys))}){hint}")
    return rows


def run_label(spec: dict) -> str:
    """The selector a run stands for (``selector_label``), with its pool when that is not the document pool."""
    pool = spec.get("pool_split")
    return selector_label(spec) if pool in (None, "", "docs_pool") else f"{selector_label(spec)} ({pool})"


def summary(rows: list, questions: str | None = None) -> dict:
    """Per selector: execution and program accuracy (%), mean exemplars and prompt tokens on the questions every
    selector answered; per selector other than KATE within budget: it minus KATE within budget."""
    if questions:
        try:
            keep = questions_of_rows(rows, questions)
        except QuestionRangeError as exc:
            sys.exit(f"finqa_tight_budget: --questions {exc}")
        answered = len({row.example_id for row in rows})
        rows = [row for row in rows if row.example_id in keep]
        if not rows:
            sys.exit(f"finqa_tight_budget: no row at positions {questions} (the runs answered {answered} questions)")
    by_selector: dict[str, dict] = {}
    for row in rows:
        by_selector.setdefault(run_label(row.spec), {})[row.example_id] = row
    if REFERENCE not in by_selector:
        sys.exit(f"finqa_tight_budget: no {REFERENCE} rows to compare with ({', '.join(sorted(by_selector))})")
    shared = set.intersection(*(set(answered) for answered in by_selector.values()))
    if not shared:
        sys.exit("finqa_tight_budget: no question answered by every selector")
    groups = {q: by_selector[REFERENCE][q].doc_id or q for q in shared}
    out = {"n": len(shared), "pages": len(set(groups.values())), "questions": questions,
           "exemplar_budgets": sorted({row.spec.get("exemplar_budget") for row in rows}), "selectors": {},
           "differences": {}}
    for selector, answered in sorted(by_selector.items()):
        chosen = [answered[q] for q in sorted(shared)]
        programs = [bool(r.program_correct) for r in chosen if r.program_correct is not None]
        selected = [r for r in chosen if r.prompt_tokens is not None]  # a failed selection measured nothing
        out["selectors"][selector] = {
            "execution_accuracy": 100.0 * sum(bool(r.correct) for r in chosen) / len(chosen),
            "program_accuracy": 100.0 * sum(programs) / len(programs) if programs else None,
            "exemplars": sum(len(r.exemplar_ids) for r in selected) / len(selected) if selected else None,
            "prompt_tokens": sum(r.prompt_tokens for r in selected) / len(selected) if selected else None}
    reference = {q: 100.0 * bool(by_selector[REFERENCE][q].correct) for q in shared}
    for selector, answered in sorted(by_selector.items()):
        if selector != REFERENCE:
            mine = {q: 100.0 * bool(answered[q].correct) for q in shared}
            out["differences"][selector] = paired_comparison(mine, reference, groups=groups).to_dict()
    return out


def table(part: dict) -> str:
    lines = [f"FinQA, exemplar budget {'/'.join(map(str, part['exemplar_budgets']))}"
             f"{', questions ' + part['questions'] if part['questions'] else ''}: {part['n']} questions on "
             f"{part['pages']} pages", "",
             f"| selector | execution accuracy | program accuracy | exemplars | prompt tokens "
             f"| − {REFERENCE} [90 % by page] | wins / losses |", "|---|---|---|---|---|---|---|"]
    for selector, s in part["selectors"].items():
        d = part["differences"].get(selector)
        diff = "–" if d is None else f"{d['difference']:+.1f} [{d['cluster_low']:+.1f}, {d['cluster_high']:+.1f}]"
        wins = "–" if d is None else f"{d['wins']} / {d['losses']}"
        pa = "–" if s["program_accuracy"] is None else f"{s['program_accuracy']:.1f}"
        exemplars = "–" if s["exemplars"] is None else f"{s['exemplars']:.2f}"
        tokens = "–" if s["prompt_tokens"] is None else f"{s['prompt_tokens']:.0f}"
        lines.append(f"| {selector} | {s['execution_accuracy']:.1f} | {pa} | {exemplars} | {tokens} | {diff} "
                     f"| {wins} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("results", type=Path, help="the FinQA results directory (finqa_tune.toml)")
    parser.add_argument("--questions", default=None, metavar="FROM:TO",
                        help="only the questions at these positions of the suite's order (61:150: the clean part)")
    parser.add_argument("--exemplar-budget", type=int, default=None,
                        help="the runs with this exemplar budget (default: the only one there is)")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures as JSON")
    args = parser.parse_args(argv)
    result = summary(tight_rows(args.results, args.exemplar_budget), args.questions)
    print(table(result))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
