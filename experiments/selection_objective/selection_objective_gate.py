"""The selection-objective gate (issue 24): the new selector against its greedy, KATE within budget, SEER and no
demos, with the model, paired and bootstrapped by document, pooled over TAT-QA and FinQA and per data set.

Reads the rows of the TAT-QA run (``benchmarks/selection_objective.toml``: EM by TAT-QA's official metric) and the
FinQA run (``benchmarks/finqa_tune.toml``'s document-pool group at the whole-prompt budget: execution accuracy by
the official FinQA evaluation, the rows' ``correct``), keeps the questions every selector answered, and reports per
data set and pooled: each selector's score and mean prompt tokens, and the new selector minus each other one with
the 90 % interval bootstrapped by document (a TAT-QA table, a FinQA page). The gate, as the issue states it:

- non-inferior to KATE within budget: pooled point estimate >= 0 and lower 90 % bound >= -2 points;
- and either superior (lower bound > 0) or at <= 80 % of KATE within budget's mean prompt tokens;
- and ahead of no demos and of its own greedy (point estimates).

    python experiments/selection_objective/selection_objective_gate.py benchmarks/results/selection_objective_1p5b \\
        benchmarks/results/finqa_tune_1p5b [--finqa-questions 61:150] [--finqa-pool docs_pool] [--json OUT]
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

NEW = "case_coverage"
GREEDY = "case_coverage greedy"
OTHERS = (GREEDY, "kate_within_budget", "seer", "no_demos")
NON_INFERIORITY_MARGIN = -2.0
TOKEN_SHARE = 0.80


def read_scores(results_dir: Path, dataset: str, questions: str | None = None, budget: int | None = None,
                pool: str | None = None) -> dict:
    """label -> {"score": {question: 0/1}, "tokens": {question: prompt tokens}, "doc": {question: document}} of the
    answered rows (an LM failure counts as wrong, as in the reports) of the runs at the whole-prompt ``budget``
    without an exemplar budget, drawing on the ``pool`` split (all pools if None); ``questions`` (``FROM:TO``): only
    those positions of the order the runs answered their eval split in (the suite's ``order_seed``). Two runs left
    for one selector (e.g. two pools) are an error, not a silent pick."""
    try:
        rows = [row for row in load_rows(results_dir) if not (
            row.spec.get("selection_only") or row.spec.get("exemplar_budget")
            or (budget and row.spec.get("budget") != budget) or (pool and row.spec.get("pool_split") != pool))]
    except ResultsFileError as exc:
        sys.exit(f"selection_objective_gate: {exc}")
    if not rows:
        sys.exit(f"selection_objective_gate: no {dataset} rows answered at budget {budget}"
                 + (f" from pool {pool!r}" if pool else "") + f" in {results_dir}")
    runs: dict[str, set] = {}
    for row in rows:
        runs.setdefault(selector_label(row.spec), set()).add((row.run, row.spec.get("pool_split")))
    for label, keys in runs.items():
        if len(keys) > 1:
            pools = {pool_split for _run, pool_split in keys}
            hint = "; name the pool (--finqa-pool)" if dataset == "finqa" and len(pools) > 1 else ""
            sys.exit(f"selection_objective_gate: {results_dir} has {len(keys)} runs of {label} at budget {budget} "
                     f"({', '.join(sorted(run for run, _pool in keys))}){hint}")
    keep = None
    if questions:
        try:
            keep = questions_of_rows(rows, questions)
        except QuestionRangeError as exc:
            sys.exit(f"selection_objective_gate: --finqa-questions {exc}")
    out: dict[str, dict] = {}
    for row in rows:
        spec = row.spec
        if keep is not None and row.example_id not in keep:
            continue
        entry = out.setdefault(selector_label(spec), {"score": {}, "tokens": {}, "doc": {}})
        key = f"{dataset}:{row.example_id}"
        score = row.em if dataset == "tatqa" else row.correct
        entry["score"][key] = float(bool(score))
        entry["tokens"][key] = float(row.prompt_tokens or 0)
        entry["doc"][key] = f"{dataset}:{row.doc_id or row.example_id}"
    return out


def shared_questions(scores: dict) -> set[str]:
    labels = [NEW, *OTHERS]
    missing = [label for label in labels if label not in scores]
    if missing:
        sys.exit(f"selection_objective_gate: no rows for {missing}")
    shared = set.intersection(*(set(scores[label]["score"]) for label in labels))
    return shared


def summary(scores: dict, questions: set[str]) -> dict:
    """Per selector: score (%) and mean prompt tokens; per other selector: the new one minus it."""
    groups = {q: scores[NEW]["doc"][q] for q in questions}
    out = {"n": len(questions), "documents": len(set(groups.values())), "selectors": {}, "differences": {}}
    for label in (NEW, *OTHERS):
        values = [scores[label]["score"][q] for q in questions]
        tokens = [scores[label]["tokens"][q] for q in questions]
        out["selectors"][label] = {"score": 100.0 * sum(values) / max(len(values), 1),
                                   "prompt_tokens": sum(tokens) / max(len(tokens), 1)}
    new = {q: 100.0 * scores[NEW]["score"][q] for q in questions}
    for label in OTHERS:
        other = {q: 100.0 * scores[label]["score"][q] for q in questions}
        out["differences"][label] = paired_comparison(new, other, groups=groups).to_dict()
    return out


def gate(pooled: dict) -> dict:
    kate = pooled["differences"]["kate_within_budget"]
    tokens = pooled["selectors"][NEW]["prompt_tokens"] / pooled["selectors"]["kate_within_budget"]["prompt_tokens"]
    non_inferior = kate["difference"] >= 0 and kate["cluster_low"] >= NON_INFERIORITY_MARGIN
    superior = kate["cluster_low"] > 0
    return {"non_inferior": non_inferior, "superior": superior, "token_share": tokens,
            "cheaper": tokens <= TOKEN_SHARE,
            "ahead_of_no_demos": pooled["differences"]["no_demos"]["difference"] > 0,
            "ahead_of_greedy": pooled["differences"][GREEDY]["difference"] > 0,
            "passed": non_inferior and (superior or tokens <= TOKEN_SHARE)
            and pooled["differences"]["no_demos"]["difference"] > 0 and pooled["differences"][GREEDY]["difference"] > 0}


def table(name: str, part: dict) -> str:
    lines = [f"### {name} ({part['n']} questions, {part['documents']} documents)", "",
             "| selector | score | prompt tokens | new − selector [90 % by document] | wins / losses |",
             "|---|---|---|---|---|"]
    for label in (NEW, *OTHERS):
        s = part["selectors"][label]
        d = part["differences"].get(label)
        diff = "–" if d is None else (f"{d['difference']:+.1f} [{d['cluster_low']:+.1f}, {d['cluster_high']:+.1f}]")
        wl = "–" if d is None else f"{d['wins']} / {d['losses']}"
        lines.append(f"| {label} | {s['score']:.1f} | {s['prompt_tokens']:.0f} | {diff} | {wl} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("tatqa", type=Path, help="the TAT-QA results directory (selection_objective.toml)")
    parser.add_argument("finqa", type=Path, help="the FinQA results directory (finqa_tune.toml)")
    parser.add_argument("--finqa-questions", default=None, metavar="FROM:TO",
                        help="FinQA questions at these positions of the suite's order only (61:150: the clean part)")
    parser.add_argument("--budget", type=int, default=2048, help="the whole-prompt budget of the runs compared")
    parser.add_argument("--finqa-pool", default="docs_pool",
                        help="the FinQA runs' pool split (docs_pool: the document pool, the gate's; train: the cases)")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures as JSON")
    args = parser.parse_args(argv)
    tatqa = read_scores(args.tatqa, "tatqa", budget=args.budget)
    finqa = read_scores(args.finqa, "finqa", questions=args.finqa_questions, budget=args.budget,
                        pool=args.finqa_pool)
    parts = {"TAT-QA (EM)": (tatqa, shared_questions(tatqa)), "FinQA (execution accuracy)": (finqa,
                                                                                             shared_questions(finqa))}
    pooled_scores = {label: {field: {**tatqa[label][field], **finqa[label][field]} for field in ("score", "tokens",
                                                                                                 "doc")}
                     for label in (NEW, *OTHERS)}
    pooled_questions = parts["TAT-QA (EM)"][1] | parts["FinQA (execution accuracy)"][1]
    result = {"pooled": summary(pooled_scores, pooled_questions),
              **{name: summary(s, q) for name, (s, q) in parts.items()}}
    result["gate"] = gate(result["pooled"])
    print(table("Pooled", result["pooled"]))
    for name in parts:
        print()
        print(table(name, result[name]))
    g = result["gate"]
    print(f"\nGate: non-inferior to KATE within budget {g['non_inferior']}; superior {g['superior']}; prompt tokens "
          f"{100 * g['token_share']:.1f} % of KATE within budget's ({'<=' if g['cheaper'] else '>'} 80 %); ahead of "
          f"no demos {g['ahead_of_no_demos']}; ahead of its greedy {g['ahead_of_greedy']} -> "
          f"{'PASSED' if g['passed'] else 'NOT PASSED'}")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
