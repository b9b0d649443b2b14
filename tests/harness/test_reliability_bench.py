"""Reliability of the bench: hostile answers, the per-example guard, results rows that cannot be serialised,
provenance, results-directory faults, and kill-and-resume.

The LM is the OpenAI stub server behind ``make_lm`` (so replies go through LiteLLM, DSPy's adapter and its
cache like a provider's would); the embedder and token counter are the cheap stand-ins of ``helpers``.
"""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import HashingEmbedder, WordCounter

from knapsack_dspy.bench.execution.runner import run_suite
from knapsack_dspy.bench.programs import run_program
from knapsack_dspy.bench.results.provenance import ProvenanceMismatchError
from knapsack_dspy.bench.results.store import ResultsFileError, ResultsStore, encode_row, load_rows
from knapsack_dspy.bench.suites.suite import suite_from_dict
from knapsack_dspy.cli.main import main
from knapsack_dspy.testing.hostile_answers import (
    hostile_finqa,
    hostile_python,
    hostile_texts,
    reply_by_question,
    stub_reply,
)
from knapsack_dspy.testing.openai_stub_server import StubOpenAIServer

DATA = Path(os.environ.get("KDSPY_DATA_DIR", Path(__file__).resolve().parents[3] / "shared" / "data"))
pytestmark = pytest.mark.skipif(not (DATA / "tatqa" / "dev_pool.json.gz").exists(), reason="data not found")


@pytest.fixture(scope="module")
def tatqa():
    from knapsack_dspy.docqa.data import load_examples

    return (
        list(load_examples("tatqa", split="dev_pool", data_dir=DATA))[:60],
        list(load_examples("tatqa", split="dev_tune", data_dir=DATA))[:70],
    )


@pytest.fixture(scope="module")
def finqa():
    from knapsack_dspy.docqa.data import load_examples

    return list(load_examples("finqa", path=DATA / "finqa" / "train_docs.json.gz"))[:60]


def _hostile_server(questions: dict) -> StubOpenAIServer:
    """A stub whose reply to a question is the hostile text assigned to it (``questions``: text -> reply)."""
    return StubOpenAIServer(reply=reply_by_question(questions))


def _suite(**fields):
    """A suite for the stub LM: KATE, two exemplars, no attribute constraints, one solver (the stub writes
    programs), plus ``fields``."""
    common = {"selector": "kate", "budget": 4000, "max_exemplars": 2, "model": "openai/stub-model",
              "attributes": [], "route": ""}
    return suite_from_dict({**common, **fields})


def _run(out, suite, splits, server, monkeypatch, **kw):
    from knapsack_dspy.llm import make_lm

    monkeypatch.setattr(run_program, "load_split", lambda spec, which, data_dir: splits[(spec.dataset, which)])
    return run_suite(
        suite,
        out,
        embedder=HashingEmbedder(),
        token_counter_factory=lambda model: WordCounter(),
        lm_factory=lambda spec: make_lm(
            "openai/stub-model",
            api_base=server.base_url,
            api_key="x",
            num_retries=0,
            max_tokens=spec.max_tokens,
        ),
        progress=False,
        log=lambda message: None,
        **kw,
    )


def _rows(out: Path) -> list[dict]:
    return load_rows(out)


_REPRESENTATIVE = (
    "digits_401",
    "digits_5000",
    "exp_309",
    "nan",
    "surrogate",
    "surrogate_inside",
    "nul_inside",
    "megabyte",
    "deep_open",
    "deep_list",
    "long_span_list",
    "list_of_numbers",
    "combining",
    "zero",
)


