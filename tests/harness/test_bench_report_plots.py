"""The report's plots, breakdowns and time split: drawn only with data, honest axes, integer M ticks, interval
bars; exact match per gold answer type and per route; comparisons bootstrapped by document."""

from __future__ import annotations

import json

import pytest

from knapsack_dspy.bench.reporting.plots import PLOT_FILES, draw_plot
from knapsack_dspy.bench.reporting.report import write_report_files
from knapsack_dspy.bench.scoring.run_metrics import aggregate


def _rows(selection_only=False, ms=(2, 4, 6), budgets=(1024, 2048), lm_seconds=True, route=False):
    """seer right on questions 0-7, kate on 0-4, of 10 questions on 5 documents, per (budget, M)."""
    rows = []
    for selector, right in (("seer", 8), ("kate", 5)):
        for budget in budgets:
            for m in ms:
                spec = {"dataset": "tatqa", "pipeline": "pot", "selector": selector, "budget": budget,
                        "max_exemplars": m, "model": "local/x", "selection_only": selection_only}
                for i in range(10):
                    row = {"run": f"{selector}|b{budget}|m{m}", "spec": spec, "example_id": f"q{i}",
                           "doc_id": f"d{i // 2}", "within_budget": selector == "seer" or m == 2,
                           "exemplar_ids": ["a"] * m, "prompt_tokens": 300 * m + (0 if selector == "kate" else -100),
                           "selection_ms": 500.0, "latency_s": 10.0, "error": None}
                    if selection_only:
                        row["gold_case_hit"] = i < right - 3
                    else:
                        row.update(correct=i < right, em=float(i < right), f1=float(i < right),
                                   lm_calls=1 if i else 0)  # question 0 answered from the LM cache
                        if lm_seconds:
                            row["lm_seconds"] = 8.0
                        if route:
                            row.update(route="extract" if i % 2 else "compute")
                    rows.append(row)
    return rows


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    import matplotlib.pyplot as plt

    plt.close("all")


FACTS = {("tatqa", f"q{i}"): {"question": f"question {i}?", "answer_type": "span" if i < 4 else "arithmetic"}
         for i in range(10)}


def test_score_and_budget_plots_follow_seers_layout_with_intervals_and_integer_ticks():
    metrics = aggregate(_rows())
    axes = draw_plot("score_vs_M.png", metrics).axes
    assert [ax.get_title() for ax in axes] == ["budget 1024 tokens", "budget 2048 tokens"]
    assert all(list(ax.get_xticks()) == [2, 4, 6] for ax in axes)  # integer M ticks, nothing between
    assert axes[0].get_ylabel() == "exact match (%)"
    assert len(axes[0].containers) == 2  # one errorbar container (line + interval bars) per selector
    assert sorted(t.get_text() for t in axes[0].get_legend().get_texts()) == ["kate", "seer"]
    within = draw_plot("within_budget_vs_M.png", metrics)
    assert within.axes[0].get_ylabel() == "prompts within budget (%)"
    # selection-only results: the score axis says what it is
    selection = draw_plot("score_vs_M.png", aggregate(_rows(selection_only=True)))
    assert selection.axes[0].get_ylabel() == "gold-case hit rate (%)"


def test_accuracy_against_prompt_tokens_marks_the_budgets():
    figure = draw_plot("accuracy_vs_prompt_tokens.png", aggregate(_rows(budgets=(2048,), ms=(4,))))
    ax = figure.axes[0]
    assert ax.get_xlabel().startswith("mean prompt tokens") and ax.get_ylabel() == "exact match (%)"
    points = {c.get_label(): c.lines[0].get_xydata().tolist() for c in ax.containers}
    assert points == {"seer": [[1100.0, 80.0]], "kate": [[1200.0, 50.0]]}
    assert any("budget 2048" in t.get_text() for t in ax.texts)


