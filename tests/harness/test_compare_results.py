"""bench/scoring/results_diff.py (benchmarks/compare_results.py): the behaviour check between two results
directories."""

import json
from pathlib import Path

import pytest

from knapsack_dspy.bench.scoring import results_diff as compare_results

RUN = "tatqa|pot|seer|b2048|m4|selection-only|b7234d21"


def _row(example_id, ids, run=RUN, **extra):
    return {"run": run, "example_id": example_id, "exemplar_ids": ids, "prompt_tokens": 1500,
            "within_budget": True, "selection_ms": 3.2, "latency_s": 0.01, "spec": {"seed": 0},
            "gold_case_hit": False, **extra}


def _write(directory: Path, rows, metrics=None):
    directory.mkdir()
    (directory / "predictions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    if metrics is not None:
        (directory / "metrics.json").write_text(json.dumps(metrics))
    return directory


def _metrics(run=RUN, **figures):
    return {run: {"run": run, "n": 2, "within_budget": 100.0, "selection_ms_median": 3.0, "spec": {}, **figures}}


def test_the_same_rows_and_figures_are_identical_whatever_the_timing(tmp_path):
    a = _write(tmp_path / "a", [_row("q1", ["e1", "e2"]), _row("q2", ["e3"])],
               _metrics(gold_case_hit=5.0, time_per_question={"n": 2, "total": 0.2, "selection": 0.19}))
    b = _write(tmp_path / "b", [_row("q2", ["e3"], selection_ms=9.9, latency_s=2.0), _row("q1", ["e1", "e2"])],
               _metrics(gold_case_hit=5.0, selection_ms_median=7.0,
                        time_per_question={"n": 2, "total": 0.1, "selection": 0.09}))
    result = compare_results.compare(a, b)
    assert compare_results.identical(result)
    assert result["matched"] == 2
    assert compare_results.main([str(a), str(b)]) == 0


def test_two_commits_differ_in_provenance_by_definition_and_that_is_no_difference(tmp_path):
    a = _write(tmp_path / "a", [_row("q1", ["e1"], provenance={"code": {"commit": "aaa"}})],
               _metrics(provenance=[["code aaa", 1]]))
    b = _write(tmp_path / "b", [_row("q1", ["e1"], provenance={"code": {"commit": "bbb"}})],
               _metrics(provenance=[["code bbb", 1]]))
    assert compare_results.identical(compare_results.compare(a, b))


def test_exemplar_order_prompt_tokens_and_figures_are_differences(tmp_path, capsys):
    a = _write(tmp_path / "a", [_row("q1", ["e1", "e2"]), _row("q2", ["e3"])], _metrics(gold_case_hit=5.0))
    b = _write(tmp_path / "b", [_row("q1", ["e2", "e1"]), _row("q2", ["e3"], prompt_tokens=1501)],
               _metrics(gold_case_hit=5.5))
    result = compare_results.compare(a, b)
    assert not compare_results.identical(result)
    assert result["fields"] == {"exemplar_ids": 1, "prompt_tokens": 1}
    assert result["rows_differing"] == 2
    assert [d["figure"] for d in result["metric_diffs"]] == ["gold_case_hit"]
    assert compare_results.main([str(a), str(b)]) == 1
    out = capsys.readouterr().out
    assert "exemplar_ids: 1 rows" in out and "DIFFERENT" in out


def test_missing_rows_on_either_side_are_reported(tmp_path):
    a = _write(tmp_path / "a", [_row("q1", ["e1"]), _row("q2", ["e3"])])
    b = _write(tmp_path / "b", [_row("q1", ["e1"]), _row("q3", ["e3"])])
    result = compare_results.compare(a, b)
    assert result["only_a"] == [(RUN, "q2")] and result["only_b"] == [(RUN, "q3")]
    assert not compare_results.identical(result)


def test_the_last_of_a_repeated_row_counts(tmp_path):
    a = _write(tmp_path / "a", [_row("q1", ["e9"]), _row("q1", ["e1"])])
    b = _write(tmp_path / "b", [_row("q1", ["e1"])])
    assert compare_results.identical(compare_results.compare(a, b))


def test_match_by_spec_ignores_the_settings_digest(tmp_path):
    other = RUN.rsplit("|", 1)[0] + "|0123abcd"
    a = _write(tmp_path / "a", [_row("q1", ["e1"])], _metrics(gold_case_hit=1.0))
    b = _write(tmp_path / "b", [_row("q1", ["e1"], run=other)], _metrics(run=other, gold_case_hit=1.0))
    assert not compare_results.identical(compare_results.compare(a, b))
    assert compare_results.identical(compare_results.compare(a, b, match="spec"))


def test_ignored_fields_and_unreadable_input(tmp_path, capsys):
    a = _write(tmp_path / "a", [_row("q1", ["e1"], answer="1")])
    b = _write(tmp_path / "b", [_row("q1", ["e1"], answer="2")])
    assert compare_results.identical(compare_results.compare(a, b, ignore=("answer",)))
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "predictions.jsonl").write_text("{not json\n")
    assert compare_results.main([str(a), str(tmp_path / "c")]) == 2
    assert "predictions.jsonl:1: corrupt results line" in capsys.readouterr().err
    with pytest.raises(compare_results.ResultsReadError, match="no such file"):
        compare_results.compare(a, tmp_path / "missing")


def test_floats_are_compared_to_a_relative_tolerance():
    assert compare_results.same_value(0.1 + 0.2, 0.3)
    assert not compare_results.same_value(0.3, 0.3001)
    assert not compare_results.same_value(True, 1)
    assert compare_results.same_value({"x": [1.0, None]}, {"x": [1, None]})