def test_every_hostile_answer_scores_and_serialises_without_an_exception(tatqa, finqa):
    """All of them, straight through the bench's scorer and row encoder (no LM: fast)."""
    from types import SimpleNamespace

    from knapsack_dspy.bench.scoring.example_scores import score_prediction
    from knapsack_dspy.docqa.sandbox import execute_program
    from knapsack_dspy.docqa.solvers.answer_parsing import parse_answer

    example, finqa_example = tatqa[1][0], finqa[0]
    cases = [
        (example, SimpleNamespace(answer=parse_answer(text)[0], scale=parse_answer(text)[1]), text)
        for _, text in hostile_texts()
    ]
    for _, program in hostile_python():
        result = execute_program(program, example.table, kind="python")
        assert result.ok or (result.error and len(result.error) <= 400)
        cases.append((example, SimpleNamespace(answer=result.answer, scale=result.scale), program))
    for _, program in hostile_finqa(finqa_example.program):
        result = execute_program(program, finqa_example.table, kind="finqa")
        cases.append(
            (finqa_example, SimpleNamespace(answer=result.answer, program=program, language="finqa"), program)
        )
    assert len(cases) >= 100
    for example, prediction, text in cases:
        row = score_prediction(example, prediction)
        assert row["correct"] in (True, False), text[:80]
        line = encode_row({"run": "r", "example_id": "x", "output": text, "answer": prediction.answer, **row})
        assert json.loads(line)["example_id"] == "x"


def test_hostile_answers_through_a_run_cannot_crash_or_stall_it(tmp_path, tatqa, finqa, monkeypatch):
    from knapsack_dspy.llm.cache import configure_cache

    configure_cache(
        tmp_path / "cache"
    )  # replies go through DSPy's cache too (a surrogate reply must survive it)
    pool, tune = tatqa
    texts = [(name, text) for name, text in hostile_texts() if name in _REPRESENTATIVE]
    cot_questions = tune[: len(texts)]
    finqa_questions = finqa[:4]
    finqa_programs = ("continued_fraction_40", "chain_40", "long_reference", "doubling_5")
    # question -> hostile reply: direct answers for chain of thought, FinQA programs built from each gold
    questions = {ex.question: text for ex, (_, text) in zip(cot_questions, texts, strict=True)}
    for example, wanted in zip(finqa_questions, finqa_programs, strict=True):
        questions[example.question] = dict(hostile_finqa(example.program))[wanted]
    runs = [{"dataset": "tatqa", "pipeline": "cot", "example_ids": [ex.id for ex in cot_questions]},
            {"dataset": "finqa", "pipeline": "finqa_pot", "example_ids": [ex.id for ex in finqa_questions]}]
    suite = _suite(name="hostile", runs=runs)
    splits = {
        ("tatqa", "pool"): pool,
        ("tatqa", "eval"): tune,
        ("finqa", "pool"): finqa,
        ("finqa", "eval"): finqa,
    }
    with _hostile_server(questions) as server:
        metrics = _run(tmp_path / "out", suite, splits, server, monkeypatch)
    rows = _rows(tmp_path / "out")
    assert len(rows) == len(cot_questions) + len(finqa_questions) and len(metrics) == 2  # every row written
    internal = [(r.get("answer"), r["error"]) for r in rows if r.get("error_kind") == "internal"]
    assert internal == []
    by_id = {r["example_id"]: r for r in rows}
    surrogate = next(
        ex for ex, (name, _) in zip(cot_questions, texts, strict=True) if name == "surrogate_inside"
    )
    assert by_id[surrogate.id]["answer"] == "a\\ud800b" and "answer" in by_id[surrogate.id]["escaped"]
    huge = next(ex for ex, (name, _) in zip(cot_questions, texts, strict=True) if name == "digits_5000")
    assert by_id[huge.id]["correct"] is False and "too long to score" in by_id[huge.id]["score_error"]
    checks = {r["program_check"] for r in rows if r.get("program_check")}
    assert checks == {
        "skipped: 40 steps > limit 20",
        "skipped: 125 operations with every #n expanded > limit 20",
    }
    assert all(r["program_correct"] is None for r in rows if r.get("program_check"))
    # the rows are re-scored identically: nothing in a score depends on time or machine load
    from knapsack_dspy.bench.reporting.rescoring import rescore_results

    monkeypatch.setattr(
        "knapsack_dspy.bench.reporting.rescoring.load_split",
        lambda spec, which, data_dir: splits[(spec.dataset, which)],
    )
    counts = rescore_results(tmp_path / "out", log=lambda message: None)
    assert counts["changed"] == 0 and counts["rows"] == len(rows)


