"""Per-run metrics of a results directory (``metrics.json``): one entry per run key.

Each entry holds the run's spec, counts, scores with 90 % confidence intervals (Wilson for 0/1 values such as
exact match and shares, a bootstrap of the mean for F1), budget coverage (and ``token_count_estimated``: how many
of those prompts were counted with an estimate) and exemplar statistics, tokens, LM
calls, cost, time per question (LM / selection / other), tokens and seconds per question (``tokens_seconds``:
``bench/scoring/token_seconds.py``), the selection quality, and — when the rows' questions
are known (``question_facts``) or rows record a route — the scores per gold answer type and per route. Runs
get a ``label`` (their selector, plus the settings that tell two runs of one setting apart).
"""

from __future__ import annotations

import hashlib
import statistics
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping

import numpy as np

from knapsack_dspy.bench.results.provenance import provenance_summary
from knapsack_dspy.bench.results.question_facts import QuestionFacts, facts_key
from knapsack_dspy.bench.results.row_outcomes import ANSWERED_KINDS, INTERNAL, TRANSIENT, could_not_ask, error_kind
from knapsack_dspy.bench.results.row_schema import ResultRow, rows_of
from knapsack_dspy.bench.scoring.token_seconds import tokens_and_seconds
from knapsack_dspy.docqa.metrics.intervals import bootstrap_ci, proportion_ci
from knapsack_dspy.llm.token_counter import ESTIMATE

__all__ = ["LEVEL", "LIMITED_STATUSES", "aggregate", "score_key", "setting_of", "time_per_question"]

LEVEL = 0.9
# Spec fields that never tell two runs of a table apart (how many questions, where the rows came from).
_UNLABELLED_FIELDS = ("limit", "example_ids", "selector")

#: ``selection_status`` values of a selection a knapsack's limit ended (``"time_limit"``: rows before the work
#: limit, when the limit was wall-clock seconds)
LIMITED_STATUSES = ("incumbent", "greedy", "time_limit")


def _proportion_ci(successes: float, n: int) -> tuple[float, float]:
    low, high = proportion_ci(successes, n, level=LEVEL)[:2]
    return float(low), float(high)


def _mean_ci(values: list[float], seed: int = 0, resamples: int = 1000) -> tuple[float, float]:
    """Percentile bootstrap CI of a mean (seeded)."""
    low, high = bootstrap_ci(values, level=LEVEL, resamples=resamples, seed=seed)
    return float(low), float(high)


def _values(items: list[ResultRow], field) -> list:
    """The values of ``field`` (a ``ResultRow`` field) in the rows that hold one."""
    return [value for value in (field.of(r) for r in items) if value is not None]


def _attribute_matches(items: list[ResultRow]) -> dict[str, float]:
    """``attribute_match.<attribute>``: the mean share (percent) of exemplars matching the question's gold value of
    each attribute the rows record (``ResultRow.attribute_match``), in the order first recorded."""
    shares: dict[str, list[float]] = {}
    for row in items:
        for attribute, share in (row.attribute_match or {}).items():
            if share is not None:
                shares.setdefault(attribute, []).append(share)
    return {f"attribute_match.{attribute}": 100.0 * statistics.fmean(values) for attribute, values in shares.items()}


def _score_fields(items: list[ResultRow]) -> dict:
    """Accuracy, EM and F1 (percent) with their intervals, over ``items``."""
    n = len(items)
    m: dict = {}
    correct = [bool(r.correct) for r in items]
    m["accuracy"] = 100.0 * sum(correct) / n
    lo, hi = _proportion_ci(sum(correct), n)
    m["accuracy_ci"] = [100.0 * lo, 100.0 * hi]
    for field in (ResultRow.em, ResultRow.f1):
        vals = [float(v) for v in _values(items, field)]
        if vals:
            m[field.name] = 100.0 * statistics.fmean(vals)
            binary = all(v in (0.0, 1.0) for v in vals)  # EM: a proportion, Wilson (never zero-width)
            lo, hi = _proportion_ci(int(sum(vals)), len(vals)) if binary else _mean_ci(vals)
            m[f"{field.name}_ci"] = [100.0 * lo, 100.0 * hi]
    programs = [bool(v) for v in _values(items, ResultRow.program_correct)]
    if programs:  # FinQA DSL: program accuracy beside execution accuracy (EM), over the rows that define it
        m["program_accuracy"] = 100.0 * sum(programs) / len(programs)
        lo, hi = _proportion_ci(sum(programs), len(programs))
        m["program_accuracy_ci"] = [100.0 * lo, 100.0 * hi]
    return m


