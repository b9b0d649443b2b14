"""The results-row schema (``bench/results/row_schema.py``): every field declared, the writer checked against it, older
rows migrated on read, newer ones refused in one line, and the rows of the committed results read through it."""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path

import pytest
from helpers import HashingEmbedder, WordCounter

from knapsack_dspy.bench.execution import example_runner, runner
from knapsack_dspy.bench.results.prompt_record import PromptRecorder
from knapsack_dspy.bench.results.row_outcomes import error_kind, redo_on_resume
from knapsack_dspy.bench.results.row_schema import (
    ANSWER,
    SCHEMA_VERSION,
    UNRECORDED,
    ResultRow,
    RowSchemaError,
)
from knapsack_dspy.bench.results.store import ResultsFileError, ResultsStore, load_rows
from knapsack_dspy.bench.suites.suite import suite_from_dict
from knapsack_dspy.testing.openai_stub_server import StubOpenAIServer, chat_adapter_reply

ROOT = Path(__file__).resolve().parents[2]
DATA = Path(os.environ.get("KDSPY_DATA_DIR", ROOT.parent / "shared" / "data"))
# the maintained results and the finished experiments' (experiments/<topic>/results)
COMMITTED = sorted([*(ROOT / "benchmarks" / "results").rglob("predictions.jsonl*"),
                    *(ROOT / "experiments").glob("*/results/**/predictions.jsonl*")])


def test_every_field_is_declared_once_with_its_kind_and_meaning():
    fields = ResultRow.fields()
    assert {"run", "example_id", "schema_version", "exemplar_ids", "em", "completions", "attribute_match"} \
        <= set(fields)
    assert all(f.meaning and f.kind for f in fields.values())
    assert [name for name, f in fields.items() if f.required] == ["schema_version", "run", "example_id"]
    assert ResultRow.em.name == "em" and ResultRow.attribute_match.name == "attribute_match"


def test_the_writer_refuses_an_undeclared_field_a_missing_identity_and_a_value_of_another_kind():
    row = ResultRow.build({"run": "r", "example_id": "q1", "em": 1.0, "correct": True})
    assert row.to_json() == {"schema_version": SCHEMA_VERSION, "run": "r", "example_id": "q1", "em": 1.0,
                             "correct": True}
    assert (row.em, row.f1, row.exemplar_ids, row.spec) == (1.0, None, [], {})  # absent: None, [] and {}
    with pytest.raises(RowSchemaError, match="undeclared results-row field 'emm'"):
        ResultRow.build({"run": "r", "example_id": "q1", "emm": 1.0})
    with pytest.raises(RowSchemaError, match="needs 'example_id'"):
        ResultRow.build({"run": "r"})
    with pytest.raises(RowSchemaError, match="'correct' holds bool, got str"):
        ResultRow.build({"run": "r", "example_id": "q1", "correct": "yes"})
    with pytest.raises(RowSchemaError, match="error_kind"):
        ResultRow.build({"run": "r", "example_id": "q1", "error": "boom"})
    assert row.replace(f1=0.5).f1 == 0.5 and row.without([ResultRow.em]).em is None
    with pytest.raises(RowSchemaError):
        row.replace(typo=1)


def test_the_store_writes_only_rows_of_the_schema(tmp_path):
    with ResultsStore(tmp_path / "predictions.jsonl", fsync=False) as store, \
            pytest.raises(RowSchemaError, match="undeclared results-row field 'loop'"):
        store.append({"run": "r", "example_id": "q1", "loop": []})
    assert (tmp_path / "predictions.jsonl").read_text() == ""


def test_an_undeclared_field_written_by_the_runner_is_a_bug_the_run_stops_on(monkeypatch):
    """``example_row`` builds every row through the schema: a detail the code adds without declaring it fails."""
    import dspy

    class Program:  # answers without an LM call
        select = None

        def example_inputs(self, example):
            return {"question": example.question}

        def __call__(self, **inputs):
            return dspy.Prediction(answer="7", scale="", program="ans = 7", route="compute", novel_detail="x")

    example = dspy.Example(id="q1", doc_id="d1", dataset="tatqa", question="?", answer="7", scale="",
                           answer_type="span").with_inputs("question")
    row = example_runner.example_row(Program(), example, None, {"run": "r", "spec": {}}, selection_only=False)
    assert (row.schema_version, row.route, row.correct, row.completions) == (SCHEMA_VERSION, "compute", True, [])
    monkeypatch.setattr(example_runner, "_DETAILS", (*example_runner._DETAILS, "novel_detail"))
    with pytest.raises(RowSchemaError, match="undeclared results-row field 'novel_detail'"):
        example_runner.example_row(Program(), example, None, {"run": "r", "spec": {}}, selection_only=False)


