"""Tokens and seconds per question in every report (metrics.json, report.md, the accuracy-vs-tokens plot), from
synthetic rows: figures only where the rows record them, blank otherwise."""

from __future__ import annotations

import json

import pytest

from knapsack_dspy.bench.reporting.plots import draw_plot
from knapsack_dspy.bench.reporting.report import write_report_files
from knapsack_dspy.bench.scoring.run_metrics import aggregate
from knapsack_dspy.bench.scoring.token_seconds import tokens_and_seconds

SPEC = {"dataset": "tatqa", "pipeline": "pot", "selector": "kate", "budget": 2048, "max_exemplars": 4,
        "model": "local/x", "selection_only": False}


def _row(i, run="kate", **fields):
    row = {"run": run, "spec": dict(SPEC, selector=run), "example_id": f"q{i}", "doc_id": f"d{i // 2}",
           "within_budget": True, "exemplar_ids": ["a", "b"], "prompt_tokens": 1000 + 100 * i,
           "selection_ms": 5.0, "latency_s": 10.0, "error": None, "correct": i % 2 == 0, "em": float(i % 2 == 0)}
    row.update(fields)
    return row


def _embedded_rows(run="kate"):
    """Four questions asked of an embedded model (timings, cache use, the prompt's parts: instructions of 400
    tokens, selectable evidence), one answered from the LM cache."""
    rows = [_row(i, run, lm_calls=1, prompt_tokens_used=1000 + 100 * i, cached_prompt_tokens=200 * i,
                 prefill_s=30.0 + i, decode_s=4.0, completion_tokens_used=20, instruction_tokens=400,
                 tokens_after_instructions=600 + 100 * i, pieces_kept=3 + i, pieces_offered=10)
            for i in range(4)]
    rows.append(_row(4, run, lm_calls=0, cache_hits=1, prompt_tokens_used=0, cached_prompt_tokens=0))
    return rows


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    import matplotlib.pyplot as plt

    plt.close("all")


def test_the_figures_of_rows_that_record_them():
    t = tokens_and_seconds(_embedded_rows())
    assert t["n"] == 5 and t["n_asked"] == 4  # the cache hit asked nothing: no LM figures from it
    assert t["prompt_tokens"]["mean"] == pytest.approx(1200.0) and t["prompt_tokens"]["median"] == 1200.0
    low, high = t["prompt_tokens"]["ci"]
    assert 1000 <= low < 1200 < high <= 1400
    assert t["lm_prompt_tokens"]["mean"] == pytest.approx(1150.0)
    # new to the prompt cache: reported - cached = 1000, 900, 800, 700
    assert t["new_prompt_tokens"] == {"mean": pytest.approx(850.0), "median": 850.0, "n": 4}
    assert t["prefill_s"]["mean"] == pytest.approx(31.5) and t["prefill_s"]["median"] == 31.5
    assert t["decode_s"]["mean"] == pytest.approx(4.0)
    # right: questions 0, 2, 4 of 1000 + 1100 + ... + 1400 = 6000 prompt tokens
    assert t["right_per_1k_prompt_tokens"] == pytest.approx(3 / 6000 * 1000)
    # the prompt's parts: after the instructions over the rows that record them (600 ... 900), demos of every row
    assert t["tokens_after_instructions"]["mean"] == pytest.approx(750.0) and t["tokens_after_instructions"]["n"] == 4
    assert t["demos"]["mean"] == 2.0 and t["demos"]["n"] == 5
    assert t["pieces_kept"]["mean"] == pytest.approx(4.5) and t["pieces_offered"]["mean"] == 10.0


