"""DSPy's own optimizers as bench baselines beside our selectors (``bench/programs/dspy_baselines.py``): the same rows
and budget accounting (their first prompts measured), selection-only runs for the LM-free ones, LM-compiled ones with
a stand-in LM; and suites checked whole before anything runs."""

import json
import re

import pytest
from dspy.utils import DummyLM
from helpers import FieldFillingLM, HashingEmbedder, WordCounter, needs_tatqa

from knapsack_dspy.bench.execution.runner import run_suite
from knapsack_dspy.bench.programs.dspy_baselines import BOOTSTRAP_DEMOS
from knapsack_dspy.bench.results.store import load_rows
from knapsack_dspy.bench.suites.suite import SuiteError, suite_from_dict
from knapsack_dspy.cli.main import main
from knapsack_dspy.docqa.pipelines.answer_type_router import EXTRACT_TYPES

pytestmark = needs_tatqa  # the fixture ``data`` (conftest): a TAT-QA slice



def suite(**over):
    raw = {"name": "t", "dataset": "tatqa", "pipeline": "pot", "route": "", "budget": 2500, "max_exemplars": 3,
           "model": "openai/dummy", "attributes": ["modality"], "val_size": 4}
    raw.update(over)
    return suite_from_dict(raw)


def run(tmp_path, data, monkeypatch, the_suite, lm_factory=None, **kw):
    from knapsack_dspy.bench.programs import run_program
    pool, tune = data
    monkeypatch.setattr(run_program, "load_split", lambda spec, which, data_dir: pool if which == "pool" else tune)
    metrics = run_suite(the_suite, tmp_path, embedder=HashingEmbedder(), token_counter_factory=lambda m: WordCounter(),
                        lm_factory=lm_factory or (lambda spec: DummyLM([{"program": "ans = 1"}] * 500)),
                        progress=False, log=lambda msg: None, **kw)
    rows = load_rows(tmp_path)
    return metrics, rows


def test_lm_free_baselines_run_selection_only_with_the_same_accounting(tmp_path, data, monkeypatch):
    metrics, rows = run(tmp_path, data, monkeypatch,
                        suite(selector=["seer", "dspy_knn", "dspy_labeled"], selection_only=True))
    by = {}
    for row in rows:
        by.setdefault(row["spec"]["selector"], []).append(row)
    pool_ids = {ex.id for ex in data[0]}
    for name in ("dspy_knn", "dspy_labeled"):
        assert len(by[name]) == len(data[1])
        for row in by[name]:
            assert row["error"] is None and len(row["exemplar_ids"]) == 3
            assert set(row["exemplar_ids"]) <= pool_ids
            assert row["prompt_tokens"] > 0 and row["within_budget"] == (row["prompt_tokens"] + 256 <= 2500)
    labeled = {tuple(r["exemplar_ids"]) for r in by["dspy_labeled"]}
    assert len(labeled) == 1  # LabeledFewShot: one random set for every question
    assert len({tuple(r["exemplar_ids"]) for r in by["dspy_knn"]}) > 1  # KNN: per question
    report = (tmp_path / "report.md").read_text()
    assert "| dspy_knn |" in report and "| dspy_labeled |" in report
    assert {m["spec"]["selector"] for m in metrics.values()} == {"seer", "dspy_knn", "dspy_labeled"}


def test_an_answered_baseline_row_measures_the_prompt_the_lm_got(tmp_path, data, monkeypatch):
    lms = []

    def factory(spec):
        lms.append(DummyLM([{"program": "ans = 1"}] * 50))
        return lms[-1]

    _, rows = run(tmp_path, data, monkeypatch, suite(selector="dspy_knn"), lm_factory=factory)
    (lm,) = lms
    first_calls = [entry for entry in lm.history if "failed_program" not in entry["messages"][0]["content"]]
    assert len(rows) == len(first_calls) == len(data[1])
    for row, entry in zip(rows, first_calls, strict=True):
        assert row["prompt_tokens"] == WordCounter().count_messages(entry["messages"])
        assert sum(m["role"] == "assistant" for m in entry["messages"]) == len(row["exemplar_ids"]) == 3
        assert row["answer"] == 1