def test_a_reply_the_adapter_cannot_parse_is_the_answers_failure_and_a_bug_is_internal():
    """A DSPy program whose LM replies without the output field (``AdapterParseError``, also raised ``from`` it) makes
    an answered, wrong row (``error_kind`` "answer"); any other exception of the program is ``internal``, a bug in the
    code handling a parse error included."""
    import dspy
    from dspy.utils import DummyLM

    class Program:
        select = None

        def __init__(self, wrap=False, bug=False, handler_bug=False):
            self.cot, self.wrap, self.bug = dspy.ChainOfThought("question -> answer"), wrap, bug
            self.handler_bug = handler_bug

        def example_inputs(self, example):
            return {"question": example.question}

        def __call__(self, **inputs):
            if self.bug:
                raise ZeroDivisionError("a bug")
            try:
                return self.cot(**inputs)
            except Exception as exc:
                if self.handler_bug:
                    return {}["retry"]  # a KeyError while handling the parse error: a bug
                if self.wrap:
                    raise RuntimeError("the program gave up") from exc
                raise

    example = dspy.Example(id="q1", doc_id="d1", dataset="gsm8k", question="1+1?", answer="2").with_inputs("question")
    rows = {}
    programs = {"plain": Program(), "wrapped": Program(wrap=True), "bug": Program(bug=True),
                "handler_bug": Program(handler_bug=True)}
    for name, program in programs.items():
        lm = DummyLM([{"reasoning": "no answer field"}] * 10)
        rows[name] = example_runner.example_row(program, example, lm, {"run": "r", "spec": {}}, selection_only=False)
    assert rows["plain"].error_kind == rows["wrapped"].error_kind == ANSWER
    assert rows["plain"].error.startswith("AdapterParseError") and rows["wrapped"].error.startswith("RuntimeError")
    assert rows["plain"].correct is False and not redo_on_resume(rows["plain"])
    assert rows["bug"].error_kind == "internal" and "ZeroDivisionError: a bug" in rows["bug"].error
    assert rows["handler_bug"].error_kind == "internal" and rows["handler_bug"].error.startswith("KeyError")


def test_a_version_1_row_is_migrated_on_read():
    old_lm_failure = {"run": "r", "example_id": "a", "error": "LM x: timeout", "output": None, "traceback": "..."}
    old_answer_error = {"run": "r", "example_id": "b", "error": "NameError: x", "output": "ans = x"}
    old_finqa = {"run": "r", "example_id": "c", "lenient": True, "error": None}
    rows = [ResultRow.from_json(dict(r)) for r in (old_lm_failure, old_answer_error, old_finqa)]
    assert all(r.schema_version == SCHEMA_VERSION for r in rows)
    assert [error_kind(r) for r in rows] == [UNRECORDED, ANSWER, None]
    assert rows[2].kdspy_lenient is True and "lenient" not in rows[2]
    assert [redo_on_resume(r, retry_errors=True) for r in rows] == [True, True, False]
    current = ResultRow.build({"run": "r", "example_id": "d"})
    assert ResultRow.from_json(current.to_json()) == current  # a current row reads as it was written


def test_a_version_2_row_holds_its_attribute_matches_in_one_field():
    old = {"schema_version": 2, "run": "r", "example_id": "a", "gold_case_hit": False,
           "attribute_match.modality": 0.5, "attribute_match.answer_type": 1.0, "em": 1.0}
    row = ResultRow.from_json(dict(old))
    assert row.attribute_match == {"modality": 0.5, "answer_type": 1.0}
    assert list(row) == ["schema_version", "run", "example_id", "gold_case_hit", "attribute_match", "em"]
    assert not any(key.startswith("attribute_match.") for key in row)
    bare = ResultRow.from_json({"schema_version": 2, "run": "r", "example_id": "b"})
    assert "attribute_match" not in bare and bare.attribute_match is None  # none measured: no field
    assert ResultRow.from_json({"run": "r", "example_id": "c", "attribute_match.modality": 0.0}).attribute_match == {
        "modality": 0.0}  # version 1, through 2


def test_a_row_of_a_newer_version_is_a_one_line_error(tmp_path):
    path = tmp_path / "predictions.jsonl"
    path.write_text(json.dumps({"run": "r", "example_id": "a", "schema_version": SCHEMA_VERSION + 1}) + "\n")
    for read in (lambda: list(ResultsStore(path, fsync=False).rows()), lambda: load_rows(path)):
        with pytest.raises(ResultsFileError) as info:
            read()
        message = str(info.value)
        assert f"predictions.jsonl:1: corrupt results line (a version-{SCHEMA_VERSION + 1} results row" in message
        assert "upgrade it" in message and "\n" not in message