def test_what_rows_do_not_record_stays_blank():
    old = [{k: v for k, v in _row(i, lm_calls=1).items()} for i in range(3)]  # no usage, no timings
    t = tokens_and_seconds(old)
    assert t["lm_prompt_tokens"] is None and t["new_prompt_tokens"] is None
    assert t["tokens_after_instructions"] is None and t["pieces_kept"] is None  # rows before the prompt's parts
    assert t["prefill_s"] is None and t["decode_s"] is None
    assert t["right_per_1k_prompt_tokens"] == pytest.approx(2 / 3300 * 1000)
    # a provider that reports usage but neither timings nor a cached token: "new" would be a guess
    api = [_row(i, lm_calls=1, prompt_tokens_used=900, cached_prompt_tokens=0) for i in range(3)]
    assert tokens_and_seconds(api)["new_prompt_tokens"] is None
    assert tokens_and_seconds(api)["lm_prompt_tokens"]["mean"] == 900.0
    # selection-only rows: prompt tokens, nothing else
    selection = [{k: v for k, v in _row(i).items() if k not in ("correct", "em")} for i in range(3)]
    t = tokens_and_seconds(selection, selection_only=True)
    assert t["prompt_tokens"]["mean"] == pytest.approx(1100.0)
    assert t["n_asked"] == 0 and t["right_per_1k_prompt_tokens"] is None and t["prefill_s"] is None


def test_metrics_and_report_carry_them_per_run(tmp_path):
    rows = _embedded_rows("kate") + [_row(i, "seer", lm_calls=1) for i in range(4)]
    write_report_files(rows, tmp_path, "unit")
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    by_selector = {m["spec"]["selector"]: m for m in metrics.values()}
    assert by_selector["kate"]["tokens_seconds"]["new_prompt_tokens"]["mean"] == pytest.approx(850.0)
    assert by_selector["seer"]["tokens_seconds"]["prefill_s"] is None
    assert by_selector["kate"]["prompt_tokens_ci"] == by_selector["kate"]["tokens_seconds"]["prompt_tokens"]["ci"]
    report = (tmp_path / "report.md").read_text()
    table = report.split("Tokens and seconds per question:")[1].split("\n\n")[2].splitlines()
    assert table[0].startswith("| run | prompt tokens (selection) | after the instructions | demos | "
                               "pieces shown / offered | rows that asked the LM |")
    kate = next(line for line in table if line.startswith("| kate "))
    cells = [c.strip() for c in kate.strip("|").split("|")]
    assert cells[2].startswith("750 [") and cells[2].endswith("/ 750") and cells[3] == "2.0 / 2.0"
    assert cells[4] == "4.5 / 10.0"
    assert cells[5] == "4" and cells[7] == "850 / 850" and cells[8] == "31.5 s / 31.5 s"
    assert cells[10] == f"{3 / 6000 * 1000:.3f}"
    seer = [c.strip() for c in next(line for line in table if line.startswith("| seer ")).strip("|").split("|")]
    assert seer[2] == "" and seer[4] == ""  # rows without the prompt's parts: blank
    assert seer[6:10] == ["", "", "", ""]  # rows without usage or timings: blank, not zero


def test_the_accuracy_plot_has_both_intervals():
    metrics = aggregate(_embedded_rows("kate") + [_row(i, "seer", lm_calls=1, prompt_tokens=800) for i in range(4)])
    ax = draw_plot("accuracy_vs_prompt_tokens.png", metrics).axes[0]
    bars = {c.get_label(): c for c in ax.containers}
    assert set(bars) == {"kate", "seer"}
    kate = bars["kate"]
    assert kate.has_xerr and kate.has_yerr
    x_segments = kate.lines[2][0].get_segments()  # the horizontal bars: the mean prompt tokens' interval
    (x_low, _), (x_high, _) = x_segments[0]
    assert x_low == pytest.approx(metrics_ci(metrics, "kate")[0]) and x_high == pytest.approx(
        metrics_ci(metrics, "kate")[1])
    assert "both" in ax.figure._suptitle.get_text()


def metrics_ci(metrics, selector):
    return next(m for m in metrics.values() if m["spec"]["selector"] == selector)["prompt_tokens_ci"]