def test_plots_without_data_are_not_written_and_the_report_says_why(tmp_path):
    for stale in ("score_vs_M.png", "selection_latency.png", "accuracy_by_answer_type.png"):
        (tmp_path / stale).write_bytes(b"old")
    report = write_report_files(_rows(selection_only=True, ms=(4,)), tmp_path, "unit")
    not_drawn = report.plots.not_drawn
    assert "benchmarks/budget_sweep.toml" in not_drawn["score_vs_M.png"]
    assert not_drawn["accuracy_by_answer_type.png"] == "selection-only runs: no answers to score"
    assert {p.name for p in report.plots.written} | set(not_drawn) == set(PLOT_FILES)
    for name in not_drawn:
        assert not (tmp_path / name).exists()
    assert not (tmp_path / "selection_latency.png").exists()  # a retired plot is removed
    md = (tmp_path / "report.md").read_text()
    assert "Not drawn:" in md and "`score_vs_M.png`: no selector was run at more than one M" in md
    for path in report.plots.written:
        assert path.stat().st_size > 5000 and f"]({path.name})" in md


def test_time_per_question_splits_lm_selection_and_the_rest():
    (seer, *_) = [m for m in aggregate(_rows(ms=(2,), budgets=(1024,))).values() if m["label"] == "seer"]
    t = seer["time_per_question"]
    assert (t["n"], t["cached"]) == (9, 1)  # the question answered from the cache is left out
    assert (t["total"], t["lm"], t["selection"], t["other"]) == pytest.approx((10.0, 8.0, 0.5, 1.5))
    figure = draw_plot("time_per_question.png", aggregate(_rows(ms=(2,), budgets=(1024,))))
    assert figure.axes[0].get_legend().get_texts()[0].get_text() == "LM calls"
    # rows from before lm_seconds: LM and other are not split, and nothing claims they are
    old = aggregate(_rows(ms=(2,), budgets=(1024,), lm_seconds=False))
    assert all(m["time_per_question"]["lm"] is None for m in old.values())
    legend = [t.get_text() for t in draw_plot("time_per_question.png", old).axes[0].get_legend().get_texts()]
    assert legend == ["LM calls + other (rows do not record lm_seconds)", "exemplar selection"]
    selection_only = aggregate(_rows(selection_only=True, ms=(2,), budgets=(1024,)))
    assert all(m["time_per_question"]["lm"] == 0.0 for m in selection_only.values())


def test_answer_types_and_routes_break_the_scores_down(tmp_path):
    report = write_report_files(_rows(ms=(2,), budgets=(1024,), route=True), tmp_path, "unit", facts=FACTS)
    seer = next(m for m in report.metrics.values() if m["label"] == "seer")
    by_type = {t: (p["n"], p["em"]) for t, p in seer["by_answer_type"].items()}
    assert by_type == {"arithmetic": (6, pytest.approx(200 / 3)), "span": (4, 100.0)}
    assert {r: p["n"] for r, p in seer["by_route"].items()} == {"compute": 5, "extract": 5}
    (comparison,) = report.comparisons
    span = comparison["by_answer_type"]["span"]["em"]
    arithmetic = comparison["by_answer_type"]["arithmetic"]["em"]
    assert (span["n"], span["difference"]) == (4, 0.0)  # both right on every span question
    assert (arithmetic["n"], arithmetic["wins"], arithmetic["difference"]) == (6, 3, pytest.approx(50.0))
    assert comparison["em"]["clusters"] == 5  # 10 questions on 5 documents
    md = (tmp_path / "report.md").read_text()
    assert "Exact match per gold answer type:" in md and "Exact match per route:" in md
    assert "EM difference per gold answer type:" in md and "(n=6)" in md
    assert (tmp_path / "accuracy_by_answer_type.png").stat().st_size > 5000
    saved = json.loads((tmp_path / "comparisons.json").read_text())
    assert saved[0]["em"]["cluster_low"] <= saved[0]["em"]["difference"] <= saved[0]["em"]["cluster_high"]


def test_without_facts_there_is_no_answer_type_breakdown(tmp_path):
    report = write_report_files(_rows(ms=(2,), budgets=(1024,)), tmp_path, "unit")
    assert not any("by_answer_type" in m for m in report.metrics.values())
    assert "eval split could not be read" in report.plots.not_drawn["accuracy_by_answer_type.png"]