def test_load_rows_reads_a_directory_or_its_gzip_and_leaves_a_torn_last_line_out(tmp_path):
    lines = [json.dumps({"run": "r", "example_id": str(i), "em": 1.0}) for i in range(3)]
    (tmp_path / "gz").mkdir()
    with gzip.open(tmp_path / "gz" / "predictions.jsonl.gz", "wt") as fh:
        fh.write("\n".join(lines) + "\n")
    (tmp_path / "plain").mkdir()
    (tmp_path / "plain" / "predictions.jsonl").write_text("\n".join(lines) + "\n" + lines[0][:10])
    for directory in ("gz", "plain"):
        rows = load_rows(tmp_path / directory)
        assert [r.example_id for r in rows] == ["0", "1", "2"] and all(isinstance(r, ResultRow) for r in rows)
    assert (tmp_path / "plain" / "predictions.jsonl").read_text().endswith(lines[0][:10])  # nothing written
    with pytest.raises(ResultsFileError, match="cannot read"):
        load_rows(tmp_path / "missing")


@pytest.mark.skipif(not COMMITTED, reason="no committed results")
def test_every_committed_results_row_reads_through_the_schema():
    for path in COMMITTED:
        rows = load_rows(path)
        assert rows and all(r.schema_version == SCHEMA_VERSION and r.run and r.example_id for r in rows), path
        undeclared = {key for r in rows for key in r} - set(ResultRow.fields())
        assert not undeclared, f"{path}: {undeclared}"


def test_the_prompt_recorder_keeps_each_calls_completion_in_the_order_of_its_fingerprint():
    recorder = PromptRecorder()
    recorder.on_lm_start("call-1", None, {"messages": [{"role": "user", "content": "one"}]})
    recorder.on_lm_start("call-2", None, {"messages": [{"role": "user", "content": "two"}]})
    recorder.on_lm_start("call-3", None, {"messages": [{"role": "user", "content": "three"}]})
    recorder.on_lm_end("call-2", [{"text": "second", "reasoning_content": "hmm"}])  # ends first
    recorder.on_lm_end("call-1", ["first"])
    recorder.on_lm_end("call-3", None, exception=RuntimeError("timeout"))
    fields = recorder.row_fields()
    assert len(fields["prompt_sha256"]) == 3 and fields["completions"] == ["first", "second", None]
    assert ResultRow.build({"run": "r", "example_id": "q", **fields}).completions == ["first", "second", None]


@pytest.mark.skipif(not (DATA / "tatqa" / "dev_pool.json.gz").exists(), reason="data not found")
def test_a_bench_row_records_what_the_lm_returned_for_each_prompt(tmp_path, monkeypatch):
    from knapsack_dspy.bench.programs import run_program
    from knapsack_dspy.docqa.data import load_examples
    from knapsack_dspy.llm import make_lm

    pool = list(load_examples("tatqa", split="dev_pool", data_dir=DATA))[:40]
    tune = list(load_examples("tatqa", split="dev_tune", data_dir=DATA))[:3]
    monkeypatch.setattr(run_program, "load_split", lambda spec, which, data_dir: pool if which == "pool" else tune)
    reply = chat_adapter_reply(reasoning="add them", program="ans = 1 + 2\nscale = ''")
    suite = suite_from_dict({"selector": "kate", "budget": 4000, "max_exemplars": 2, "attributes": [],
                             "model": "openai/stub-model", "limit": 3})
    with StubOpenAIServer(reply=reply) as server:
        runner.run_suite(suite, tmp_path, embedder=HashingEmbedder(), token_counter_factory=lambda m: WordCounter(),
                         lm_factory=lambda spec: make_lm("openai/stub-model", api_base=server.base_url, api_key="x",
                                                         num_retries=0, cache=False),
                         progress=False, log=lambda message: None)
    rows = load_rows(tmp_path)
    assert len(rows) == 3
    for row in rows:
        assert row.schema_version == SCHEMA_VERSION and set(row) <= set(ResultRow.fields())
        assert row.completions == [reply] * len(row.prompt_sha256) and row.prompt_sha256
    raw = json.loads((tmp_path / "predictions.jsonl").read_text().splitlines()[0])
    assert raw["schema_version"] == SCHEMA_VERSION and raw["completions"] == [reply]
