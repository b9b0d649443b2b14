"""``kdspy bench --workers N``: N threads answer at once, the driver alone writes, and the rows are the ones a
single worker writes (answers, exemplars, prompt tokens and fingerprints), each (run, example) once.

The LM is the OpenAI stub server behind ``make_lm``; the embedder and token counter are the cheap stand-ins of
``helpers``. Nothing here measures speed: the stub says how many requests it served at once.
"""

from __future__ import annotations

import pytest
from helpers import HashingEmbedder, WordCounter
from scaleout_helpers import (
    HAVE_DATA,
    SlowReply,
    deterministic_reply,
    question_of,
    rows_of,
    run_stub_suite,
    same_fields,
    stub_suite,
    tatqa_splits,
)

from knapsack_dspy.bench.execution import runner
from knapsack_dspy.bench.execution.dispatch import write_rows
from knapsack_dspy.bench.execution.local_workers import InlineWorkers, ThreadWorkers
from knapsack_dspy.bench.execution.run_job import RunJob, Task
from knapsack_dspy.bench.results.prompt_record import messages_sha256
from knapsack_dspy.bench.results.provenance import ProvenanceMismatchError
from knapsack_dspy.bench.results.store import ResultsStore
from knapsack_dspy.bench.suites.suite import SuiteError
from knapsack_dspy.testing.openai_stub_server import StubOpenAIServer

pytestmark = pytest.mark.skipif(not HAVE_DATA, reason="data not found")


@pytest.fixture(scope="module")
def splits():
    return tatqa_splits()


def test_threads_answer_at_once_and_write_the_rows_one_worker_writes(tmp_path, splits):
    suite = stub_suite()
    with StubOpenAIServer(reply=SlowReply(0.0)) as server:
        run_stub_suite(tmp_path / "one", suite, splits, server.base_url, workers=1)
    slow = SlowReply(0.15)
    with StubOpenAIServer(reply=slow) as server:
        run_stub_suite(tmp_path / "four", suite, splits, server.base_url, workers=4)
        requests = server.completion_requests()
    one, four = rows_of(tmp_path / "one"), rows_of(tmp_path / "four")
    assert len(one) == 24 and set(one) == set(four)
    assert same_fields(one) == same_fields(four)
    assert 2 <= slow.peak <= 4  # several requests were in flight at once, never more than the workers
    # each row's prompt fingerprints are its own example's prompts, not another thread's
    by_question: dict = {}
    for request in requests:
        by_question.setdefault(question_of(request.body), []).append(messages_sha256(request.body["messages"]))
    questions = {ex.id: ex.question for ex in splits["eval"]}
    for (_, example_id), row in four.items():
        assert row["answer"] == len(questions[example_id].split())  # its own example's answer
        assert row["lm_calls"] == 1 and len(row["prompt_sha256"]) == 1
        assert row["prompt_sha256"][0] in by_question[questions[example_id].strip()]


def test_the_suites_num_threads_is_the_number_of_workers_unless_given(tmp_path, splits):
    slow = SlowReply(0.15)
    with StubOpenAIServer(reply=slow) as server:
        run_stub_suite(tmp_path / "a", stub_suite(num_threads=3, limit=6), splits, server.base_url)
    assert 2 <= slow.peak <= 3
    slow = SlowReply(0.05)
    with StubOpenAIServer(reply=slow) as server:
        run_stub_suite(tmp_path / "b", stub_suite(num_threads=3, limit=4), splits, server.base_url, workers=1)
    assert slow.peak == 1
    with pytest.raises(SuiteError, match="num_threads: must be an integer >= 1, got 0"):  # when the suite is read
        runner.run_suite(stub_suite(num_threads=0), tmp_path / "c", progress=False, log=lambda m: None)
    with pytest.raises(SuiteError, match="workers must be"):
        runner.run_suite(stub_suite(), tmp_path / "c", workers=0, progress=False, log=lambda m: None)


def test_transient_failures_are_replaced_in_place_with_threads(tmp_path, splits):
    suite = stub_suite(limit=6)
    with StubOpenAIServer(reply=deterministic_reply) as server:
        server.fail_next(5, status=503)
        run_stub_suite(tmp_path, suite, splits, server.base_url, workers=4)
        first = rows_of(tmp_path)
        assert sum(r.get("error_kind") == "transient" for r in first.values()) == 5
        server.clear()
        run_stub_suite(tmp_path, suite, splits, server.base_url, workers=4)
        assert server.completion_count() == 5  # exactly the failed ones, asked again
    second = rows_of(tmp_path)
    assert set(second) == set(first) and not any(r.get("error") for r in second.values())
    for key, row in first.items():
        if not row.get("error"):
            assert second[key] == row  # finished rows are left as they were


