"""Aggregate ``predictions.jsonl`` into ``metrics.json``, ``report.md`` and PNG plots.

``report.md`` follows SEER's Table 1 layout: one table per setting (dataset, pipeline, budget, M, model),
rows = selectors, columns = metrics with 90 % confidence intervals; then paired comparisons of the selectors
on the questions they share (``comparisons.json``), the selection-quality metrics (model-free) and the plots:
score and share of prompts within budget versus the number of exemplars M at each budget (SEER's Figures 7-8),
and selection latency per selector.
"""

from __future__ import annotations

import json
import statistics
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from knapsack_dspy.bench.provenance import code_provenance, describe_code, provenance_summary
from knapsack_dspy.bench.row_outcomes import ANSWERED_KINDS, INTERNAL, TRANSIENT, could_not_ask, error_kind
from knapsack_dspy.metrics.intervals import bootstrap_ci, proportion_ci
from knapsack_dspy.metrics.paired import paired_comparison
from knapsack_dspy.selection.selectors.registry import DEFAULT_SELECTOR

LEVEL = 0.9


def _proportion_ci(successes: float, n: int) -> tuple[float, float]:
    low, high = proportion_ci(successes, n, level=LEVEL)[:2]
    return float(low), float(high)


def _mean_ci(values: list[float], seed: int = 0, resamples: int = 1000) -> tuple[float, float]:
    """Percentile bootstrap CI of a mean (seeded)."""
    low, high = bootstrap_ci(values, level=LEVEL, resamples=resamples, seed=seed)
    return float(low), float(high)


def aggregate(rows: Iterable[dict]) -> dict[str, dict]:
    """Per run key: counts, scores with 90 % CIs, budget coverage, tokens, latency, selection quality."""
    by_run: dict[str, list[dict]] = defaultdict(list)
    for row in rows:
        by_run[row["run"]].append(row)
    out = {}
    for run, items in by_run.items():
        spec = items[0].get("spec", {})
        n = len(items)
        m: dict = {"run": run, "spec": spec, "n": n}
        if not spec.get("selection_only"):
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
        else:
            m["within_budget"] = m["mean_exemplars"] = None
        m["provenance"] = provenance_summary(items)
        toks = [r["prompt_tokens"] for r in items if r.get("prompt_tokens") is not None]
        m["mean_prompt_tokens"] = statistics.fmean(toks) if toks else None
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
        out[run] = m
    _label_runs(out)
    return out


# Spec fields that never tell two runs of a table apart (how many questions, where the rows came from).
_UNLABELLED_FIELDS = ("limit", "example_ids", "selector")


def _label_runs(metrics: dict[str, dict]) -> None:
    """``label`` of each run: its selector, plus the spec fields that differ between runs of one setting that
    share the selector (``seer [seed=1]`` next to ``seer [seed=0]``), so no two rows of a table look alike."""
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for m in metrics.values():
        groups[(_setting(m["spec"]), m["spec"].get("selector"))].append(m)
    for (_, selector), items in groups.items():
        keys = sorted({k for m in items for k in m["spec"]} - set(_UNLABELLED_FIELDS))
        differing = [k for k in keys if len({repr(m["spec"].get(k)) for m in items}) > 1]
        for m in items:
            extra = ", ".join(f"{k}={m['spec'].get(k)}" for k in differing)
            m["label"] = f"{selector} [{extra}]" if extra else str(selector)


def compare_selectors(rows: Iterable[dict], metrics: dict[str, dict]) -> list[dict]:
    """Paired comparisons within each setting: every selector against the reference (the default selector,
    ``seer``, if present, else the first by name) on the questions both answered, for EM and F1
    (``metrics.paired``)."""
    scores: dict[str, dict[str, dict[str, float]]] = defaultdict(lambda: defaultdict(dict))
    for row in rows:
        for name in ("em", "f1"):
            if row.get(name) is not None:
                scores[row["run"]][name][str(row["example_id"])] = float(row[name])
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for m in metrics.values():
        if not m["spec"].get("selection_only") and m["run"] in scores:
            groups[_setting(m["spec"])].append(m)
    out = []
    for setting, items in sorted(groups.items(), key=lambda kv: tuple(str(x) for x in kv[0])):
        if len(items) < 2:
            continue
        items = sorted(items, key=lambda m: m.get("label", ""))
        ref = next((m for m in items if m["spec"].get("selector") == DEFAULT_SELECTOR), items[0])
        for other in items:
            if other is ref:
                continue
            entry = {"setting": list(setting), "a": ref.get("label"), "b": other.get("label"),
                     "run_a": ref["run"], "run_b": other["run"]}
            for name in ("em", "f1"):
                if scores[ref["run"]].get(name) and scores[other["run"]].get(name):
                    pc = paired_comparison(scores[ref["run"]][name], scores[other["run"]][name], level=LEVEL)
                    entry[name] = {k: (100.0 * v if k in ("mean_a", "mean_b", "difference", "low", "high")
                                       and v is not None else v) for k, v in pc.to_dict().items()}
            out.append(entry)
    return out


