"""The report's plots (matplotlib, Agg backend), drawn from the per-run metrics (``run_metrics.aggregate``).

- ``accuracy_vs_prompt_tokens.png`` — each run's score against its mean prompt size, with interval bars: what a
  selector buys per prompt token (SEER's point: as good or better with fewer tokens, within the budget).
- ``score_vs_M.png`` / ``within_budget_vs_M.png`` — SEER's Figures 7-8 layout: one panel per token budget, the
  score and the share of prompts within the budget against the number of exemplars M (integer ticks), one
  line per selector, with interval bars. Runs with an exemplar budget (SEER's L, ``exemplar_budget``) get a
  panel per exemplar budget, and "within budget" is then the share of prompts whose exemplars fit it.
- ``accuracy_by_answer_type.png`` — exact match per gold answer type, one bar per run, with interval bars.
- ``time_per_question.png`` — mean seconds per question split into LM calls / exemplar selection / the rest.

Axes say what they show: exact match (TAT-QA), execution accuracy (FinQA), accuracy (SARA), or for
selection-only runs (no LM) the gold-case hit rate. A plot without data for the results directory is not
drawn; ``Plots.not_drawn`` says why, and a stale file of that name from an earlier report is removed.
"""

from __future__ import annotations

import io
from collections import defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from knapsack_dspy.bench.reporting.report_tables import format_duration
from knapsack_dspy.bench.scoring.run_metrics import score_key
from knapsack_dspy.docqa.tasks import TASKS

__all__ = ["PLOT_FILES", "Plots", "draw_plot", "make_plots", "score_axis_name"]

PLOT_FILES = ("accuracy_vs_prompt_tokens.png", "score_vs_M.png", "within_budget_vs_M.png",
              "accuracy_by_answer_type.png", "time_per_question.png")
_RETIRED_FILES = ("selection_latency.png",)  # drawn by earlier reports: removed when a report is rebuilt
_DPI = 100


@dataclass
class Plots:
    """The plot files written, and for each plot not drawn, why."""

    written: list[Path] = field(default_factory=list)
    not_drawn: dict[str, str] = field(default_factory=dict)


def score_axis_name(runs: list[Mapping], key: str) -> str:
    """What the score axis shows, by name: the gold-case hit rate (selection only), or the datasets' scores."""
    if key == "gold_case_hit":
        return "gold-case hit rate (%)"
    if key == "accuracy":
        return "accuracy (%)"
    names = sorted({TASKS[d].score_name if (d := m["spec"].get("dataset")) in TASKS else "exact match" for m in runs})
    return " / ".join(names) + " (%)"


def _scored_runs(items: list[dict]) -> tuple[list[dict], str | None]:
    """The runs a score plot shows and the score's key: the runs with answers if any (their exact match), else
    the selection-only runs (their gold-case hit rate)."""
    answered = [m for m in items if not m["spec"].get("selection_only")]
    runs = answered or items
    keys = [score_key(m) for m in runs]
    if not any(keys):
        return [], None
    key = next(k for k in keys if k)
    return [m for m in runs if m.get(key) is not None], key


def _family(m: Mapping) -> tuple:
    """Runs one panel or one line may join: dataset, pipeline, model (or selection only), retrieval."""
    spec = m["spec"]
    return (spec.get("dataset"), spec.get("pipeline"), "selection only" if spec.get("selection_only")
            else spec.get("model"), spec.get("retrieval") or "")


def _family_title(family: tuple) -> str:
    return " · ".join(str(part) for part in family if part)


_SHORT = {"budget": "b", "max_exemplars": "M"}


def _budget_of(m: Mapping) -> tuple:
    """What a run's budget is, as panels and lines tell them apart: (exemplar budget or None, whole budget)."""
    return m["spec"].get("exemplar_budget"), m["spec"].get("budget")


def _budget_name(budget: tuple) -> str:
    exemplars, whole = budget
    return f"budget {whole}" if exemplars is None else f"exemplars ≤ {exemplars} (prompt ≤ {whole})"


def _budget_order(budget: tuple) -> tuple:
    return tuple((value is None, value if value is not None else 0) for value in budget)


def _short_names(runs: list[dict]) -> dict[str, str]:
    """Each run's name in a legend: its label, plus the settings that differ between the runs shown."""
    keys = [k for k in ("dataset", "pipeline", "model", "budget", "max_exemplars", "retrieval")
            if len({str(m["spec"].get(k)) for m in runs}) > 1]
    return {m["run"]: " · ".join([str(m.get("label")), *(f"{_SHORT[k]}={m['spec'].get(k)}" if k in _SHORT
                                                          else str(m["spec"].get(k)) for k in keys)])
            for m in runs}


