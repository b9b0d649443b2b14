"""Per-run metrics of a results directory (``metrics.json``): one entry per run key.

Each entry holds the run's spec, counts, scores with 90 % confidence intervals (Wilson for 0/1 values such as
exact match and shares, a bootstrap of the mean for F1), budget coverage (and ``token_count_estimated``: how many
of those prompts were counted with an estimate) and exemplar statistics, tokens, LM
calls, cost, time per question (LM / selection / other), the selection quality, and — when the rows' questions
are known (``question_facts``) or rows record a route — the scores per gold answer type and per route. Runs
get a ``label`` (their selector, plus the settings that tell two runs of one setting apart).
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping

import numpy as np

from knapsack_dspy.bench.provenance import provenance_summary
from knapsack_dspy.bench.question_facts import QuestionFacts, facts_key
from knapsack_dspy.bench.row_outcomes import ANSWERED_KINDS, INTERNAL, TRANSIENT, could_not_ask, error_kind
from knapsack_dspy.llm.token_counter import ESTIMATE
from knapsack_dspy.metrics.intervals import bootstrap_ci, proportion_ci

__all__ = ["LEVEL", "aggregate", "score_key", "setting_of", "time_per_question"]

LEVEL = 0.9
# Spec fields that never tell two runs of a table apart (how many questions, where the rows came from).
_UNLABELLED_FIELDS = ("limit", "example_ids", "selector")


def _proportion_ci(successes: float, n: int) -> tuple[float, float]:
    low, high = proportion_ci(successes, n, level=LEVEL)[:2]
    return float(low), float(high)


def _mean_ci(values: list[float], seed: int = 0, resamples: int = 1000) -> tuple[float, float]:
    """Percentile bootstrap CI of a mean (seeded)."""
    low, high = bootstrap_ci(values, level=LEVEL, resamples=resamples, seed=seed)
    return float(low), float(high)


def _score_fields(items: list[dict]) -> dict:
    """Accuracy, EM and F1 (percent) with their intervals, over ``items``."""
    n = len(items)
    m: dict = {}
    correct = [bool(r.get("correct")) for r in items]
    m["accuracy"] = 100.0 * sum(correct) / n
    lo, hi = _proportion_ci(sum(correct), n)
    m["accuracy_ci"] = [100.0 * lo, 100.0 * hi]
    for name in ("em", "f1"):
        vals = [float(r[name]) for r in items if r.get(name) is not None]
        if vals:
            m[name] = 100.0 * statistics.fmean(vals)
            binary = all(v in (0.0, 1.0) for v in vals)  # EM: a proportion, Wilson (never zero-width)
            lo, hi = _proportion_ci(int(sum(vals)), len(vals)) if binary else _mean_ci(vals)
            m[f"{name}_ci"] = [100.0 * lo, 100.0 * hi]
    return m


def time_per_question(items: list[dict], selection_only: bool) -> dict | None:
    """Mean seconds per question, split into LM calls / selection / the rest (retrieval, running the program,
    scoring), over the rows that really asked the LM (rows answered from the LM cache took no LM time; all rows
    of a selection-only run). ``lm`` is None when the rows do not record ``lm_seconds`` (older rows): then
    ``other`` holds the LM time too. None when no row is timed."""
    timed = [r for r in items if r.get("latency_s") is not None
             and (selection_only or (r.get("lm_calls") or 0) > 0)]
    if not timed:
        return None
    total = statistics.fmean(float(r["latency_s"]) for r in timed)
    selection = statistics.fmean(float(r.get("selection_ms") or 0.0) / 1000.0 for r in timed)
    if selection_only:
        lm = 0.0
    elif all(r.get("lm_seconds") is not None for r in timed):
        lm = statistics.fmean(float(r["lm_seconds"]) for r in timed)
    else:
        lm = None
    return {"n": len(timed), "cached": len(items) - len(timed) if not selection_only else 0, "total": total,
            "lm": lm, "selection": selection, "other": max(0.0, total - selection - (lm or 0.0))}


def _breakdown(items: list[dict], value_of: Callable[[dict], str | None]) -> dict[str, dict]:
    """Scores per value of ``value_of(row)`` (rows without one left out), with intervals."""
    groups: dict[str, list[dict]] = defaultdict(list)
    for row in items:
        value = value_of(row)
        if value:
            groups[str(value)].append(row)
    return {value: {"n": len(rows), **_score_fields(rows)} for value, rows in sorted(groups.items())}


def aggregate(rows: Iterable[dict], facts: QuestionFacts | None = None) -> dict[str, dict]:
    """Per run key: counts, scores with 90 % CIs, budget coverage, tokens, latency, selection quality; scores per
    gold answer type (``by_answer_type``, when ``facts`` know it) and per route (``by_route``, routed rows)."""
    by_run: dict[str, list[dict]] = defaultdict(list)
    for row in rows:
        by_run[row["run"]].append(row)
    facts = facts or {}
    out = {}
    for run, items in by_run.items():
        spec = items[0].get("spec", {})
        n = len(items)
        m: dict = {"run": run, "spec": spec, "n": n}
        if not spec.get("selection_only"):
            m.update(_score_fields(items))
            m["errors"] = sum(1 for r in items if r.get("error"))
            m["score_errors"] = sum(1 for r in items if r.get("score_error"))  # answers the metric could not read
            # "could not ask" (the LM never answered: counted wrong, but says nothing about the model) apart
            # from "answered wrong"; transient ones are asked again by the next run of the same command
            m["could_not_ask"] = sum(could_not_ask(r) for r in items)
            m["could_not_ask_transient"] = sum(error_kind(r) == TRANSIENT for r in items)
            m["internal_errors"] = sum(error_kind(r) == INTERNAL for r in items)
            m["answered_wrong"] = sum(1 for r in items
                                      if not r.get("correct") and error_kind(r) in ANSWERED_KINDS)
            rule = [bool(r["authors_rule"]) for r in items if r.get("authors_rule") is not None]
            if rule:  # SARA numerical cases: the authors' rule beside exact dollars
                m["authors_rule"] = 100.0 * sum(rule) / len(rule)
                lo, hi = _proportion_ci(sum(rule), len(rule))
                m["authors_rule_ci"] = [100.0 * lo, 100.0 * hi]
            # SARA per case type (rows say ``case_type``): entailment accuracy; numerical cases exact in dollars
            # and within 10 % (the authors' rule above: within max(10 %, $5,000))
            for name, kind, field in (("entailment_accuracy", "entailment", "correct"),
                                      ("numerical_exact", "numerical", "correct"),
                                      ("numerical_within_10pct", "numerical", "within_10pct")):
                hits = [bool(r.get(field)) for r in items if r.get("case_type") == kind]
                if hits:
                    m[name] = 100.0 * sum(hits) / len(hits)
                    lo, hi = _proportion_ci(sum(hits), len(hits))
                    m[f"{name}_ci"] = [100.0 * lo, 100.0 * hi]
                    m[f"{name}_n"] = len(hits)
            lat = [r["latency_s"] for r in items if r.get("latency_s") is not None]
            m["median_latency_s"] = statistics.median(lat) if lat else None
            for key in ("prompt_tokens_used", "completion_tokens_used"):
                vals = [r[key] for r in items if r.get(key) is not None]
                m[key] = int(sum(vals)) if vals else 0
            m["lm_calls"] = int(sum(r.get("lm_calls", 0) or 0 for r in items))
            m["cache_hits"] = int(sum(r.get("cache_hits", 0) or 0 for r in items))
            m["cost_usd"] = float(sum(r.get("cost_usd", 0.0) or 0.0 for r in items))
            if (spec.get("samples") or 1) > 1:  # self-consistency: what the samples cost per question
                m["lm_calls_per_question"] = m["lm_calls"] / n
                m["tokens_per_question"] = (m["prompt_tokens_used"] + m["completion_tokens_used"]) / n
                votes = [r["votes"] for r in items if r.get("votes")]
                m["mean_votes"] = statistics.fmean(votes) if votes else None
            by_type = _breakdown(items, lambda r: facts.get(facts_key(r), {}).get("answer_type"))
            if by_type:
                m["by_answer_type"] = by_type
            by_route = _breakdown(items, lambda r: r.get("route"))
            if by_route:
                m["by_route"] = by_route
        m["seconds"] = float(sum(r.get("latency_s") or 0.0 for r in items))
        timing = time_per_question(items, bool(spec.get("selection_only")))
        if timing:
            m["time_per_question"] = timing
        # budget and exemplar statistics over the rows whose selection is recorded (an LM failure keeps it; a
        # failed selection, or a pipeline without one, has none)
        selected = [r for r in items if r.get("within_budget") is not None and r.get("prompt_tokens") is not None]
        m["n_selected"] = len(selected)
        if selected:
            within = sum(bool(r["within_budget"]) for r in selected)
            m["within_budget"] = 100.0 * within / len(selected)
            lo, hi = _proportion_ci(within, len(selected))
            m["within_budget_ci"] = [100.0 * lo, 100.0 * hi]
            m["mean_exemplars"] = statistics.fmean(len(r.get("exemplar_ids") or []) for r in selected)
            # prompts counted without the model's own tokenizer: their within_budget rests on an estimate
            m["token_count_estimated"] = sum(r.get("token_count") == ESTIMATE for r in selected)
        else:
            m["within_budget"] = m["mean_exemplars"] = None
        m["provenance"] = provenance_summary(items)
        toks = [r["prompt_tokens"] for r in items if r.get("prompt_tokens") is not None]
        m["mean_prompt_tokens"] = statistics.fmean(toks) if toks else None
        toks = [r["exemplar_tokens"] for r in items if r.get("exemplar_tokens") is not None]
        if toks:  # the exemplars' share of the prompt (rows written before it was recorded have none)
            m["mean_exemplar_tokens"] = statistics.fmean(toks)
        sel = [r["selection_ms"] for r in items if r.get("selection_ms") is not None]
        if sel:
            m["selection_ms_median"] = statistics.median(sel)
            m["selection_ms_p90"] = float(np.percentile(sel, 90))
        hits = [r["gold_case_hit"] for r in items if r.get("gold_case_hit") is not None]
        if hits:
            m["gold_case_hit"] = 100.0 * sum(hits) / len(hits)
            lo, hi = _proportion_ci(sum(hits), len(hits))
            m["gold_case_hit_ci"] = [100.0 * lo, 100.0 * hi]
        scores = [r["program_score"] for r in items if r.get("program_score") is not None]
        if scores:
            m["program_score"] = statistics.fmean(scores)
        for attr in ("modality", "answer_type"):
            vals = [r[f"attribute_match.{attr}"] for r in items if r.get(f"attribute_match.{attr}") is not None]
            if vals:
                m[f"attribute_match.{attr}"] = 100.0 * statistics.fmean(vals)
        m["score"] = m.get("f1") if m.get("f1") is not None else m.get("accuracy")
        out[run] = m
    _label_runs(out)
    return out


def score_key(m: Mapping) -> str | None:
    """The key of a run's headline score: exact match for runs with answers (every dataset's scorer gives
    ``em``; accuracy otherwise), the gold-case hit rate for selection-only runs; None when it has neither."""
    for key in (("gold_case_hit",) if m["spec"].get("selection_only") else ("em", "accuracy")):
        if m.get(key) is not None:
            return key
    return None


def _label_runs(metrics: dict[str, dict]) -> None:
    """``label`` of each run: its selector, plus the spec fields that differ between runs of one setting that
    share the selector (``seer [seed=1]`` next to ``seer [seed=0]``), so no two rows of a table look alike."""
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for m in metrics.values():
        groups[(setting_of(m["spec"]), m["spec"].get("selector"))].append(m)
    for (_, selector), items in groups.items():
        keys = sorted({k for m in items for k in m["spec"]} - set(_UNLABELLED_FIELDS))
        differing = [k for k in keys if len({repr(m["spec"].get(k)) for m in items}) > 1]
        for m in items:
            extra = ", ".join(f"{k}={m['spec'].get(k)}" for k in differing)
            m["label"] = f"{selector} [{extra}]" if extra else str(selector)


def setting_of(spec: Mapping) -> tuple:
    """What makes runs comparable in one table: dataset, pipeline, budget, M, model (or selection-only),
    retrieval, exemplar budget (None: none)."""
    return (spec.get("dataset"), spec.get("pipeline"), spec.get("budget"), spec.get("max_exemplars"),
            "selection-only" if spec.get("selection_only") else spec.get("model"), spec.get("retrieval") or "",
            spec.get("exemplar_budget"))
