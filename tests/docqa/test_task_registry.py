"""A data set is one task module: a toy task defined in this file alone (its record parser, its metric, its
``Task``) compiles, runs in the bench (selection only and answered by ``DummyLM``), is scored and reported -- and
the registry's rules hold for the built-in tasks."""

import dataclasses
import json

import pytest
from dspy.utils import DummyLM
from helpers import HashingEmbedder, WordCounter

from knapsack_dspy.bench.execution.runner import run_suite
from knapsack_dspy.bench.results.store import load_rows
from knapsack_dspy.bench.suites.suite import SuiteError, suite_from_dict
from knapsack_dspy.cli.main import main
from knapsack_dspy.docqa.data import load_examples
from knapsack_dspy.docqa.data.example_fields import blank_fields
from knapsack_dspy.docqa.data.loader import DATASETS, DatasetSpec
from knapsack_dspy.docqa.pipelines.pipeline import load_program
from knapsack_dspy.docqa.tasks import (
    TASKS,
    Task,
    UnknownTaskError,
    build_pipeline,
    register_task,
    task_named,
    unregister_task,
)

# -- the toy task: everything a new data set needs ------------------------------------------------------------


def parse_toy_record(record, split):
    """One record of toyqa/<split>.jsonl -> the uniform fields."""
    fields = blank_fields("toyqa")
    fields.update(id=record["id"], doc_id=record["doc"], question=record["question"], table=record["table"],
                  paragraphs=record["text"], answer=record["answer"], answer_type="span")
    return [fields]


def score_toy_answer(example, prediction):
    right = str(getattr(prediction, "answer", "") or "").strip() == str(example.get("answer"))
    return {"correct": right, "em": float(right)}


TOY = Task(name="toyqa", files=DatasetSpec("toyqa", "toyqa", ("{split}.jsonl",), parse_toy_record, ("pool", "eval")),
           score=score_toy_answer, score_name="exact match", pipelines=("few_shot", "zero_shot"),
           compile_splits=("pool", "eval"), attributes=(), description="a toy table + text task")

# ---------------------------------------------------------------------------------------------------------------


def _record(k: int, split: str) -> dict:
    return {"id": f"{split}{k}", "doc": f"{split}-doc{k // 2}", "question": f"What was the revenue of unit {k}?",
            "table": [["", "2019"], [f"Revenue {k}", str(100 + k)]], "text": [f"Unit {k} grew."],
            "answer": str(100 + k)}