def test_an_interrupted_threaded_run_resumes_to_each_pair_once(tmp_path, splits, monkeypatch):
    """Ctrl-C reaches the driver while workers are mid-call: rows written so far are whole, nothing in flight
    is written later, and the same command finishes the run."""
    suite = stub_suite(limit=6)
    seen = {"rows": 0}
    real_append = ResultsStore.append

    def append_then_interrupt(self, row):
        written = real_append(self, row)
        seen["rows"] += 1
        if seen["rows"] == 4:
            raise KeyboardInterrupt
        return written

    with StubOpenAIServer(reply=SlowReply(0.1)) as server:
        monkeypatch.setattr(ResultsStore, "append", append_then_interrupt)
        with pytest.raises(KeyboardInterrupt):
            run_stub_suite(tmp_path, suite, splits, server.base_url, workers=3)
        monkeypatch.setattr(ResultsStore, "append", real_append)
        assert len(rows_of(tmp_path)) == 4
        import time

        time.sleep(0.5)  # the threads' calls in flight have finished: still nothing more written
        assert len(rows_of(tmp_path)) == 4
        run_stub_suite(tmp_path, suite, splits, server.base_url, workers=3)
    assert len(rows_of(tmp_path)) == 12


class _OtherOrigin(InlineWorkers):
    """Workers whose rows claim another commit (a worker node with other code)."""

    def next_row(self):
        task, row = super().next_row()
        return task, {**row, "provenance": {**row["provenance"], "code": {"commit": "0" * 40, "dirty": False}}}


def test_the_driver_refuses_a_workers_row_of_another_origin(tmp_path, splits):
    from knapsack_dspy.bench.execution.run_job import spec_provenance
    from knapsack_dspy.docqa.tasks import build_pipeline
    from knapsack_dspy.selection.config import SelectionConfig
    from knapsack_dspy.teleprompt import KnapsackFewShot

    spec = stub_suite(limit=2).runs[0]
    student = build_pipeline("tatqa", "pot", route=None, selection=SelectionConfig(selector="kate", max_exemplars=2,
                                                                       budget=4000, attributes=()),
                             embedder=HashingEmbedder(), token_counter=WordCounter(), model=spec.model)
    program = KnapsackFewShot(token_counter=WordCounter(), progress=False).compile(student, trainset=splits["pool"])
    job = RunJob.for_run(spec, program, None, spec_provenance(spec))
    tasks = [Task(job, ex) for ex in splits["eval"][:2]]
    with ResultsStore(tmp_path / "p.jsonl") as store, pytest.raises(ProvenanceMismatchError,
                                                                     match=r"another origin.*code"):
        write_rows(tasks, _OtherOrigin(), store, check=runner._same_origin(store.path))
    assert (tmp_path / "p.jsonl").read_text() == ""  # the refused row was not written
    with ResultsStore(tmp_path / "p.jsonl") as store:
        assert write_rows(tasks, ThreadWorkers(2), store, check=runner._same_origin(store.path)) == 2


def test_the_command_line_passes_workers_and_ray_and_refuses_bad_counts(tmp_path, monkeypatch, capsys):
    from knapsack_dspy.cli import bench as bench_cli
    from knapsack_dspy.cli.main import main

    suite_path = tmp_path / "s.toml"
    suite_path.write_text('name = "s"\nselector = "kate"\nmodel = "openai/stub-model"\napi_base = "http://127.0.0.1:9/v1"\n')
    seen = {}
    monkeypatch.setattr(runner, "run_suite", lambda suite, out, **kw: seen.update(kw, runs=suite.runs) or {})
    monkeypatch.setattr(bench_cli, "_print_results", lambda out, runs: 0)
    monkeypatch.setattr("knapsack_dspy.llm.check_lm_config", lambda *a, **k: None)
    out = ["--out", str(tmp_path / "o")]
    assert main(["bench", str(suite_path), "--workers", "3", *out]) == 0
    assert (seen["workers"], seen["ray"]) == (3, None)
    assert main(["bench", "--ray", str(suite_path), *out]) == 0  # the file after --ray is the suite
    assert (seen["workers"], seen["ray"], seen["runs"][0].selector) == (None, "", "kate")
    assert main(["bench", str(suite_path), "--ray=auto", *out]) == 0
    assert seen["ray"] == "auto"
    assert main(["bench", str(suite_path), "--workers", "0", *out]) == 2
    assert "--workers must be 1 or more, got 0" in capsys.readouterr().err