def test_program_of_thought_with_hostile_programs(tmp_path, tatqa, monkeypatch):
    pool, tune = tatqa
    programs = [
        program
        for name, program in hostile_python()
        if name
        in ("power_tower", "long_constant", "surrogate", "nul", "too_long", "huge_int_literal", "long_label")
    ]
    questions = {ex.question: program for ex, program in zip(tune, programs, strict=False)}
    suite = _suite(name="hostile-pot", dataset="tatqa", pipeline="pot", route="",
                   example_ids=[ex.id for ex in tune[: len(questions)]])
    with _hostile_server(questions) as server:
        _run(tmp_path, suite, {("tatqa", "pool"): pool, ("tatqa", "eval"): tune}, server, monkeypatch)
    rows = _rows(tmp_path)
    assert len(rows) == len(questions)
    assert {r.get("error_kind") for r in rows} == {"answer"}  # each program failed, each said why
    assert all(len(r["error"]) <= 400 for r in rows)


# -- the per-example guard and the results file --------------------------------------------------------------
def test_a_failure_anywhere_in_an_example_is_a_row_not_an_exception(tmp_path, tatqa, monkeypatch):
    pool, tune = tatqa
    calls = {"n": 0}

    def exploding_scores(example, prediction):
        calls["n"] += 1
        if calls["n"] == 2:
            raise MemoryError("scoring blew up")
        return {"correct": False}

    monkeypatch.setattr("knapsack_dspy.bench.execution.example_runner.score_prediction", exploding_scores)
    suite = _suite(name="g", limit=3)
    with StubOpenAIServer(reply=stub_reply("ans = 1")) as server:
        _run(tmp_path, suite, {("tatqa", "pool"): pool, ("tatqa", "eval"): tune}, server, monkeypatch)
    rows = _rows(tmp_path)
    assert len(rows) == 3
    failed = [r for r in rows if r.get("error_kind") == "internal"]
    assert len(failed) == 1 and "MemoryError: scoring blew up" in failed[0]["error"]
    assert failed[0]["answer"] == 1  # what the model answered is kept


def test_an_interrupt_still_stops_the_run(tmp_path, tatqa, monkeypatch):
    pool, tune = tatqa

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr("knapsack_dspy.bench.execution.example_runner.score_prediction", interrupted)
    suite = _suite(name="g", limit=3)
    with StubOpenAIServer(reply=stub_reply("ans = 1")) as server, pytest.raises(KeyboardInterrupt):
        _run(tmp_path, suite, {("tatqa", "pool"): pool, ("tatqa", "eval"): tune}, server, monkeypatch)
    assert _rows(tmp_path) == []


def test_rows_json_cannot_carry_are_written_escaped_and_say_so(tmp_path):
    class Weird:
        def __str__(self):
            raise RuntimeError("no str")

        def __repr__(self):
            return "<weird>"

    cyclic: list = []
    cyclic.append(cyclic)
    with ResultsStore(tmp_path / "p.jsonl") as store:
        assert store.append(
            {
                "run": "r",
                "example_id": "a",
                "answer": "x\ud800y",
                "output": ["\udfff"],
                "predicted_attributes": {"k\ud800": 1},
            }
        )
        assert store.append({"run": "r", "example_id": "b", "answer": Weird(), "cell_fixes": cyclic})
    a, b = [json.loads(line) for line in (tmp_path / "p.jsonl").read_text(encoding="utf-8").splitlines()]
    assert a["answer"] == "x\\ud800y" and a["output"] == ["\\udfff"]
    assert a["predicted_attributes"] == {"k\\ud800": 1}
    assert a["escaped"] == ["answer", "output[0]", "predicted_attributes.<key>"]
    assert b["answer"] == "<weird>" and b["escaped"] == ["cell_fixes" + "[0]" * 50]
    assert (
        encode_row({"run": "r", "example_id": "c", "x": 1.5}) == '{"run": "r", "example_id": "c", "x": 1.5}\n'
    )