def test_a_routed_pipeline_gets_a_baseline_per_demo_predictor(tmp_path, data, monkeypatch):
    """route = "extract_compute": the router is fitted on the pool, the extractor's demos are its span questions,
    and an answered row's prompt is the one of the predictor the question was routed to."""
    routed = dict(route="extract_compute", attributes=["modality", "answer_type"])
    _, rows = run(tmp_path / "sel", data, monkeypatch, suite(selector=["dspy_labeled", "dspy_knn"],
                                                             selection_only=True, **routed))
    assert all(r["error"] is None and len(r["exemplar_ids"]) == 3 and r["prompt_tokens"] > 0 for r in rows)
    answer_type = {ex.id: ex.get("answer_type") for ex in data[0]}
    labeled = {tuple(r["exemplar_ids"]) for r in rows if r["spec"]["selector"] == "dspy_labeled"}
    assert len(labeled) == 2  # one random set per demo predictor: the program writer's and the extractor's
    assert any(all(answer_type[i] in EXTRACT_TYPES for i in ids) for ids in labeled)

    lm = FieldFillingLM({"program": 'ans = 1\nscale = ""', "answer": "1", "scale": ""})
    _, answered = run(tmp_path / "lm", data, monkeypatch, suite(selector="dspy_knn", **routed),
                      lm_factory=lambda spec: lm)
    assert {r["route"] for r in answered} == {"extract", "compute"}
    question = {ex.id: ex.question for ex in data[1]}
    for row in answered:
        assert row["error"] is None
        prompt = next(p for p in lm.prompts if asked(p) == question[row["example_id"]])
        assert ("`program`" in prompt[0]["content"]) == (row["route"] == "compute")
        assert row["prompt_tokens"] == WordCounter().count_messages(prompt)
        if row["route"] == "extract":
            assert all(answer_type[i] in EXTRACT_TYPES for i in row["exemplar_ids"])


def test_baselines_answer_with_worker_threads(tmp_path, data, monkeypatch, capsys):
    """--workers 3: each row measures its own question's prompt; KNN's output hidden per thread, print intact."""
    lm = FieldFillingLM({"program": 'ans = 1\nscale = ""'})
    _, rows = run(tmp_path, data, monkeypatch, suite(selector=["dspy_knn", "dspy_labeled"]),
                  lm_factory=lambda spec: lm, workers=3)
    question = {ex.id: ex.question for ex in data[1]}
    assert len(rows) == 2 * len(data[1])
    for row in rows:
        assert row["error"] is None and len(row["exemplar_ids"]) == 3
        prompts = [p for p in lm.prompts if asked(p) == question[row["example_id"]]
                   and [m["content"] for m in p if m["role"] == "assistant"]]
        assert row["prompt_tokens"] in {WordCounter().count_messages(p) for p in prompts}
    capsys.readouterr()
    print("still printing")
    assert capsys.readouterr().out == "still printing\n"


def asked(messages) -> str:
    """The question of a prompt's last user message."""
    return re.search(r"\[\[ ## question ## \]\]\n(.*)", messages[-1]["content"]).group(1).strip()


def test_baselines_that_compile_with_an_lm(tmp_path, data, monkeypatch):
    pytest.importorskip("optuna")
    pool, tune = data
    small = (pool[:16], tune[:2])
    lm = FieldFillingLM({"program": 'ans = 1\nscale = ""', "proposed_instruction": "Write the program carefully."})
    names = ["dspy_bootstrap", "dspy_bootstrap_rs", "dspy_mipro0"]
    _, rows = run(tmp_path, small, monkeypatch, suite(selector=names), lm_factory=lambda spec: lm)
    assert len(rows) == 6 and all(r["error"] is None and r["prompt_tokens"] > 0 for r in rows)
    programs = sorted(p.name for p in (tmp_path / "programs").glob("*.json") if not p.name.endswith("report.json"))
    assert len(programs) == 3  # compiled once, saved; a re-run reloads them
    reports = [json.loads(p.read_text()) for p in (tmp_path / "programs").glob("*.report.json")]
    bootstrap = next(r for r in reports if r["baseline"] == "dspy_bootstrap")
    assert bootstrap["optimizer"] == "BootstrapFewShot"
    assert {"lm_calls", "seconds"} <= set(bootstrap["cost"])  # the compile's cost, reported with the arm
    assert all(len(r["exemplar_ids"]) <= 2 * BOOTSTRAP_DEMOS for r in rows if r["spec"]["selector"] == names[0])
    calls = len(lm.prompts)
    run(tmp_path, small, monkeypatch, suite(selector=names, limit=2), lm_factory=lambda spec: lm)
    assert len(lm.prompts) == calls  # nothing left to do, nothing recompiled


