"""Demos and evidence under one budget, measured without a language model (issue 49, item 3).

    python benchmarks/whole_prompt_selection.py                               # TAT-QA dev_pool_fold0, five arms
    python benchmarks/whole_prompt_selection.py --dataset finqa               # FinQA dev_docs_pool, python_pot
    python benchmarks/whole_prompt_selection.py --weights 0.25,0.5,1,2,4      # + the exchange-rate fit
    python benchmarks/whole_prompt_selection.py --limit 150 --seed 0 --json out.json

**Cross-fitted on one pool split.** The split (TAT-QA ``dev_pool_fold0``, FinQA ``dev_docs_pool``; never an eval
split: ``dev_tune`` / ``dev_docs_tune`` are refused) is cut in two halves by document (:func:`document_half`: a salted
hash of the document id, independent of the folds); each half's questions select their demos from a program compiled
on the other half (its pool, router and classifiers), so no question sees its own document or its own half.
``--limit`` samples that many questions of each half (seeded; all by default).

**The arms** (the task's default pipeline as the bench builds it -- TAT-QA: the routed ``pot`` with its demos cut to
their gold rows and paragraphs; FinQA: ``python_pot`` --, ``priced_case_coverage``, M = 4, at each ``--budgets``):

- ``rules``: today's pipeline (``evidence_selection="rules"``: the top 3 paragraphs, the whole table unless long);
- ``relevance``: the document offered as pieces (``evidence_selection="knapsack"``), today's demos, then the pieces by
  relevance while they fit (``evidence="relevance"``);
- ``sequential``: today's demos, then the pieces by a knapsack (``evidence="sequential"``);
- ``joint_greedy``: demos and pieces in one knapsack, its greedy (``evidence="joint", evidence_solver="greedy"``);
- ``joint_exact``: the same knapsack solved exactly (``evidence="joint"``, the milp).

``--weights``: ``joint_exact`` again at each ``evidence_weight`` of the grid (the exchange rate of a piece's value with
a demo's), at every budget.

**Per arm and budget**: gold-evidence recall -- the share of the rows and paragraphs the gold solution reads that the
prompt shows (TAT-QA: ``data.tatqa_evidence``, the rows its derivation reads and its evidence paragraphs, over the
questions where either is known; FinQA: ``data.program_evidence``, the rows and sentences its program's numbers come
from) --, the gold-case hit (an exemplar whose gold program is >= 0.9 similar: ``metrics.selection_quality``), each
with a 90 % interval by document (the documents resampled: ``metrics.intervals.cluster_bootstrap_ci``) and by gold
answer type; the mean prompt tokens and the part after the instructions; demos and pieces per prompt. Between arms
(the same questions): the share where the exact and the greedy joint choices differ (demos or pieces) and their mean
objective gap (exact - greedy: the demos' value in the selector's knapsack plus the pieces' value), the share where
the joint and the sequential choices differ, and paired recall differences with their interval by document
(``metrics.paired``). The instructions' sha256 of every arm's prompt is compared per question: they must be the same.

Token counts: the embedded 1.5B's tokenizer (``local/qwen2.5-coder-1.5b-instruct``; counted in process, the 0.5B's
server checking the chat template, no generation). Prints Markdown tables; ``--json`` writes every figure.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import sys
import time
import warnings
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from knapsack_dspy.docqa.data import load_examples
from knapsack_dspy.docqa.data.program_evidence import program_evidence
from knapsack_dspy.docqa.data.tatqa_evidence import derivation_rows, evidence_sentences
from knapsack_dspy.docqa.metrics.intervals import cluster_bootstrap_ci
from knapsack_dspy.docqa.metrics.paired import paired_comparison
from knapsack_dspy.docqa.metrics.selection_proxies import query_selection_scores
from knapsack_dspy.docqa.tasks import build_pipeline
from knapsack_dspy.llm.token_counter import get_token_counter
from knapsack_dspy.teleprompt import KnapsackFewShot

MODEL = "local/qwen2.5-coder-1.5b-instruct"
#: dataset -> (the pool split measured by default, the pipeline, the splits that may be measured)
DATASETS = {"tatqa": ("dev_pool_fold0", "pot", ("dev_pool_fold0", "dev_pool_fold1")),
            "finqa": ("dev_docs_pool", "python_pot", ("dev_docs_pool", "docs_pool"))}
BUDGETS = (768, 1024, 2048)
MAX_EXEMPLARS = 4
#: arm -> (evidence_selection, selection settings)
ARMS: dict[str, tuple[str, dict[str, Any]]] = {
    "rules": ("rules", {}),
    "relevance": ("knapsack", {"evidence": "relevance"}),
    "sequential": ("knapsack", {"evidence": "sequential"}),
    "joint_greedy": ("knapsack", {"evidence": "joint", "evidence_solver": "greedy"}),
    "joint_exact": ("knapsack", {"evidence": "joint"}),
}
WEIGHT_ARM = "joint_exact"  # the arm the exchange-rate grid varies
LEVEL = 0.9


def document_half(doc_id) -> int:
    """0 or 1: a salted hash of the document id (independent of ``document_parts``' parts and folds)."""
    return int(hashlib.sha256(f"half:{doc_id}".encode()).hexdigest(), 16) % 2


def gold_evidence(example: Mapping, dataset: str) -> set[tuple[str, int]] | None:
    """The rows (``("row", index into the table)``) and paragraphs (``("text", index)``) the gold solution reads;
    ``None`` when none can be told."""
    if dataset == "finqa":
        keys = program_evidence(example.get("program") or "", list(example.get("table") or []),
                                list(example.get("paragraphs") or []))
        gold = {("row", int(k[6:])) for k in keys if k.startswith("table_")}
        gold |= {("text", int(k[5:])) for k in keys if k.startswith("text_")}
    else:
        gold = {("row", i) for i in derivation_rows(example) or []}
        gold |= {("text", j) for j in evidence_sentences(example)}
    return gold or None


def recall_of(program, example: Mapping, info: Mapping, dataset: str) -> float | None:
    """The share of the gold evidence the prompt shows (``program.evidence_shown``); ``None`` without gold."""
    gold = gold_evidence(example, dataset)
    if gold is None:
        return None
    rows, paragraphs = program.evidence_shown(example, info)
    shown = {("row", i) for i in rows} | {("text", j) for j in paragraphs}
    return len(gold & shown) / len(gold)


def compile_arm(dataset: str, pipeline: str, pool: Sequence, evidence_selection: str, settings: Mapping[str, Any],
                budget: int, *, embedder=None, token_counter=None, max_exemplars: int = MAX_EXEMPLARS):
    """The task's pipeline with the arm's settings, compiled on ``pool`` (as ``kdspy bench`` compiles a run)."""
    student = build_pipeline(dataset, pipeline, model=MODEL, embedder=embedder, token_counter=token_counter,
                             budget=budget, max_exemplars=max_exemplars, evidence_selection=evidence_selection,
                             **settings)
    tele = KnapsackFewShot(token_counter=student.token_counter, lm_model=MODEL, progress=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a binding budget's zero-shot warning: the rows say what was chosen
        return tele.compile(student, trainset=list(pool))


def _arm_points(budgets: Sequence[int], weights: Sequence[float]) -> list[tuple[str, int, float | None]]:
    """(arm, budget, weight) of every measured point: the arms at each budget, then the weight grid's."""
    points: list[tuple[str, int, float | None]] = [(arm, b, None) for b in budgets for arm in ARMS]
    points += [(WEIGHT_ARM, b, float(w)) for b in budgets for w in weights if float(w) != 1.0]
    return points


def measure(dataset: str, examples: Sequence, *, pipeline: str, budgets: Sequence[int] = BUDGETS,
            weights: Sequence[float] = (), limit: int | None = None, seed: int = 0, embedder=None,
            token_counter=None, max_exemplars: int = MAX_EXEMPLARS,
            progress: Callable[[str], None] | None = None) -> list[dict]:
    """One record per (arm, budget, weight, question): what its prompt shows and costs (see the module docstring)."""
    halves = [[e for e in examples if document_half(e.get("doc_id")) == h] for h in (0, 1)]
    rng = np.random.default_rng(seed)
    records: list[dict] = []
    for h in (0, 1):
        pool, queries = halves[1 - h], halves[h]
        if not pool or not queries:
            raise ValueError(f"half {h} or its pool is empty: {len(queries)} questions, a pool of {len(pool)}")
        if limit is not None and len(queries) > limit:
            queries = [queries[i] for i in sorted(rng.choice(len(queries), limit, replace=False))]
        for arm, budget, weight in _arm_points(budgets, weights):
            evidence_selection, settings = ARMS[arm]
            settings = {**settings, **({"evidence_weight": weight} if weight is not None else {})}
            started = time.perf_counter()
            program = compile_arm(dataset, pipeline, pool, evidence_selection, settings, budget, embedder=embedder,
                                  token_counter=token_counter, max_exemplars=max_exemplars)
            for example in queries:
                info = program.select_for(example)
                records.append(_record(program, example, info, dataset, arm=arm, budget=budget,
                                       weight=1.0 if weight is None else weight, half=h))
            if progress:
                progress(f"half {h}: {arm} at {budget}" + (f", weight {weight:g}" if weight is not None else "")
                         + f": {len(queries)} questions in {time.perf_counter() - started:.0f} s")
    return records


def _record(program, example, info: Mapping, dataset: str, **point) -> dict:
    scores = query_selection_scores(program.select, example, info.get("ids", []))
    instruction = info.get("instruction_tokens")
    values = [info.get("demo_value"), info.get("evidence_value")]
    return {**point, "id": str(example.get("id")), "doc_id": str(example.get("doc_id")),
            "answer_type": str(example.get("answer_type") or ""), "route": info.get("route", ""),
            "recall": recall_of(program, example, info, dataset), "gold_case_hit": scores.get("gold_case_hit"),
            "prompt_tokens": int(info["prompt_tokens"]),
            "after_instructions": None if instruction is None else int(info["prompt_tokens"]) - int(instruction),
            "instructions_sha256": info.get("instructions_sha256"), "within_budget": bool(info.get("within_budget")),
            "ids": list(info.get("ids", [])), "pieces": {k: list(v) for k, v in (info.get("pieces") or {}).items()},
            "pieces_kept": info.get("pieces_kept"), "pieces_offered": info.get("pieces_offered"),
            "objective": None if any(v is None for v in values) else float(sum(values)),
            "repaired": int(info.get("repaired") or 0)}


# -- the figures ------------------------------------------------------------------------------------------
def _interval(values: Sequence[float], clusters: Sequence) -> dict:
    """Mean with its 90 % interval by document (``n``: values, ``documents``)."""
    if not values:
        return {"mean": None, "low": None, "high": None, "n": 0, "documents": 0}
    low, high = cluster_bootstrap_ci(list(values), list(clusters), level=LEVEL, seed=0)
    return {"mean": float(np.mean(values)), "low": float(low), "high": float(high), "n": len(values),
            "documents": len(set(clusters))}


def _measure_of(records: Sequence[dict], key: str) -> dict:
    kept = [r for r in records if r[key] is not None]
    return _interval([float(r[key]) for r in kept], [r["doc_id"] for r in kept])


def _mean(records: Sequence[dict], key: str) -> float | None:
    values = [float(r[key]) for r in records if r.get(key) is not None]
    return float(np.mean(values)) if values else None


def _point_key(r: dict) -> tuple:
    return r["arm"], r["budget"], r["weight"]


def summarise(records: Sequence[dict]) -> dict:
    """The figures of every measured point, the comparisons between arms and the instructions' check."""
    by_point: dict[tuple, list[dict]] = defaultdict(list)
    for r in records:
        by_point[_point_key(r)].append(r)
    points = []
    for (arm, budget, weight), items in by_point.items():
        types = sorted({r["answer_type"] for r in items if r["answer_type"]})
        points.append({
            "arm": arm, "budget": budget, "weight": weight, "questions": len(items),
            "documents": len({r["doc_id"] for r in items}),
            "recall": _measure_of(items, "recall"), "gold_case_hit": _measure_of(items, "gold_case_hit"),
            "by_answer_type": {t: {"recall": _measure_of([r for r in items if r["answer_type"] == t], "recall"),
                                   "gold_case_hit": _measure_of([r for r in items if r["answer_type"] == t],
                                                                "gold_case_hit")} for t in types},
            "prompt_tokens": _mean(items, "prompt_tokens"), "after_instructions": _mean(items, "after_instructions"),
            "demos": float(np.mean([len(r["ids"]) for r in items])),
            "pieces_kept": _mean(items, "pieces_kept"), "pieces_offered": _mean(items, "pieces_offered"),
            "within_budget": float(np.mean([r["within_budget"] for r in items])),
            "repaired": float(np.mean([r["repaired"] > 0 for r in items]))})
    budgets = sorted({r["budget"] for r in records})
    comparisons = [c for b in budgets for c in _comparisons(by_point, b)]
    return {"points": points, "comparisons": comparisons, "instructions": _instructions_check(records)}


def _by_question(items: Sequence[dict]) -> dict[str, dict]:
    return {r["id"]: r for r in items}


def _choice(r: dict) -> tuple:
    return tuple(r["ids"]), tuple(sorted((k, tuple(v)) for k, v in r["pieces"].items()))


def _comparisons(by_point: Mapping[tuple, list[dict]], budget: int) -> list[dict]:
    """Per budget: exact vs greedy (differ, objective gap, recall), joint vs sequential, and every knapsack arm's
    recall and gold-case hit against the rules'."""
    arms = {arm: _by_question(by_point.get((arm, budget, 1.0), [])) for arm in ARMS}
    out = []
    for a, b in [("joint_exact", "joint_greedy"), ("joint_exact", "sequential"), ("joint_exact", "relevance"),
                 ("joint_exact", "rules"), ("joint_greedy", "rules"), ("sequential", "rules"), ("relevance", "rules")]:
        left, right = arms[a], arms[b]
        shared = sorted(set(left) & set(right))
        if not shared:
            continue
        docs = {q: left[q]["doc_id"] for q in shared}
        entry: dict[str, Any] = {"budget": budget, "a": a, "b": b, "questions": len(shared),
                                 "differ": float(np.mean([_choice(left[q]) != _choice(right[q]) for q in shared]))}
        gaps = [left[q]["objective"] - right[q]["objective"] for q in shared
                if left[q]["objective"] is not None and right[q]["objective"] is not None]
        entry["objective_gap"] = float(np.mean(gaps)) if gaps else None
        entry["objective_gap_when_differ"] = (float(np.mean([g for g in gaps if abs(g) > 1e-9]))
                                              if any(abs(g) > 1e-9 for g in gaps) else 0.0)
        for key in ("recall", "gold_case_hit"):
            pa = {q: float(left[q][key]) for q in shared if left[q][key] is not None and right[q][key] is not None}
            pb = {q: float(right[q][key]) for q in pa}
            c = paired_comparison(pa, pb, level=LEVEL, groups=docs) if pa else None
            entry[key] = None if c is None else {"difference": c.difference, "low": c.cluster_low,
                                                 "high": c.cluster_high, "n": c.n}
        entry["tokens"] = float(np.mean([left[q]["prompt_tokens"] - right[q]["prompt_tokens"] for q in shared]))
        out.append(entry)
    return out


def _instructions_check(records: Sequence[dict]) -> dict:
    """Whether every arm's prompt of a question (of one route) opens with the same instructions."""
    seen: dict[tuple, set] = defaultdict(set)
    for r in records:
        seen[(r["id"], r["route"])].add(r["instructions_sha256"])
    differing = sorted(q for (q, _), hashes in seen.items() if len(hashes) > 1)
    return {"questions": len({q for q, _ in seen}), "distinct": len({h for hs in seen.values() for h in hs}),
            "differing_questions": differing, "identical": not differing}


# -- the tables ------------------------------------------------------------------------------------------
def _pct(m: Mapping | None) -> str:
    if not m or m.get("mean") is None:
        return "–"
    return f"{100 * m['mean']:.1f} [{100 * m['low']:.1f}, {100 * m['high']:.1f}]"


def _num(x, digits: int = 0) -> str:
    return "–" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:,.{digits}f}"


def _diff(m: Mapping | None) -> str:
    if not m or m.get("difference") is None:
        return "–"
    return f"{100 * m['difference']:+.1f} [{100 * m['low']:+.1f}, {100 * m['high']:+.1f}]"


def markdown(summary: Mapping, title: str = "") -> str:
    """The figures as Markdown tables (recall and hit in %, 90 % intervals by document)."""
    lines = [f"## {title}", ""] if title else []
    main = [p for p in summary["points"] if p["weight"] == 1.0]
    for budget in sorted({p["budget"] for p in main}):
        items = sorted((p for p in main if p["budget"] == budget), key=lambda p: list(ARMS).index(p["arm"]))
        lines += [f"Budget {budget:,} (questions {items[0]['questions']}, documents {items[0]['documents']}):", "",
                  "| arm | gold-evidence recall | gold-case hit | prompt tokens | after the instructions | demos | "
                  "pieces shown / offered | within budget | repaired |", "|---|---|---|---|---|---|---|---|---|"]
        for p in items:
            pieces = ("–" if p["pieces_kept"] is None else
                      f"{p['pieces_kept']:.1f} / {p['pieces_offered']:.1f}")
            lines.append(f"| {p['arm']} | {_pct(p['recall'])} | {_pct(p['gold_case_hit'])} | "
                         f"{_num(p['prompt_tokens'])} | {_num(p['after_instructions'])} | {p['demos']:.2f} | "
                         f"{pieces} | {100 * p['within_budget']:.1f} % | {100 * p['repaired']:.1f} % |")
        lines.append("")
        types = sorted({t for p in items for t in p["by_answer_type"]})
        for key, name in (("recall", "Gold-evidence recall"), ("gold_case_hit", "Gold-case hit")):
            lines += [f"{name} by answer type, budget {budget:,} (n per type):", "",
                      "| arm | " + " | ".join(types) + " |", "|---|" + "---|" * len(types)]
            for p in items:
                parts = [p["by_answer_type"].get(t, {}).get(key) or {} for t in types]
                cells = [f"{_pct(m)} (n={m.get('n', 0)})" for m in parts]
                lines.append(f"| {p['arm']} | " + " | ".join(cells) + " |")
            lines.append("")
    comparisons = summary["comparisons"]
    if comparisons:
        lines += ["Paired, the same questions (points; 90 % interval by document):", "",
                  "| budget | a − b | choices differ | objective gap (mean / where they differ) | recall difference | "
                  "gold-case hit difference | prompt tokens a − b |", "|---|---|---|---|---|---|---|"]
        for c in comparisons:
            gap = ("–" if c["objective_gap"] is None else
                   f"{c['objective_gap']:+.4f} / {c['objective_gap_when_differ']:+.4f}")
            lines.append(f"| {c['budget']:,} | {c['a']} − {c['b']} | {100 * c['differ']:.1f} % | {gap} | "
                         f"{_diff(c['recall'])} | {_diff(c['gold_case_hit'])} | {c['tokens']:+,.0f} |")
        lines.append("")
    weights = sorted({p["weight"] for p in summary["points"] if p["arm"] == WEIGHT_ARM})
    if len(weights) > 1:
        lines += [f"Exchange rate ({WEIGHT_ARM}, evidence_weight):", "",
                  "| budget | weight | gold-evidence recall | gold-case hit | prompt tokens | demos | pieces shown |",
                  "|---|---|---|---|---|---|---|"]
        for p in sorted((p for p in summary["points"] if p["arm"] == WEIGHT_ARM),
                        key=lambda p: (p["budget"], p["weight"])):
            lines.append(f"| {p['budget']:,} | {p['weight']:g} | {_pct(p['recall'])} | {_pct(p['gold_case_hit'])} | "
                         f"{_num(p['prompt_tokens'])} | {p['demos']:.2f} | {_num(p['pieces_kept'], 1)} |")
        lines.append("")
    check = summary["instructions"]
    lines.append(f"Instructions: {'identical' if check['identical'] else 'DIFFERENT'} in every arm's prompt of each of "
                 f"the {check['questions']} questions ({check['distinct']} distinct: one per route's predictor)"
                 + ("" if check["identical"] else f"; differing: {check['differing_questions'][:5]}"))
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", default="tatqa", choices=sorted(DATASETS))
    parser.add_argument("--split", help="the pool split cut in halves (default: TAT-QA dev_pool_fold0, FinQA "
                                        "dev_docs_pool)")
    parser.add_argument("--budgets", default=",".join(map(str, BUDGETS)))
    parser.add_argument("--weights", default="", help="evidence_weight grid for the joint exact arm, e.g. "
                                                      "0.25,0.5,1,2,4 (1 is the arms' own)")
    parser.add_argument("--limit", type=int, help="questions sampled per half (seeded); default all")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("-M", "--max-exemplars", type=int, default=MAX_EXEMPLARS)
    parser.add_argument("--json", type=Path, help="write the figures and every question's record here")
    args = parser.parse_args(argv)
    split_default, pipeline, allowed = DATASETS[args.dataset]
    split = args.split or split_default
    if split not in allowed:
        parser.error(f"--split {split!r}: measured on a pool split only ({', '.join(allowed)}), never on an eval split")
    examples = list(load_examples(args.dataset, split=split))
    counter = get_token_counter(MODEL)  # the 1.5B's tokenizer, in process (the 0.5B's server checks its counts)
    started = time.perf_counter()
    records = measure(args.dataset, examples, pipeline=pipeline,
                      budgets=[int(b) for b in args.budgets.split(",") if b.strip()],
                      weights=[float(w) for w in args.weights.split(",") if w.strip()], limit=args.limit,
                      seed=args.seed, token_counter=counter, max_exemplars=args.max_exemplars,
                      progress=lambda line: print(line, file=sys.stderr, flush=True))
    summary = summarise(records)
    summary.update(dataset=args.dataset, split=split, pipeline=pipeline, limit=args.limit, seed=args.seed,
                   max_exemplars=args.max_exemplars, seconds=round(time.perf_counter() - started, 1))
    print(markdown(summary, f"{args.dataset} {split}, {pipeline}, cross-fitted halves, M = {args.max_exemplars}"))
    if args.json:
        args.json.write_text(json.dumps({**summary, "records": records}, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
