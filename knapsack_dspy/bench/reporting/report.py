"""Aggregate ``predictions.jsonl`` into ``metrics.json``, ``comparisons.json``, PNG plots and ``report.md``.

``report.md`` follows SEER's Table 1 layout: one table per setting (dataset, pipeline, budget, M, model),
rows = selectors, columns = metrics with 90 % confidence intervals; then paired comparisons of the selectors
on the questions they share (per question and by document, also per gold answer type: ``comparisons.json``),
the selection-quality metrics (model-free), exact match per gold answer type and per route, the time per
question, the runs whose token counts are estimates (``token_count`` of the rows), how each LM call's prompt
tokens as counted here agree with those its provider reported (``token_agreement``), the provenance of the rows and
the plots (``bench.reporting.plots``; a plot without data is listed with the
reason). The parts: ``run_metrics`` (per-run metrics), ``comparisons``, ``report_tables``, ``plots``.
The per-question page is ``kdspy report`` (``bench.reporting.results_page``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from knapsack_dspy.bench.reporting.plots import Plots, make_plots
from knapsack_dspy.bench.reporting.report_tables import Table, report_tables
from knapsack_dspy.bench.reporting.token_agreement import token_agreement_lines
from knapsack_dspy.bench.results.provenance import code_provenance, describe_code, provenance_summary
from knapsack_dspy.bench.results.question_facts import QuestionFacts
from knapsack_dspy.bench.results.row_schema import as_row
from knapsack_dspy.bench.scoring.comparisons import compare_selectors
from knapsack_dspy.bench.scoring.run_metrics import aggregate
from knapsack_dspy.file_limits import read_json
from knapsack_dspy.llm.recorded_replies import REPLAY_CHECK_FILE

__all__ = ["Report", "aggregate", "render_markdown", "token_count_lines", "token_count_note", "write_report",
           "write_report_files"]

INTRO = ("Scores in percent with 90 % confidence intervals (Wilson for exact match and shares such as prompts "
         "within budget, bootstrap over questions for F1). Budget and exemplar columns cover the rows whose "
         "selection is recorded. \"Answered wrong\": the model answered, not correctly; \"could not "
         "ask\": the LM call failed (counted wrong in the scores; transient failures are asked again by "
         "the next run of the same command).")


@dataclass
class Report:
    """What a report was built from and drew: per-run metrics, paired comparisons, tables, plots."""

    metrics: dict[str, dict]
    comparisons: list[dict]
    tables: list[Table]
    plots: Plots


def _provenance_lines(provenance: list[tuple[str, int]]) -> list[str]:
    """What produced the rows (``bench.results.provenance``), and the code that wrote this report."""
    if not provenance:
        return []
    lines = ["## Provenance", "", "What produced the rows:", ""]
    lines += [f"- {count} row{'s' if count != 1 else ''}: {text}" for text, count in provenance]
    lines += ["", f"Scores and this report: {describe_code(code_provenance())}.", ""]
    return lines


def token_count_note(metrics: dict[str, dict]) -> str | None:
    """One line naming the runs whose token counts are estimates (the per-question page's notes), or None."""
    estimated = [str(m.get("label", m.get("run"))) for m in metrics.values() if m.get("token_count_estimated")]
    if not estimated:
        return None
    return (f"token counts are estimates in {', '.join(estimated)} (no tokenizer known offline for the model: "
            "tiktoken cl100k_base): prompt tokens and within budget are approximate there")


def token_count_lines(metrics: dict[str, dict]) -> list[str]:
    """The runs whose prompts were counted with an estimate (no tokenizer known for their model offline), so
    their prompt tokens and within-budget shares are approximate; nothing when every count is exact."""
    estimated = [m for m in metrics.values() if m.get("token_count_estimated")]
    if not estimated:
        return []
    lines = ["## Token counts", "",
             "These runs' prompts were counted with an **estimate** (no tokenizer known offline for their model: "
             "tiktoken `cl100k_base`), so their prompt tokens and within-budget shares are approximate and a "
             "prompt may in fact exceed the budget:", ""]
    for m in estimated:
        spec = m.get("spec") or {}
        lines.append(f"- {m.get('label', m.get('run'))} ({spec.get('model')}, budget {spec.get('budget')}): "
                     f"{m['token_count_estimated']} of {m.get('n_selected')} prompts")
    return [*lines, ""]


def replay_lines(rows: list, out_dir: Path) -> list[str]:
    """``## Replayed replies`` when some rows took replies from recorded ones (``kdspy bench --reuse``): how many,
    and whether re-asking a sample of them (``--verify N``, ``replay_check.json``) found the model answering the
    same -- paired comparisons that mix replayed and live replies are exact only then."""
    replayed = [r for r in rows if (as_row(r).replayed or 0) > 0]
    if not replayed:
        return []
    lines = ["## Replayed replies", "",
             f"{len(replayed)} of {len(rows)} rows took some reply from an earlier run's recorded replies "
             "(`kdspy bench --reuse`)."]
    path = Path(out_dir) / REPLAY_CHECK_FILE
    check = None
    if path.is_file():
        try:
            check = read_json(path)
        except (OSError, ValueError):
            check = None
    if not isinstance(check, dict) or not check.get("asked"):
        lines.append("Not checked against the model (`--verify N` re-asks N of them): a comparison between runs "
                     "that pairs replayed with live replies is exact only as far as the model would answer the "
                     "same again.")
    elif check.get("identical") == check.get("asked"):
        lines.append(f"Re-asked live: {check['identical']} of {check['asked']} identical ({REPLAY_CHECK_FILE}).")
    else:
        lines.append(f"Re-asked live: only {check.get('identical')} of {check.get('asked')} identical "
                     f"({REPLAY_CHECK_FILE}): compare runs on rows produced live in one run, not on these.")
    return [*lines, ""]


def render_markdown(tables: list[Table], suite_name: str, plots: Plots,
                    provenance: list[tuple[str, int]] | None = None,
                    token_counts: list[str] | None = None, replays: list[str] | None = None,
                    token_agreement: list[str] | None = None) -> str:
    lines = [f"# Benchmark report: {suite_name}", "", INTRO, ""]
    heading = None
    for table in tables:
        if table.setting and table.setting != heading:
            heading = table.setting
            lines += [f"## {heading}", ""]
        elif not table.setting and heading is not None:
            heading = None
            lines += ["## Across settings", ""]
        lines += table.markdown()
    lines += token_counts or []
    lines += token_agreement or []
    lines += replays or []
    lines += _provenance_lines(provenance or [])
    if plots.written or plots.not_drawn:
        lines += ["## Plots", ""] + [f"![{p.stem}]({p.name})" for p in plots.written] + [""]
        if plots.not_drawn:
            lines += ["Not drawn:", ""] + [f"- `{name}`: {why}" for name, why in plots.not_drawn.items()] + [""]
    lines += ["Every question, each run's answer, exemplars and program side by side: `kdspy report <this "
              "directory>` writes `page.html` (one self-contained file; open it from disk).", ""]
    return "\n".join(lines)


def write_report_files(rows: Iterable[dict], out_dir: Path, suite_name: str,
                       facts: QuestionFacts | None = None) -> Report:
    """Write ``metrics.json``, ``comparisons.json``, the plots and ``report.md``. ``facts`` (the rows' questions:
    ``bench.results.question_facts``) add the scores and comparisons per gold answer type."""
    out_dir = Path(out_dir)
    rows = list(rows)
    metrics = aggregate(rows, facts)
    (out_dir / "metrics.json").write_text(json.dumps(metrics, indent=2, default=str))
    comparisons = compare_selectors(rows, metrics, facts)
    (out_dir / "comparisons.json").write_text(json.dumps(comparisons, indent=2, default=str))
    plots = make_plots(metrics, out_dir)
    tables = report_tables(metrics, comparisons)
    (out_dir / "report.md").write_text(render_markdown(tables, suite_name, plots, provenance_summary(rows),
                                                       token_count_lines(metrics), replay_lines(rows, out_dir),
                                                       token_agreement_lines(rows, metrics)))
    return Report(metrics, comparisons, tables, plots)


def write_report(rows: Iterable[dict], out_dir: Path, suite_name: str, facts: QuestionFacts | None = None) -> dict:
    """``write_report_files``; returns the per-run metrics."""
    return write_report_files(rows, out_dir, suite_name, facts).metrics