def test_a_selection_only_run_of_an_lm_baseline_is_refused_before_it_starts(tmp_path, data, monkeypatch):
    with pytest.raises(SuiteError, match=r"dspy_mipro0 compiles with an LM .*not in a selection-only run"):
        run(tmp_path, data, monkeypatch, suite(selector=["seer", "dspy_mipro0"]), selection_only=True)
    assert not (tmp_path / "predictions.jsonl").exists()


def test_baselines_are_refused_on_ray_workers_before_anything_runs(tmp_path, data, monkeypatch):
    with pytest.raises(SuiteError, match=r"dspy_knn: DSPy's optimizers run in this process only .* use --workers N"):
        run(tmp_path, data, monkeypatch, suite(selector=["seer", "dspy_knn"]), ray="auto")
    assert not (tmp_path / "predictions.jsonl").exists()


def test_a_bad_suite_is_reported_whole_before_anything_runs(tmp_path, capsys):
    bad = tmp_path / "bad.toml"
    bad.write_text('name = "bad"\nselector = ["seer", "sear"]\nbudget = 2048\n\n[[runs]]\npipeline = "pot"\n'
                   'alpha = 2.0\n\n[[runs]]\npipeline = "potx"\nmax_exemplar = 4\n')
    code = main(["bench", str(bad), "--selection-only", "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 2 and not (tmp_path / "out").exists()
    assert f"{bad}: 5 problems:" in err
    for line in ["runs[0] selector: unknown selector 'sear'", "runs[0] alpha: alpha must be a number in [0, 1]",
                 "runs[1] max_exemplar: unknown key", "runs[1] pipeline: unknown pipeline 'potx' for tatqa",
                 "runs[1] selector: unknown selector 'sear'"]:
        assert line in err


def test_bootstrap_few_shot_runs_the_program_as_its_own_teacher(tmp_path, data, monkeypatch):
    """dspy_bootstrap: BootstrapFewShot(max_bootstrapped_demos=4, max_labeled_demos=4) runs the program on the pool
    (the LM's calls before the first question) and the answered row's prompt holds its demos."""
    pool, tune = data
    lm = FieldFillingLM({"program": 'ans = 1\nscale = ""'})
    _, rows = run(tmp_path, (pool[:12], tune[:1]), monkeypatch, suite(selector="dspy_bootstrap"),
                  lm_factory=lambda spec: lm)
    (row,) = rows
    assert row["error"] is None and 0 < len(row["exemplar_ids"]) <= 2 * BOOTSTRAP_DEMOS
    assert len(lm.prompts) > 1  # the teacher's calls on the pool, then the question's


def test_a_run_may_ask_for_the_prompt_cache_and_its_key_says_so():
    """``prompt_cache = true``: the embedded model's cache even under KDSPY_LOCAL_REPRODUCIBLE=1 (its LM asks for
    ``cache_prompt``); a run of another identity than the same run without it, whose key is unchanged."""
    from knapsack_dspy.bench.execution.run_job import default_lm

    plain, cached = suite(selector="dspy_labeled").runs[0], suite(selector="dspy_labeled", prompt_cache=True).runs[0]
    assert plain.key != cached.key and plain.key == suite(selector="dspy_labeled").runs[0].key
    local = suite(selector="dspy_labeled", prompt_cache=True, model="local/qwen2.5-coder-0.5b-instruct").runs[0]
    assert default_lm(local).kwargs.get("cache_prompt") is True
    assert "cache_prompt" not in default_lm(cached).kwargs  # not a local model: nothing to ask