def _comparison_lines(comparisons: list[dict]) -> list[str]:
    if not comparisons:
        return []
    lines = [("Paired comparisons (the same questions; difference in points with a 90 % paired-bootstrap CI; "
              "McNemar exact p on the questions exactly one of the two got right):"), "",
             "| comparison | n | EM difference | better / worse | McNemar p | F1 difference |",
             "|---|---|---|---|---|---|"]
    for c in comparisons:
        em, f1 = c.get("em") or {}, c.get("f1") or {}

        def diff(d):
            return "–" if d.get("difference") is None else f"{d['difference']:+.1f} [{d['low']:+.1f}, {d['high']:+.1f}]"

        p = em.get("mcnemar_p")
        lines.append(f"| {c['a']} − {c['b']} | {em.get('n', f1.get('n', 0))} | {diff(em)} | "
                     f"{em.get('wins', '–')} / {em.get('losses', '–')} | {'–' if p is None else f'{p:.2f}'} | "
                     f"{diff(f1)} |")
    return [*lines, ""]


def _fmt(m: dict, key: str) -> str:
    if m.get(key) is None:
        return "–"
    ci = m.get(f"{key}_ci")
    if ci:
        return f"{m[key]:.1f} [{ci[0]:.1f}, {ci[1]:.1f}]"
    return f"{m[key]:.1f}" if isinstance(m[key], float) else str(m[key])


def _setting(spec: dict) -> tuple:
    return (spec.get("dataset"), spec.get("pipeline"), spec.get("budget"), spec.get("max_exemplars"),
            "selection-only" if spec.get("selection_only") else spec.get("model"), spec.get("retrieval") or "")


def _provenance_lines(provenance: list[tuple[str, int]]) -> list[str]:
    """What produced the rows (``bench.provenance``), and the code that wrote this report."""
    if not provenance:
        return []
    lines = ["## Provenance", "", "What produced the rows:", ""]
    lines += [f"- {count} row{'s' if count != 1 else ''}: {text}" for text, count in provenance]
    lines += ["", f"Scores and this report: {describe_code(code_provenance())}.", ""]
    return lines


def render_markdown(metrics: dict[str, dict], suite_name: str, plots: list[str],
                    comparisons: list[dict] | None = None,
                    provenance: list[tuple[str, int]] | None = None) -> str:
    lines = [f"# Benchmark report: {suite_name}", "",
             ("Scores in percent with 90 % confidence intervals (Wilson for exact match and shares such as prompts "
              "within budget, bootstrap over questions for F1). Budget and exemplar columns cover the rows whose "
              "selection is recorded. \"Answered wrong\": the model answered, not correctly; \"could not "
              "ask\": the LM call failed (counted wrong in the scores; transient failures are asked again by "
              "the next run of the same command)."), ""]
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for m in metrics.values():
        groups[_setting(m["spec"])].append(m)
    for setting, items in sorted(groups.items(), key=lambda kv: tuple(str(x) for x in kv[0])):
        dataset, pipeline, budget, M, model, retrieval = setting
        title = (f"## {dataset} · {pipeline} · budget {budget} · M={M} · {model}"
                 + (f" · {retrieval}" if retrieval else ""))
        lines += [title, ""]
        selection_only = items[0]["spec"].get("selection_only")
        if selection_only:
            cols = [("gold-case hit", "gold_case_hit"), ("program score", "program_score"),
                    ("modality match", "attribute_match.modality"), ("within budget", "within_budget"),
                    ("#exemplars", "mean_exemplars"), ("prompt tokens", "mean_prompt_tokens"),
                    ("selection ms (median)", "selection_ms_median")]
        else:
            cols = [("accuracy", "accuracy"), ("EM", "em"), ("F1", "f1"),
                    ("numerical, authors' rule", "authors_rule"), ("within budget", "within_budget"),
                    ("#exemplars", "mean_exemplars"), ("prompt tokens", "mean_prompt_tokens"),
                    ("answered wrong", "answered_wrong"), ("could not ask", "could_not_ask"),
                    ("internal errors", "internal_errors"), ("score errors", "score_errors"), ("n", "n")]
            if any((m["spec"].get("samples") or 1) > 1 for m in items):
                cols[-1:-1] = [("LM calls / q", "lm_calls_per_question"), ("tokens used / q", "tokens_per_question"),
                               ("votes of the answer", "mean_votes")]
            cols = [c for c in cols if any(m.get(c[1]) is not None for m in items)]
            for optional in ("score_errors", "internal_errors"):
                if not any(m.get(optional) for m in items):
                    cols = [c for c in cols if c[1] != optional]
            if any(m.get("em") is not None for m in items):  # accuracy is EM there: show it once
                cols = [c for c in cols if c[1] != "accuracy"]
        lines.append("| selector | " + " | ".join(c[0] for c in cols) + " |")
        lines.append("|---|" + "---|" * len(cols))
        for m in sorted(items, key=lambda m: m.get("label", "")):
            cells = []
            for _, key in cols:
                value = m.get(key)
                if isinstance(value, float) and f"{key}_ci" not in m:
                    cells.append(f"{value:.2f}" if key in ("program_score", "mean_exemplars") else f"{value:.1f}")
                else:
                    cells.append(_fmt(m, key))
            lines.append(f"| {m.get('label')} | " + " | ".join(cells) + " |")
        lines.append("")
        lines += _comparison_lines([c for c in comparisons or [] if tuple(c["setting"]) == setting])
        if not selection_only:
            quality = [m for m in items
                       if m.get("gold_case_hit") is not None or m.get("attribute_match.modality") is not None]
            if quality:
                lines += ["Selection quality (model-free):", "",
                          "| selector | gold-case hit | program score | modality match | selection ms (median) |",
                          "|---|---|---|---|---|"]
                for m in sorted(quality, key=lambda m: m.get("label", "")):
                    ps = m.get("program_score")
                    lines.append(f"| {m.get('label')} | {_fmt(m, 'gold_case_hit')} | "
                                 f"{'–' if ps is None else f'{ps:.3f}'} | {_fmt(m, 'attribute_match.modality')} | "
                                 f"{_fmt(m, 'selection_ms_median')} |")
                lines.append("")
    lines += _provenance_lines(provenance or [])
    if plots:
        lines += ["## Plots", ""] + [f"![{Path(p).stem}]({Path(p).name})" for p in plots] + [""]
    return "\n".join(lines)