def _colors(items: list[dict]) -> dict[str, tuple]:
    import matplotlib

    labels = sorted({str(m.get("label")) for m in items})
    palette = matplotlib.colormaps["tab10"]
    return {label: palette(i % 10) for i, label in enumerate(labels)}


def _error(m: Mapping, key: str) -> tuple[float, float]:
    ci = m.get(f"{key}_ci")
    if not ci:
        return 0.0, 0.0
    return max(0.0, m[key] - ci[0]), max(0.0, ci[1] - m[key])


def _accuracy_vs_prompt_tokens(plt, items: list[dict]):
    runs, key = _scored_runs(items)
    runs = [m for m in runs if m.get("mean_prompt_tokens") is not None]
    if not runs:
        return "no run has both a score and recorded prompt sizes"
    families = defaultdict(list)
    for m in runs:
        families[_family(m)].append(m)
    colors = _colors(runs)
    fig, axes = plt.subplots(1, len(families), figsize=(6.4 * len(families), 4.0), squeeze=False)
    for ax, (family, members) in zip(axes[0], sorted(families.items(), key=lambda kv: str(kv[0])), strict=True):
        budgets = sorted({_budget_of(m) for m in members}, key=_budget_order)
        several_ms = len({m["spec"].get("max_exemplars") for m in members}) > 1
        lines = defaultdict(list)  # a line per selector (and budget, when several): its points differ in M
        for m in members:
            lines[str(m.get("label")), _budget_of(m) if len(budgets) > 1 else None].append(m)
        noted: set[tuple] = set()
        for (label, budget), points in sorted(lines.items(), key=lambda kv: str(kv[0])):
            points.sort(key=lambda m: m["mean_prompt_tokens"])
            xs = [m["mean_prompt_tokens"] for m in points]
            ys = [m[key] for m in points]
            low, high = zip(*(_error(m, key) for m in points), strict=True)
            # the mean prompt tokens' interval (bootstrap; runs aggregated before it existed have none: no bar)
            xerr = [[max(0.0, m["mean_prompt_tokens"] - m["prompt_tokens_ci"][0]) if m.get("prompt_tokens_ci")
                     else 0.0 for m in points],
                    [max(0.0, m["prompt_tokens_ci"][1] - m["mean_prompt_tokens"]) if m.get("prompt_tokens_ci")
                     else 0.0 for m in points]]
            style = ("-", "--", ":", "-.")[budgets.index(budget) % 4] if budget is not None else "-"
            ax.errorbar(xs, ys, yerr=[low, high], xerr=xerr, marker="o", capsize=4, color=colors[label],
                        label=label if budget is None else f"{label} · {_budget_name(budget)}",
                        linestyle=style if len(points) > 1 else "none")
            for m in points if several_ms else ():
                spot = (round(m["mean_prompt_tokens"] / 40), round(m[key]))  # one note where points coincide
                if spot not in noted:
                    noted.add(spot)
                    ax.annotate(f"M={m['spec'].get('max_exemplars')}", (m["mean_prompt_tokens"], m[key]),
                                textcoords="offset points", xytext=(4, 4), fontsize=7)
        for budget in sorted({m["spec"].get("budget") for m in members if m["spec"].get("budget")}):
            ax.axvline(budget, color="grey", linestyle=":", linewidth=1)
            ax.annotate(f"budget {budget}", (budget, 0), xycoords=("data", "axes fraction"), xytext=(3, 4),
                        textcoords="offset points", fontsize=7, color="grey")
        ax.set_xlabel("mean prompt tokens per question (counted at selection)")
        ax.set_ylabel(score_axis_name(members, key))
        ax.set_title(_family_title(family), fontsize=9)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(f"{score_axis_name(runs, key).removesuffix(' (%)')} vs prompt size (90 % interval bars of both)",
                 fontsize=10)
    return fig