@pytest.fixture
def toy(tmp_path, monkeypatch):
    data = tmp_path / "data"
    (data / "toyqa").mkdir(parents=True)
    for split, n in (("pool", 12), ("eval", 4)):
        lines = [json.dumps(_record(k, split)) for k in range(n)]
        (data / "toyqa" / f"{split}.jsonl").write_text("\n".join(lines) + "\n")
    monkeypatch.setenv("KDSPY_DATA_DIR", str(data))
    monkeypatch.setenv("KDSPY_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    register_task(TOY)
    yield data
    unregister_task("toyqa")
    assert "toyqa" not in TASKS and "toyqa" not in DATASETS


def _suite(**over):
    raw = {"name": "toy", "dataset": "toyqa", "pool_split": "pool", "eval_split": "eval", "pipeline": "few_shot",
           "selector": ["kate_within_budget", "no_demos"], "budget": 2000, "max_exemplars": 2,
           "model": "openai/dummy"}
    raw.update(over)
    return suite_from_dict(raw)


def _bench(out, suite, answer="102"):
    return run_suite(suite, out, embedder=HashingEmbedder(), token_counter_factory=lambda m: WordCounter(),
                     lm_factory=lambda spec: DummyLM([{"answer": answer, "scale": "none"}] * 50),
                     progress=False, log=lambda msg: None)


def test_a_registered_task_loads_and_builds_its_program(toy):
    pool = load_examples("toyqa", split="pool")
    assert len(pool) == 12 and pool[0].answer == "100"
    program = build_pipeline("toyqa", "few_shot", embedder=HashingEmbedder(), token_counter=WordCounter())
    assert program.spec.spec["pipeline"] == "few_shot" and "route" not in program.spec.spec
    assert program.selection_settings.attributes == ()  # the toy's pools carry no labels SEER would constrain


def test_a_toy_task_runs_in_the_bench_selection_only_and_answered(toy, tmp_path):
    _bench(tmp_path / "sel", _suite(selection_only=True))
    rows = load_rows(tmp_path / "sel")
    assert len(rows) == 8 and all(r["spec"]["dataset"] == "toyqa" for r in rows)
    assert all(len(r["exemplar_ids"]) == 2 for r in rows if r["spec"]["selector"] == "kate_within_budget")

    metrics = _bench(tmp_path / "lm", _suite())
    rows = load_rows(tmp_path / "lm")
    assert len(rows) == 8
    right = {r["example_id"] for r in rows if r["correct"]}
    assert right == {"eval2"}  # the stand-in answers 102 everywhere: right only where the gold answer is 102
    assert {r["gold"] for r in rows} == {"100", "101", "102", "103"}
    report = (tmp_path / "lm" / "report.md").read_text()
    assert "kate_within_budget" in report and "no_demos" in report
    assert metrics and (tmp_path / "lm" / "metrics.json").is_file()


def test_kdspy_compiles_and_reports_a_toy_task(toy, tmp_path, capsys):
    _bench(tmp_path / "run", _suite(selector="kate_within_budget"))
    assert main(["report", str(tmp_path / "run")]) == 0
    assert (tmp_path / "run" / "page.html").is_file()
    out = tmp_path / "toy.json"
    assert main(["compile", "--dataset", "toyqa", "--pipeline", "few_shot", "--selector", "kate", "-M", "2",
                 "--budget", "2000", "--lm", "openai/stub-model", "-o", str(out), "--quiet"]) == 0
    program = load_program(out, embedder=HashingEmbedder(), token_counter=WordCounter())
    assert program.spec.spec["pipeline"] == "few_shot" and len(program.select.pool_ids) == 12


def test_an_unknown_task_is_named_with_the_known_ones():
    with pytest.raises(UnknownTaskError, match=r"unknown dataset 'toyqa2'; datasets: .*tatqa"):
        task_named("toyqa2")
    with pytest.raises(SuiteError, match="unknown dataset 'toyqa2'"):
        _suite(dataset="toyqa2")
    assert main(["compile", "--dataset", "toyqa2", "-o", "x.json"]) == 2


def test_a_task_name_is_taken_once_and_its_files_must_be_its_own():
    with pytest.raises(ValueError, match="the name 'tatqa' is taken"):
        register_task(dataclasses.replace(TASKS["tatqa"], description="another"))
    with pytest.raises(ValueError, match="files must be the DatasetSpec named 'toyqa'"):
        Task(name="toyqa", files=DATASETS["tatqa"], score=score_toy_answer)


def test_the_built_in_tasks_declare_what_the_harness_used_to_hard_code():
    assert set(TASKS) >= {"tatqa", "finqa", "finqa_cases", "sara"}
    assert TASKS["tatqa"].default_route("pot") == "extract_compute" and TASKS["finqa"].default_route("pot") is None
    assert TASKS["sara"].takes_statute_budget and not TASKS["sara"].routable
    assert [TASKS[name].score_name for name in ("tatqa", "finqa", "finqa_cases", "sara")] == [
        "exact match", "execution accuracy", "execution accuracy", "accuracy"]
    assert TASKS["tatqa"].compile_splits == ("dev_pool", "dev_tune") and TASKS["sara"].compile_splits == ("train",
                                                                                                         "train")
    assert all(task.files is DATASETS[name] for name, task in TASKS.items())