def time_per_question(items: Iterable[Mapping], selection_only: bool) -> dict | None:
    """Mean seconds per question, split into LM calls / selection / the rest (retrieval, running the program,
    scoring), over the rows that really asked the LM (rows answered from the LM cache took no LM time; all rows
    of a selection-only run). ``lm`` is None when the rows do not record ``lm_seconds`` (older rows): then
    ``other`` holds the LM time too. None when no row is timed."""
    items = rows_of(items)
    timed = [r for r in items if r.latency_s is not None and (selection_only or (r.lm_calls or 0) > 0)]
    if not timed:
        return None
    total = statistics.fmean(float(r.latency_s) for r in timed)
    selection = statistics.fmean(float(r.selection_ms or 0.0) / 1000.0 for r in timed)
    if selection_only:
        lm = 0.0
    elif all(r.lm_seconds is not None for r in timed):
        lm = statistics.fmean(float(r.lm_seconds) for r in timed)
    else:
        lm = None
    return {"n": len(timed), "cached": len(items) - len(timed) if not selection_only else 0, "total": total,
            "lm": lm, "selection": selection, "other": max(0.0, total - selection - (lm or 0.0))}


def _breakdown(items: list[ResultRow], value_of: Callable[[ResultRow], str | None]) -> dict[str, dict]:
    """Scores per value of ``value_of(row)`` (rows without one left out), with intervals."""
    groups: dict[str, list[ResultRow]] = defaultdict(list)
    for row in items:
        value = value_of(row)
        if value:
            groups[str(value)].append(row)
    return {value: {"n": len(rows), **_score_fields(rows)} for value, rows in sorted(groups.items())}