def make_plots(metrics: dict[str, dict], out_dir: Path) -> list[str]:
    """Score and within-budget share vs M per budget (one line per selector); selection latency."""
    import matplotlib  # heavy, and the Agg backend must be chosen before pyplot is imported

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    items = list(metrics.values())
    written = []
    budgets = sorted({m["spec"].get("budget") for m in items if m["spec"].get("budget") is not None})
    ms = {m["spec"].get("max_exemplars") for m in items}
    if len(ms) > 1 and budgets:
        for key, label, fname in (("score", "score (%)", "score_vs_M.png"),
                                  ("within_budget", "prompts within budget (%)", "within_budget_vs_M.png")):
            fig, axes = plt.subplots(1, len(budgets), figsize=(5 * len(budgets), 3.6), squeeze=False)
            drawn = False
            for ax, budget in zip(axes[0], budgets, strict=True):
                by_selector = defaultdict(list)
                for m in items:
                    if m["spec"].get("budget") != budget:
                        continue
                    value = m.get("within_budget") if key == "within_budget" else (
                        m.get("f1") if m.get("f1") is not None else m.get("accuracy", m.get("gold_case_hit")))
                    if value is not None:
                        by_selector[m.get("label")].append((m["spec"].get("max_exemplars"), value))
                for selector, points in sorted(by_selector.items()):
                    points.sort()
                    ax.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=selector)
                    drawn = True
                ax.set_title(f"budget {budget}")
                ax.set_xlabel("M (max exemplars)")
                ax.set_ylabel(label)
                ax.grid(alpha=0.3)
                ax.legend(fontsize=8)
            fig.tight_layout()
            if drawn:
                path = out_dir / fname
                fig.savefig(path, dpi=110)
                written.append(str(path))
            plt.close(fig)
    lat = defaultdict(list)
    for m in items:
        if m.get("selection_ms_median") is not None:
            lat[m.get("label")].append(m["selection_ms_median"])
    if lat:
        fig, ax = plt.subplots(figsize=(6, 3.4))
        names = sorted(lat)
        ax.bar(names, [statistics.median(lat[n]) for n in names])
        ax.set_ylabel("selection latency, median ms")
        ax.set_title("exemplar selection latency per query")
        ax.tick_params(axis="x", rotation=30)
        fig.tight_layout()
        path = out_dir / "selection_latency.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(str(path))
    return written


def write_report(rows: Iterable[dict], out_dir: Path, suite_name: str) -> dict:
    """Write ``metrics.json``, ``comparisons.json`` (paired comparisons), the plots and ``report.md``."""
    out_dir = Path(out_dir)
    rows = list(rows)
    metrics = aggregate(rows)
    for m in metrics.values():
        m["score"] = m.get("f1") if m.get("f1") is not None else m.get("accuracy")
    (out_dir / "metrics.json").write_text(json.dumps(metrics, indent=2, default=str))
    comparisons = compare_selectors(rows, metrics)
    (out_dir / "comparisons.json").write_text(json.dumps(comparisons, indent=2, default=str))
    plots = make_plots(metrics, out_dir)
    (out_dir / "report.md").write_text(render_markdown(metrics, suite_name, plots, comparisons,
                                                       provenance_summary(rows)))
    return metrics