def test_a_transient_row_is_replaced_in_place_and_the_file_holds_each_pair_once(tmp_path):
    from knapsack_dspy.bench.results.row_outcomes import redo_on_resume
    from knapsack_dspy.bench.results.row_schema import SCHEMA_VERSION

    path = tmp_path / "p.jsonl"
    rows = [
        {"run": "r", "example_id": "a", "correct": True},
        {"run": "r", "example_id": "b", "error": "LM x: rate limited", "error_kind": "transient"},
        {"run": "r", "example_id": "c", "error": "LM x: bad key", "error_kind": "config"},
        {"run": "r", "example_id": "d", "error": "NameError", "error_kind": "answer"},
        {"run": "r", "example_id": "e", "error": "old failure", "output": None, "traceback": "..."},
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with ResultsStore(path, redo=redo_on_resume) as store:
        assert [store.done("r", x) for x in "abcde"] == [True, False, True, True, True]
        assert store.append({"run": "r", "example_id": "b", "correct": True})
        assert not store.append({"run": "r", "example_id": "b", "correct": False})  # done now
    after = [json.loads(line) for line in path.read_text().splitlines()]
    assert [r["example_id"] for r in after] == list("abcde") and after[1] == {
        "schema_version": SCHEMA_VERSION,
        "run": "r",
        "example_id": "b",
        "correct": True,
    }
    with ResultsStore(path, redo=lambda row: redo_on_resume(row, retry_errors=True)) as store:
        assert [store.done("r", x) for x in "abcde"] == [True, True, False, False, False]


# -- provenance ----------------------------------------------------------------------------------------------
def test_rows_record_provenance_and_a_directory_refuses_to_mix(tmp_path, tatqa, monkeypatch, capsys):
    from knapsack_dspy.bench.results import provenance

    pool, tune = tatqa
    splits = {("tatqa", "pool"): pool, ("tatqa", "eval"): tune}
    suite = _suite(name="p", model="local/qwen2.5-coder-0.5b-instruct", limit=2)
    with StubOpenAIServer(reply=stub_reply("ans = 1")) as server:
        _run(tmp_path, suite, splits, server, monkeypatch)
        (row,) = {json.dumps(r["provenance"], sort_keys=True) for r in _rows(tmp_path)}
        recorded = json.loads(row)
        assert recorded["code"] == provenance.code_provenance() and len(recorded["code"]["commit"]) == 40
        assert set(recorded["packages"]) == {"dspy", "litellm", "knapsack-dspy", "xllamacpp"}
        from knapsack_dspy.llm.local_models import local_model_spec

        assert recorded["model_sha256"] == local_model_spec("local/qwen2.5-coder-0.5b-instruct").sha256
        assert (recorded["adapter"], recorded["seed"]) == ("ChatAdapter", 0)
        assert "2 rows: code " in (tmp_path / "report.md").read_text()
        # other code: refused, in one line naming the difference and the way out
        monkeypatch.setattr(provenance, "code_provenance", lambda: {"commit": "f" * 40, "dirty": False})
        with pytest.raises(ProvenanceMismatchError) as info:
            _run(tmp_path, suite_from_dict({**suite.raw, "limit": 4}), splits, server, monkeypatch)
        message = str(info.value)
        assert "written by other code or packages (code:" in message and "ffffffff" in message
        assert "--allow-mixed" in message and "\n" not in message
        _run(
            tmp_path,
            suite_from_dict({**suite.raw, "limit": 4}),
            splits,
            server,
            monkeypatch,
            allow_mixed=True,
        )
    assert len(_rows(tmp_path)) == 4
    report = (tmp_path / "report.md").read_text()
    assert report.count(" rows: code ") == 2  # the report says what produced which rows


def test_rows_written_before_provenance_count_as_unrecorded(tmp_path, tatqa, monkeypatch):
    pool, tune = tatqa
    (tmp_path / "predictions.jsonl").write_text(
        json.dumps({"run": "old", "example_id": "x", "correct": True}) + "\n"
    )
    suite = _suite(name="p", limit=1)
    with (
        StubOpenAIServer(reply=stub_reply("ans = 1")) as server,
        pytest.raises(ProvenanceMismatchError, match=r"\(unrecorded -> recorded\)"),
    ):
        _run(tmp_path, suite, {("tatqa", "pool"): pool, ("tatqa", "eval"): tune}, server, monkeypatch)


# -- results-directory faults --------------------------------------------------------------------------------
def _bench_argv(tmp_path, out):
    suite = tmp_path / "suite.toml"
    suite.write_text('name = "s"\ndataset = "tatqa"\nselector = "kate"\nselection_only = true\nlimit = 2\n')
    return ["bench", str(suite), "--out", str(out), "--quiet"]


def _error_line(capsys, code) -> str:
    captured = capsys.readouterr()
    assert code == 2, captured
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in captured.err, captured.err
    return lines[0]


@pytest.mark.parametrize("rescore", [False, True])
def test_a_corrupt_middle_line_is_one_line_and_nothing_is_changed(tmp_path, capsys, rescore):
    out = tmp_path / "out"
    out.mkdir()
    content = '{"run": "r", "example_id": "a"}\nnot json\n{"run": "r", "example_id": "b"}\n'
    (out / "predictions.jsonl").write_text(content)
    argv = _bench_argv(tmp_path, out) + (["--rescore"] if rescore else [])
    line = _error_line(capsys, main(argv))
    assert "predictions.jsonl:2: corrupt results line" in line and "remove that line" in line
    assert (out / "predictions.jsonl").read_text() == content


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes anywhere")
def test_a_read_only_results_directory_is_one_line(tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    out.chmod(0o500)
    try:
        line = _error_line(capsys, main(_bench_argv(tmp_path, out)))
    finally:
        out.chmod(0o700)
    assert "cannot write" in line and "--out" in line


def test_an_uncreatable_results_directory_is_one_line(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("a file where a directory should be")
    line = _error_line(capsys, main(_bench_argv(tmp_path, blocker / "out")))
    assert "cannot write" in line and str(blocker) in line


def test_a_full_disk_is_one_line_and_keeps_the_rows_written(tmp_path, monkeypatch):
    path = tmp_path / "p.jsonl"
    store = ResultsStore(path)
    assert store.append({"run": "r", "example_id": "a"})

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(store._fh, "write", full)
    with pytest.raises(
        ResultsFileError, match=r"cannot write .*p.jsonl: No space left on device; free some space"
    ):
        store.append({"run": "r", "example_id": "b"})
    monkeypatch.undo()
    store.close()
    assert [json.loads(line)["example_id"] for line in path.read_text().splitlines()] == ["a"]


def test_a_failing_embedding_cache_is_a_warning_not_a_failure(tmp_path, caplog):
    import sqlite3

    from knapsack_dspy.embeddings import TextEmbedder

    class FullDisk:
        def get(self, key):
            return None

        def set(self, key, value):
            raise sqlite3.OperationalError("disk I/O error")

    class Model:
        def encode(self, texts, **kwargs):
            import numpy as np

            return np.ones((len(texts), 4), dtype=np.float32) / 2

    embedder = TextEmbedder(model="fake-model-for-test", cache_dir=tmp_path)
    embedder._cache, embedder._model = FullDisk(), Model()
    assert embedder.encode(["a", "b"]).shape == (2, 4)
    assert "embedding cache disabled: writing it failed (OperationalError: disk I/O error)" in caplog.text
    assert embedder.encode(["c"]).shape == (1, 4) and not embedder.use_cache


# -- kill and resume -----------------------------------------------------------------------------------------
_DRIVER = """
import json, sys
sys.path.insert(0, {tests!r})
from helpers import HashingEmbedder, WordCounter
from knapsack_dspy.bench.execution import runner
from knapsack_dspy.bench.programs import run_program
from knapsack_dspy.bench.suites.suite import suite_from_dict
from knapsack_dspy.docqa.data import load_examples
from knapsack_dspy.llm import make_lm

pool = list(load_examples("tatqa", split="dev_pool", data_dir={data!r}))[:40]
tune = list(load_examples("tatqa", split="dev_tune", data_dir={data!r}))[:12]
run_program.load_split = lambda spec, which, data_dir: pool if which == "pool" else tune
suite = suite_from_dict({{"name": "kill", "selector": ["kate", "random"], "budget": 4000, "max_exemplars": 2,
                          "model": "openai/stub-model", "attributes": [], "num_retries": 0}})
runner.run_suite(suite, sys.argv[1], embedder=HashingEmbedder(),
                 token_counter_factory=lambda m: WordCounter(),
                 lm_factory=lambda spec: make_lm("openai/stub-model", api_base=sys.argv[2], api_key="x",
                                                 num_retries=0, cache=False),
                 progress=False, log=lambda m: None)
"""


def test_killed_runs_resume_to_each_pair_once_even_while_retrying(tmp_path):
    """SIGKILL while rows are appended, and while failed rows are being replaced: after a final resume the
    file holds each (run, example) exactly once, every row is a success, and no row written before a kill
    was lost or changed (except the transient ones, replaced)."""
    driver = tmp_path / "driver.py"
    driver.write_text(_DRIVER.format(tests=str(Path(__file__).parents[1]), data=str(DATA)))
    out = tmp_path / "out"
    env = {
        **os.environ,
        "KDSPY_CACHE_DIR": str(tmp_path / "cache"),
        "PYTHONPATH": os.pathsep.join(
            [str(Path(__file__).resolve().parents[2]), os.environ.get("PYTHONPATH", "")]
        ),
    }
    with StubOpenAIServer(reply=stub_reply("ans = 1")) as server:
        server.fail_next(6, status=503)  # the first rows fail transiently
        server.hang_next(1000, seconds=0.1)  # then slow answers, so a kill lands mid-run
        kept: dict = {}
        for target in (5, 8):  # kill after this many good rows: first while appending, then while replacing
            proc = subprocess.Popen(
                [sys.executable, str(driver), str(out), server.base_url],
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
            )
            deadline = time.time() + 120
            while time.time() < deadline and proc.poll() is None:
                rows = _rows(out) if (out / "predictions.jsonl").exists() else []
                if sum(not r.get("error") for r in rows) >= target:
                    break
                time.sleep(0.05)
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            rows = _rows(out)
            keys = [(r["run"], r["example_id"]) for r in rows]
            assert len(keys) == len(set(keys))  # never a pair twice, at any kill
            for row in rows:
                key = (row["run"], row["example_id"])
                if key in kept and not kept[key].get("error"):
                    assert row == kept[key]  # a finished row is never lost or changed
                kept[key] = row
        server.clear()
        done = subprocess.run(
            [sys.executable, str(driver), str(out), server.base_url],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        assert done.returncode == 0, done.stderr[-2000:]
    rows = _rows(out)
    assert len(rows) == 24 and len({(r["run"], r["example_id"]) for r in rows}) == 24
    assert not any(r.get("error") for r in rows)


def test_a_git_archive_export_records_its_commit(tmp_path):
    """A pinned run is run from ``git archive <commit> | tar -x`` (no .git): ``export-subst`` stamps the
    commit into ``knapsack_dspy/_commit.py``, which ``code_provenance`` reads there."""
    root = Path(__file__).resolve().parents[2]
    head = subprocess.run(
        ["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, check=False
    )
    if head.returncode != 0:
        pytest.skip("not a git checkout")
    archive = subprocess.run(
        ["git", "-C", str(root), "archive", "HEAD"], capture_output=True, check=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(tmp_path)], input=archive, check=True)
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]); from knapsack_dspy.bench.results.provenance import "
        "code_provenance; print(code_provenance())"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path)],
        capture_output=True,
        text=True,
        check=True,
        cwd=tmp_path,
        env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
    ).stdout
    assert out.strip() == str({"commit": head.stdout.strip(), "dirty": None})