def aggregate(rows: Iterable[Mapping], facts: QuestionFacts | None = None) -> dict[str, dict]:
    """Per run key: counts, scores with 90 % CIs, budget coverage, tokens, latency, selection quality; scores per
    gold answer type (``by_answer_type``, when ``facts`` know it) and per route (``by_route``, routed rows)."""
    by_run: dict[str, list[ResultRow]] = defaultdict(list)
    for row in rows_of(rows):
        by_run[row.run].append(row)
    facts = facts or {}
    out = {}
    for run, items in by_run.items():
        spec = items[0].spec
        n = len(items)
        m: dict = {"run": run, "spec": spec, "n": n}
        if not spec.get("selection_only"):
            m.update(_score_fields(items))
            m["errors"] = sum(1 for r in items if r.error)
            m["score_errors"] = sum(1 for r in items if r.score_error)  # answers the metric could not read
            # "could not ask" (the LM never answered: counted wrong, but says nothing about the model) apart
            # from "answered wrong"; transient ones are asked again by the next run of the same command
            m["could_not_ask"] = sum(could_not_ask(r) for r in items)
            m["could_not_ask_transient"] = sum(error_kind(r) == TRANSIENT for r in items)
            m["internal_errors"] = sum(error_kind(r) == INTERNAL for r in items)
            m["answered_wrong"] = sum(1 for r in items if not r.correct and error_kind(r) in ANSWERED_KINDS)
            rule = [bool(v) for v in _values(items, ResultRow.authors_rule)]
            if rule:  # SARA numerical cases: the authors' rule beside exact dollars
                m["authors_rule"] = 100.0 * sum(rule) / len(rule)
                lo, hi = _proportion_ci(sum(rule), len(rule))
                m["authors_rule_ci"] = [100.0 * lo, 100.0 * hi]
            # SARA per case type (rows say ``case_type``): entailment accuracy; numerical cases exact in dollars
            # and within 10 % (the authors' rule above: within max(10 %, $5,000))
            for name, kind, field in (("entailment_accuracy", "entailment", ResultRow.correct),
                                      ("numerical_exact", "numerical", ResultRow.correct),
                                      ("numerical_within_10pct", "numerical", ResultRow.within_10pct)):
                hits = [bool(field.of(r)) for r in items if r.case_type == kind]
                if hits:
                    m[name] = 100.0 * sum(hits) / len(hits)
                    lo, hi = _proportion_ci(sum(hits), len(hits))
                    m[f"{name}_ci"] = [100.0 * lo, 100.0 * hi]
                    m[f"{name}_n"] = len(hits)
            lat = _values(items, ResultRow.latency_s)
            m["median_latency_s"] = statistics.median(lat) if lat else None
            for field in (ResultRow.prompt_tokens_used, ResultRow.completion_tokens_used):
                vals = _values(items, field)
                m[field.name] = int(sum(vals)) if vals else 0
            m["lm_calls"] = int(sum(r.lm_calls or 0 for r in items))
            m["cache_hits"] = int(sum(r.cache_hits or 0 for r in items))
            m["cost_usd"] = float(sum(r.cost_usd or 0.0 for r in items))
            if (spec.get("samples") or 1) > 1:  # self-consistency: what the samples cost per question
                m["lm_calls_per_question"] = m["lm_calls"] / n
                m["tokens_per_question"] = (m["prompt_tokens_used"] + m["completion_tokens_used"]) / n
                votes = [r.votes for r in items if r.votes]
                m["mean_votes"] = statistics.fmean(votes) if votes else None
            by_type = _breakdown(items, lambda r: facts.get(facts_key(r), {}).get("answer_type"))
            if by_type:
                m["by_answer_type"] = by_type
            by_route = _breakdown(items, lambda r: r.route)
            if by_route:
                m["by_route"] = by_route
        m["seconds"] = float(sum(r.latency_s or 0.0 for r in items))
        timing = time_per_question(items, bool(spec.get("selection_only")))
        if timing:
            m["time_per_question"] = timing
        # budget and exemplar statistics over the rows whose selection is recorded (an LM failure keeps it; a
        # failed selection, or a pipeline without one, has none)
        selected = [r for r in items if r.within_budget is not None and r.prompt_tokens is not None]
        m["n_selected"] = len(selected)
        if selected:
            within = sum(bool(r.within_budget) for r in selected)
            m["within_budget"] = 100.0 * within / len(selected)
            lo, hi = _proportion_ci(within, len(selected))
            m["within_budget_ci"] = [100.0 * lo, 100.0 * hi]
            m["mean_exemplars"] = statistics.fmean(len(r.exemplar_ids) for r in selected)
            # sets a knapsack's limit cut short (the best found, perhaps not the best), and of those the sets its
            # greedy gave (better than the solver's best); rows of 2026-11-27 say "time_limit" (wall clock)
            m["limited"] = sum(r.selection_status in LIMITED_STATUSES for r in selected)
            m["limited_greedy"] = sum(r.selection_status == "greedy" for r in selected)
            # prompts counted without the model's own tokenizer: their within_budget rests on an estimate
            m["token_count_estimated"] = sum(r.token_count == ESTIMATE for r in selected)
        else:
            m["within_budget"] = m["mean_exemplars"] = None
        m["provenance"] = provenance_summary(items)
        toks = _values(items, ResultRow.prompt_tokens)
        m["mean_prompt_tokens"] = statistics.fmean(toks) if toks else None
        # prompt tokens, tokens new to the prompt cache, prefill / decode seconds, right answers per 1,000 prompt
        # tokens (bench/scoring/token_seconds.py); the mean prompt tokens' interval for the accuracy-vs-tokens plot
        m["tokens_seconds"] = tokens_and_seconds(items, bool(spec.get("selection_only")))
        if m["tokens_seconds"]["prompt_tokens"]:
            m["prompt_tokens_ci"] = m["tokens_seconds"]["prompt_tokens"]["ci"]
        toks = _values(items, ResultRow.exemplar_tokens)
        if toks:  # the exemplars' share of the prompt (rows written before it was recorded have none)
            m["mean_exemplar_tokens"] = statistics.fmean(toks)
        sel = _values(items, ResultRow.selection_ms)
        if sel:
            m["selection_ms_median"] = statistics.median(sel)
            m["selection_ms_p90"] = float(np.percentile(sel, 90))
        hits = _values(items, ResultRow.gold_case_hit)
        if hits:
            m["gold_case_hit"] = 100.0 * sum(hits) / len(hits)
            lo, hi = _proportion_ci(sum(hits), len(hits))
            m["gold_case_hit_ci"] = [100.0 * lo, 100.0 * hi]
        scores = _values(items, ResultRow.program_score)
        if scores:
            m["program_score"] = statistics.fmean(scores)
        m.update(_attribute_matches(items))
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
        named = len({repr(m["spec"].get("example_ids")) for m in items}) > 1  # e.g. SARA's two case groups
        for m in items:
            extra = [f"{k}={m['spec'].get(k)}" for k in differing]
            if named:
                extra.append(_questions_label(m["spec"].get("example_ids") or []))
            m["label"] = f"{selector} [{', '.join(extra)}]" if extra else str(selector)
        labels = [m["label"] for m in items]
        for m in items:  # named sets alike in size and first id: told apart by a digest of their ids
            if labels.count(m["label"]) > 1 and m["spec"].get("example_ids"):
                digest = hashlib.sha256("\n".join(map(str, m["spec"]["example_ids"])).encode()).hexdigest()[:6]
                m["label"] = m["label"][:-1] + f" #{digest}]"


def _questions_label(ids) -> str:
    ids = list(ids)
    return f"{len(ids)} named questions from {ids[0]}" if ids else "all questions"


def selector_label(spec: Mapping) -> str:
    """The selector a run stands for in a comparison script: its name, with its solver when that is not the
    knapsack (``case_coverage greedy``)."""
    name = spec.get("selector", "")
    solver = (spec.get("selector_params") or {}).get("solver")
    return f"{name} {solver}" if solver and solver != "knapsack" else name


def setting_of(spec: Mapping) -> tuple:
    """What makes runs comparable in one table: dataset, pipeline, budget, M, model (or selection-only),
    retrieval, exemplar budget (None: none)."""
    return (spec.get("dataset"), spec.get("pipeline"), spec.get("budget"), spec.get("max_exemplars"),
            "selection-only" if spec.get("selection_only") else spec.get("model"), spec.get("retrieval") or "",
            spec.get("exemplar_budget"))