def _versus_m(value_key: Callable[[list[dict]], tuple[list[dict], str | None, str]], missing: str):
    """A plot drawer in SEER's Figures 7-8 layout: one panel per budget, ``value`` against M, a line per run
    label (and family, when several), interval bars, integer M ticks; ``missing``: why it is not drawn when no
    run has the value."""

    def draw(plt, items: list[dict]):
        runs, key, axis = value_key(items)
        if not runs:
            return missing
        lines: dict[tuple, list[dict]] = defaultdict(list)
        families = {_family(m) for m in runs}
        for m in runs:
            lines[(_budget_of(m), str(m.get("label")), _family(m))].append(m)
        if not any(len({m["spec"].get("max_exemplars") for m in members}) > 1 for members in lines.values()):
            ms = sorted({m["spec"].get("max_exemplars") for m in runs}, key=str)
            return (f"no selector was run at more than one M (M = {', '.join(map(str, ms))}): nothing to draw "
                    "against M (benchmarks/budget_sweep.toml sweeps M)")
        budgets = sorted({_budget_of(m) for m in runs}, key=_budget_order)
        colors = _colors(runs)
        fig, axes = plt.subplots(1, len(budgets), figsize=(5.2 * len(budgets), 3.8), squeeze=False, sharey=True)
        for ax, budget in zip(axes[0], budgets, strict=True):
            panel_ms: set[int] = set()
            panel = sorted(((k, v) for k, v in lines.items() if k[0] == budget), key=lambda kv: str(kv[0]))
            for number, ((_, label, family), members) in enumerate(panel):
                members.sort(key=lambda m: m["spec"].get("max_exemplars"))
                xs = [m["spec"].get("max_exemplars") for m in members]
                panel_ms.update(xs)
                dodge = 0.06 * (number - (len(panel) - 1) / 2)  # interval bars of the lines side by side
                low, high = zip(*(_error(m, key) for m in members), strict=True)
                name = label if len(families) == 1 else f"{label} ({_family_title(family)})"
                ax.errorbar([x + dodge for x in xs], [m[key] for m in members], yerr=[low, high], marker="o",
                            capsize=3, color=colors[label], label=name)
            ax.set_xticks(sorted(panel_ms))
            ax.set_title(f"{_budget_name(budget)} tokens", fontsize=9)
            ax.set_xlabel("M (most exemplars per prompt)")
            ax.set_ylabel(axis)
            ax.grid(alpha=0.3)
            ax.legend(fontsize=8)
        fig.suptitle(f"{axis.removesuffix(' (%)')} vs M per budget (90 % interval bars)", fontsize=10)
        return fig

    return draw


def _score_vs_m_runs(items):
    runs, key = _scored_runs(items)
    return runs, key, score_axis_name(runs, key) if key else ""


def _within_budget_runs(items):
    answered = [m for m in items if not m["spec"].get("selection_only")]
    runs = [m for m in (answered or items) if m.get("within_budget") is not None]
    exemplar_budgets = any(_budget_of(m)[0] is not None for m in runs)
    return runs, "within_budget", ("prompts within budget (%)" if not exemplar_budgets
                                   else "prompts within budget, exemplars within theirs (%)")


def _accuracy_by_answer_type(plt, items: list[dict]):
    answered = [m for m in items if not m["spec"].get("selection_only")]
    if not answered:
        return "selection-only runs: no answers to score"
    runs = [m for m in answered if m.get("by_answer_type")]
    if not runs:
        return ("the questions' gold answer types are unknown (their eval split could not be read: check "
                "--data-dir)")
    types = sorted({t for m in runs for t in m["by_answer_type"]})
    names = _short_names(runs)
    colors = _colors([{"label": name} for name in names.values()])
    width = 0.8 / len(runs)
    fig, ax = plt.subplots(figsize=(max(6.4, 1.4 * len(types) * max(1, len(runs) / 3)), 3.8))
    counts: dict[str, int] = {}
    for i, m in enumerate(runs):
        xs, ys, low, high = [], [], [], []
        for j, answer_type in enumerate(types):
            part = m["by_answer_type"].get(answer_type)
            if not part or part.get("em") is None:
                continue
            counts.setdefault(answer_type, part["n"])
            xs.append(j - 0.4 + width * (i + 0.5))
            ys.append(part["em"])
            lo, hi = _error(part, "em")
            low.append(lo)
            high.append(hi)
        ax.bar(xs, ys, width=width * 0.95, yerr=[low, high], capsize=3, color=colors[names[m["run"]]],
               label=names[m["run"]])
    ax.set_xticks(range(len(types)))
    ax.set_xticklabels([f"{t}\n(n={counts.get(t, 0)})" for t in types], fontsize=8)
    ax.set_ylabel(score_axis_name(runs, "em"))
    ax.set_title("exact match per gold answer type (90 % interval bars)", fontsize=10)
    ax.grid(alpha=0.3, axis="y")
    ax.legend(fontsize=8)
    return fig