def test_rows_say_which_copied_numbers_were_replaced_by_their_cells():
    import dspy

    from knapsack_dspy.bench.execution.example_runner import _answer_details

    fixed = dspy.Prediction(answer=1.0, scale_reason="r", cell_fixes=["a: 1 -> 2 (Revenue, 2019)"])
    assert _answer_details(fixed) == {"scale_reason": "r", "cell_fixes": ["a: 1 -> 2 (Revenue, 2019)"]}
    assert "cell_fixes" not in _answer_details(dspy.Prediction(answer=1.0, cell_fixes=[]))


def test_a_selection_only_run_beside_lm_runs_of_the_same_code_is_no_conflict():
    from knapsack_dspy.bench.results.provenance import provenance_conflict, run_provenance

    lm = run_provenance("local/qwen2.5-coder-0.5b-instruct", adapter="ChatAdapter", seed=0)
    selection_only = run_provenance(None, adapter="ChatAdapter", seed=0)
    assert "xllamacpp" in lm["packages"] and "xllamacpp" not in selection_only["packages"]
    rows = [{"run": "lm", "example_id": "1", "provenance": lm},
            {"run": "sel", "example_id": "1", "provenance": selection_only}]
    assert provenance_conflict(rows, "lm", lm) is None  # the LM run resumed beside the selection-only rows
    assert provenance_conflict(rows, "sel", selection_only) is None
    other = {**lm, "packages": {**lm["packages"], "dspy": "0.0.1"}}
    assert "other code or packages (packages:" in provenance_conflict(rows, "lm", other)
