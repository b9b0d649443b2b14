"""experiments/throughput/throughput.py, throughput_tap.py and benchmarks/prefix_reuse.py: cells, suites, the
report's arithmetic, the timing tap, the reuse count (no model is run)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

from knapsack_dspy.testing import busy_loop, json_result

ROOT = Path(__file__).resolve().parents[2]
# the maintained script (benchmarks/) and issue 13's finished measurements (experiments/throughput/)
FOLDERS = {"prefix_reuse": ROOT / "benchmarks"}


def _script(name: str):
    folder = FOLDERS.get(name, ROOT / "experiments" / "throughput")
    spec = importlib.util.spec_from_file_location(name, folder / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    return module


throughput = _script("throughput")


def test_cell_names_round_trip_and_unknown_directories_are_ignored():
    for cell in (throughput.Cell("after-omp-active", "seer-canonical", "busy"),
                 throughput.Cell("baseline", "static", "quiet")):
        assert throughput.parse_cell(cell.name) == cell
    assert throughput.parse_cell("after-kate-quiet") is None and throughput.parse_cell("notes") is None


def test_the_cells_suites_are_the_issues_comparison():
    from knapsack_dspy.bench.suites.suite import suite_from_dict, tomllib

    text = throughput.suite_text(throughput.Cell("after", "seer-canonical", "quiet"), throughput.MODEL)
    (run,) = suite_from_dict(tomllib.loads(text)).runs
    assert (run.selector, run.budget, run.max_exemplars, run.demo_order) == ("seer", 2048, 4, "canonical")
    assert run.attributes == ("modality", "answer_type") and run.model == throughput.MODEL
    assert run.route == "extract_compute"  # after: the shipping pipeline
    baseline = throughput.suite_text(throughput.Cell("baseline", "hybrid", "busy"), throughput.MODEL)
    assert "demo_order" not in baseline and 'selector = "hybrid"' in baseline  # d74d4f8's RunSpec reads it
    assert "route" not in baseline  # d74d4f8 had one solver
    text = throughput.suite_text(throughput.Cell("after", "seer", "quiet"), throughput.MODEL, route="")
    assert suite_from_dict(tomllib.loads(text)).runs[0].route == ""
    text = throughput.suite_text(throughput.Cell("after", "hybrid-canonical", "busy"), throughput.MODEL)
    (run,) = suite_from_dict(tomllib.loads(text)).runs
    assert (run.selector, run.demo_order) == ("hybrid", "canonical")


def test_cells_leave_out_what_the_baseline_cannot_run():
    args = type("Args", (), {"loads": ["quiet"], "modes": ["seer", "seer-canonical"],
                             "variants": ["baseline", "after"]})
    assert [c.name for c in throughput.cells(args)] == ["baseline-seer-quiet", "after-seer-quiet",
                                                        "after-seer-canonical-quiet"]
    args.chunk, args.limit = 25, 60
    assert throughput.rounds(args) == [25, 50, 60]


def test_chosen_cells_run_in_the_order_given_on_each_load_and_bad_ones_are_refused(monkeypatch, capsys):
    seen = []
    monkeypatch.setattr(throughput, "plan", lambda args: seen.append([c.name for c in throughput.cells(args)]) or 0)
    assert throughput.main(["plan", "--cells", "after-hybrid-latency10,baseline-seer,after-omp-active-seer",
                            "--loads", "quiet,busy"]) == 0
    assert seen == [["after-hybrid-latency10-quiet", "baseline-seer-quiet", "after-omp-active-seer-quiet",
                     "after-hybrid-latency10-busy", "baseline-seer-busy", "after-omp-active-seer-busy"]]
    for bad in ("baseline-seer-latency16", "before-seer", "after-seer-latency0", "after"):
        with pytest.raises(SystemExit):
            throughput.main(["plan", "--cells", bad])
        assert "--cells" in capsys.readouterr().err


def test_the_plan_prices_the_baseline_with_spinning_waits_on_both_loads():
    def rates_used(variant, load):
        seconds = throughput.assumed_seconds(throughput.Cell(variant, "seer", load))
        return seconds - throughput.CALL_OVERHEAD_S - throughput.OTHER_S

    new = throughput.NEW_TOKENS[("baseline", "seer")]
    for load in ("quiet", "busy"):
        prefill, decode = throughput.ASSUMED_RATES[f"{load}-spinning"]
        expected = new / prefill + throughput.OUTPUT_TOKENS / decode
        assert rates_used("baseline", load) == pytest.approx(expected)
        assert rates_used("after-omp-active", load) != rates_used("after", load)
    # spinning waits decode faster on a quiet machine and slower beside a busy-loop
    spinning_gain = [throughput.ASSUMED_RATES[f"{load}-spinning"][1] / throughput.ASSUMED_RATES[load][1]
                     for load in ("quiet", "busy")]
    assert spinning_gain[0] > 1 > spinning_gain[1]


def test_the_busy_loop_runs_beside_the_block_and_is_stopped_after_it():
    with busy_loop.busy_loop(False) as nothing:
        assert nothing is None  # quiet: no process
    with busy_loop.busy_loop(True) as spinner:
        assert spinner.poll() is None  # running while the block runs
    assert spinner.poll() is not None  # stopped (and reaped) when it ends


def _cell(directory: Path, ems, seconds, calls):
    directory.mkdir(parents=True)
    rows = [{"run": "r", "example_id": f"q{i}", "em": em, "latency_s": s, "lm_seconds": s - 1,
             "predicted_latency_s": s / 2} for i, (em, s) in enumerate(zip(ems, seconds, strict=True))]
    rows.append({"run": "r", "example_id": "q9", "em": 0, "latency_s": 999, "error_kind": "transient"})  # asked again
    (directory / "predictions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (directory / "lm_calls.jsonl").write_text("".join(json.dumps(c) + "\n" for c in calls))


def test_the_report_computes_speed_cache_hits_and_paired_em(tmp_path):
    call = {"cache_n": 300, "prompt_n": 100, "prompt_ms": 4000.0, "predicted_ms": 2000.0}
    _cell(tmp_path / "baseline-seer-quiet", [1, 0, 1, 0], [40, 40, 40, 40], [{**call, "cache_n": 0}] * 4)
    _cell(tmp_path / "after-seer-quiet", [1, 0, 1, 1], [10, 10, 10, 10], [call] * 4)
    args = type("Args", (), {"out": str(tmp_path)})
    found = throughput.collect(args)
    after = found["after-seer-quiet"]
    assert after["questions"] == 4 and after["questions_per_hour"] == pytest.approx(360)
    assert after["em"] == 75 and after["cache_hit_rate"] == pytest.approx(75)
    assert (after["prefill_s"], after["decode_s"]) == (4.0, 2.0)
    assert found["baseline-seer-quiet"]["cache_hit_rate"] == 0
    (comparison,) = throughput.comparisons(found)
    assert comparison["speedup"] == pytest.approx(4.0)
    em = comparison["em_vs_baseline_seer"]
    assert em["n"] == 4 and em["diff"] == pytest.approx(25) and em["low"] <= 25 <= em["high"]
    table = throughput.report_markdown(found)
    assert (after["lm_s"], after["predicted_lm_s"]) == (9.0, 5.0)
    assert "| after-seer-quiet | 4 | 360.0 | 10.0 | 75.0 | – | 75 % | 4.0 | 2.0 | 9.0 | 5.0 |" in table
    assert "| after-seer-quiet | 4.00× (n=4) | 4.00× (n=4) |" in table


def test_speed_ups_compare_the_questions_both_cells_answered_and_em_is_also_paired_by_document(tmp_path):
    call = {"cache_n": 0, "prompt_n": 100, "prompt_ms": 1000.0, "predicted_ms": 1000.0}
    # the baseline went on to 6 questions, the last two slow; after stopped at 4 (an interrupted run)
    _cell(tmp_path / "baseline-seer-busy", [1, 0, 1, 0, 1, 1], [20, 20, 20, 20, 400, 400], [call] * 6)
    _cell(tmp_path / "after-hybrid-busy", [1, 1, 1, 0], [10, 10, 10, 10], [call] * 4)
    rows = [json.loads(r) for r in (tmp_path / "after-hybrid-busy" / "predictions.jsonl").read_text().splitlines()]
    for r in rows:
        r["doc_id"] = "d01"[int(r["example_id"][1:]) % 2]  # q0, q2 on one document; q1, q3 on another
    (tmp_path / "after-hybrid-busy" / "predictions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    found = throughput.collect(type("Args", (), {"out": str(tmp_path)}))
    (comparison,) = throughput.comparisons(found)
    assert comparison["speedup"] is None  # no baseline hybrid
    assert comparison["speedup_vs_baseline_seer"] == pytest.approx(2.0)  # not (20*4 + 800) / 6 / 10
    assert comparison["speedup_vs_baseline_seer_n"] == 4
    em = comparison["em_vs_baseline_seer"]
    assert em["n"] == 4 and em["diff"] == pytest.approx(25) and em["documents"] == 2
    assert em["document_low"] <= 25 <= em["document_high"]
    assert "| after-hybrid-busy | – | 2.00× (n=4) | +25.0" in throughput.report_markdown(found)


def test_latency_budget_modes_run_their_budget_and_compare_with_both_baselines(tmp_path):
    from knapsack_dspy.bench.suites.suite import suite_from_dict, tomllib

    cell = throughput.Cell("after", "hybrid-latency12.5", "busy")
    assert throughput.parse_cell(cell.name) == cell
    (run,) = suite_from_dict(tomllib.loads(throughput.suite_text(cell, throughput.MODEL))).runs
    assert (run.selector, run.latency_budget, run.budget, run.max_exemplars) == ("hybrid", 12.5, 2048, 4)
    assert throughput.parse_cell("after-hybrid-latency-quiet") is None  # no number of seconds
    for odd in ("seer-latency0", "seer-latency012", "seer-latency12.0"):  # refused, or one name per budget
        assert not throughput.valid_mode(odd) and throughput.parse_cell(f"after-{odd}-quiet") is None
    args = type("Args", (), {"loads": ["quiet"], "modes": ["seer-latency9", "static"],
                             "variants": ["baseline", "after"]})
    assert [c.name for c in throughput.cells(args)] == ["after-seer-latency9-quiet", "baseline-static-quiet",
                                                        "after-static-quiet"]
    call = {"cache_n": 0, "prompt_n": 100, "prompt_ms": 1000.0, "predicted_ms": 1000.0}
    _cell(tmp_path / "baseline-seer-quiet", [1, 0, 1, 0], [30, 30, 30, 30], [call] * 4)
    _cell(tmp_path / "baseline-hybrid-quiet", [1, 0, 1, 0], [20, 20, 20, 20], [call] * 4)
    _cell(tmp_path / "after-hybrid-latency12-quiet", [1, 0, 1, 1], [5, 5, 5, 5], [call] * 4)
    rows = (tmp_path / "after-hybrid-latency12-quiet" / "predictions.jsonl").read_text().splitlines()
    rows = [{**json.loads(r), "exemplar_ids": ["a"] * (i % 2)} for i, r in enumerate(rows)]
    (tmp_path / "after-hybrid-latency12-quiet" / "predictions.jsonl").write_text(
        "".join(json.dumps(r) + "\n" for r in rows))
    found = throughput.collect(type("Args", (), {"out": str(tmp_path)}))
    assert found["after-hybrid-latency12-quiet"]["demos"] == pytest.approx(0.5)  # the transient row is left out
    (comparison,) = throughput.comparisons(found)
    assert comparison["speedup"] == pytest.approx(4.0) and comparison["speedup_vs_baseline_seer"] == pytest.approx(6.0)
    with pytest.raises(SystemExit):
        throughput.main(["plan", "--modes", "hybrid-latency"])


def test_the_tap_logs_each_calls_timings(tmp_path, monkeypatch):
    tap = _script("throughput_tap")
    from knapsack_dspy.llm import local_server

    class Spec:
        model = "local/x"

    def chat(self, request):
        return {"choices": [], "timings": {"cache_n": 7, "prompt_n": 3, "prompt_ms": 30.0, "predicted_n": 2,
                                           "predicted_ms": 20.0}}

    monkeypatch.setattr(local_server.LocalServer, "chat", chat)
    log = tmp_path / "calls.jsonl"
    tap.tap(str(log))
    tap.tap(str(log))  # once only
    server = local_server.LocalServer.__new__(local_server.LocalServer)
    server.spec = Spec()
    server.chat({"messages": [], "cache_prompt": False})
    (record,) = [json.loads(line) for line in log.read_text().splitlines()]
    assert record["cache_n"] == 7 and record["prompt_ms"] == 30.0 and record["cache_prompt"] is False


def test_reuse_counts_the_prefix_each_prompt_shares_with_the_one_before():
    prefix_reuse = _script("prefix_reuse")
    stats = prefix_reuse.reuse([[1, 2, 3, 4], [1, 2, 3, 9], [1, 2, 3, 9, 5], [7]])
    assert stats["reused_tokens"] == 3 + 4 + 0 and stats["prompt_tokens"] == 14
    assert stats["reused_share"] == pytest.approx(7 / 14) and stats["mean_new_tokens"] == 1.8  # 7 / 4, rounded


def test_ask_latency_separates_start_up_from_each_questions_overhead():
    ask_latency = _script("ask_latency")
    run = {"exit_code": 0, "answers": [{"arrived_s": 30.0, "seconds": 12.0, "lm_seconds": 11.5},
                                       {"arrived_s": 40.5, "seconds": 10.3, "lm_seconds": 10.0},
                                       {"arrived_s": 52.0, "seconds": 11.2, "lm_seconds": 10.0}]}
    result = ask_latency.summary(run)
    assert result["startup_s"] == 18.0  # the first answer arrived 30 s in, 12 s of it answering
    assert [q["wall_s"] for q in result["questions"]] == [12.0, 10.5, 11.5]
    assert [q["overhead_s"] for q in result["questions"]] == [0.5, 0.5, 1.5]
    assert result["later_questions_within_lm_plus_1s"] is False  # the third question took 1.5 s more


def test_a_run_stops_when_a_bench_makes_no_progress(tmp_path, monkeypatch, capsys):
    args = type("Args", (), {"out": str(tmp_path), "limit": 2, "chunk": 1, "loads": ["quiet"], "modes": ["seer"],
                             "variants": ["baseline", "after"]})
    asked = []

    def bench(cell, upto, args):  # the baseline answers; the after cell refuses (exit 2, no row written)
        asked.append((cell.name, upto))
        if cell.variant == "after":
            return 2
        (tmp_path / cell.name).mkdir(exist_ok=True)
        with open(tmp_path / cell.name / "predictions.jsonl", "a") as handle:
            handle.write(json.dumps({"example_id": f"q{upto}", "em": 1, "latency_s": 1.0}) + "\n")
        return 0

    monkeypatch.setattr(throughput, "run_cell", bench)
    assert throughput.run(args) == 2
    assert asked == [("baseline-seer-quiet", 1), ("after-seer-quiet", 1)]  # stopped: not asked again and again
    assert "after-seer-quiet] bench exited with 2; stopping" in capsys.readouterr().err


def test_a_result_is_printed_and_saved_where_asked(tmp_path, capsys):
    json_result.print_and_save({"a": 1}, str(tmp_path / "r.json"), saved={"a": 1, "rows": [2]})
    json_result.print_and_save({"b": 2})  # no --json: printed only
    assert [json.loads(part) for part in capsys.readouterr().out.replace("}\n{", "}\x00{").split("\x00")] == [
        {"a": 1}, {"b": 2}]
    assert json.loads((tmp_path / "r.json").read_text()) == {"a": 1, "rows": [2]}


def test_runtime_options_prompts_differ_from_the_start_and_bad_settings_are_refused():
    options = _script("runtime_options")
    short, other, longer = options.synthetic_text(100, 7), options.synthetic_text(100, 1007), \
        options.synthetic_text(400, 7)
    assert short[:8] != other[:8]  # nothing for a prompt cache to reuse
    assert len(longer) > 3 * len(short)
    with pytest.raises(SystemExit):
        options.main(["--threads", "0"])