def _time_per_question(plt, items: list[dict]):
    runs = [m for m in items if m.get("time_per_question")]
    if not runs:
        return "no row records its time, or every answer came from the LM cache"
    times = [m["time_per_question"] for m in runs]
    split = all(t["lm"] is not None for t in times)
    asked = any(t["lm"] for t in times) or not split  # selection-only runs ask no LM: no LM part at all
    parts = []
    if asked:
        parts.append(("LM calls", "lm", "tab:blue") if split
                     else ("LM calls + other (rows do not record lm_seconds)", None, "tab:blue"))
    parts.append(("exemplar selection", "selection", "tab:orange"))
    if split:
        parts.append(("other (retrieval, running the program, scoring)" if asked
                      else "other (retrieval, embedding, selection quality)", "other", "tab:grey"))
    fig, ax = plt.subplots(figsize=(7.6, 0.32 * len(runs) + 1.6))
    short = _short_names(runs)
    names = [f"{short[m['run']]} (n={m['time_per_question']['n']})" for m in runs]
    left = [0.0] * len(runs)
    for title, key, color in parts:
        widths = [t[key] if key else t["total"] - t["selection"] for t in times]
        ax.barh(names, widths, left=left, color=color, label=title)
        left = [a + b for a, b in zip(left, widths, strict=True)]
    for y, t in enumerate(times):
        text = (f"LM {format_duration(t['lm'])} · " if split and asked else "") + \
            f"selection {format_duration(t['selection'])} · total {format_duration(t['total'])}"
        ax.annotate(text, (left[y], y), xytext=(4, 0), textcoords="offset points", va="center", fontsize=7)
    ax.set_xlim(0, max(left) * 1.8 if max(left) > 0 else 1)
    ax.invert_yaxis()  # the first run on top
    ax.set_xlabel("mean seconds per question")
    cached = sum(t.get("cached", 0) for t in times)
    fig.suptitle("time per question" + (f" ({cached} rows answered from the LM cache left out)" if cached else ""),
                 fontsize=10)
    ax.legend(fontsize=7, loc="lower left", bbox_to_anchor=(0, 1.0), ncol=len(parts), frameon=False)
    ax.grid(alpha=0.3, axis="x")
    return fig


_DRAWERS = {
    "accuracy_vs_prompt_tokens.png": _accuracy_vs_prompt_tokens,
    "score_vs_M.png": _versus_m(_score_vs_m_runs, "no run has a score"),
    "within_budget_vs_M.png": _versus_m(_within_budget_runs, "no run records its selections' prompt sizes"),
    "accuracy_by_answer_type.png": _accuracy_by_answer_type,
    "time_per_question.png": _time_per_question,
}


def _pyplot():
    import matplotlib  # heavy, and the Agg backend must be chosen before pyplot is imported

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save_small(figure, path: Path) -> None:
    """The figure as a PNG of at most 64 colours (flat plots look the same at a third of the size: pages embed
    them)."""
    from PIL import Image  # matplotlib's own dependency; only when a plot is written

    buffer = io.BytesIO()
    figure.savefig(buffer, dpi=_DPI, format="png")
    buffer.seek(0)
    with Image.open(buffer) as image:
        image.convert("RGB").quantize(colors=64, method=Image.Quantize.MEDIANCUT).save(path, optimize=True)


def draw_plot(name: str, metrics: Mapping[str, dict]):
    """The figure of plot ``name`` (one of ``PLOT_FILES``) for ``metrics``, or why it cannot be drawn (a str).
    The caller closes the figure."""
    items = sorted(metrics.values(), key=lambda m: str(m.get("label")))
    return _DRAWERS[name](_pyplot(), items)


def make_plots(metrics: Mapping[str, dict], out_dir: Path) -> Plots:
    """Draw every plot the metrics have data for into ``out_dir``; the others are listed with the reason (and
    an older file of their name removed, so no plot outlives its data)."""
    plt = _pyplot()
    out_dir = Path(out_dir)
    plots = Plots()
    for name in PLOT_FILES:
        path = out_dir / name
        figure = draw_plot(name, metrics)
        if isinstance(figure, str):
            plots.not_drawn[name] = figure
            path.unlink(missing_ok=True)
            continue
        figure.tight_layout()
        _save_small(figure, path)
        plt.close(figure)
        plots.written.append(path)
    for name in _RETIRED_FILES:
        (out_dir / name).unlink(missing_ok=True)
    return plots
