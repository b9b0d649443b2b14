"""Reliability: LM faults through the OpenAI stub server, for ``kdspy ask``, ``compile`` and ``bench``.

Every fault a server can produce -- HTTP 500 / 429 / 401, a body that is not JSON, a reply cut mid-way, a
dropped connection, an empty ``choices`` list, a hang past the timeout -- ends a command in one line that says
what failed and what to do, exit 2. A bench keeps going: the rows whose LM call failed transiently are asked
again by the next run of the same command once the server recovers, and replace the failed rows.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

import knapsack_dspy
from knapsack_dspy.bench.results.store import load_rows
from knapsack_dspy.cli.main import main
from knapsack_dspy.testing.openai_stub_server import StubOpenAIServer, chat_adapter_reply

DATA = Path(os.environ.get("KDSPY_DATA_DIR", Path(__file__).resolve().parents[3] / "shared" / "data"))
pytestmark = pytest.mark.skipif(
    not (DATA / "tatqa" / "dev_pool.json.gz").exists(), reason="TAT-QA data not found"
)
PROGRAM = 'ans = 120 - 100\nscale = ""'


# small_data and env (a slice of TAT-QA in a temporary folder, a fresh cache): tests/conftest.py


COMPILE = ["compile", "--dataset", "tatqa", "--selector", "kate", "--budget", "3000", "--lm", "openai/stub-model",
           "--quiet"]


@pytest.fixture(scope="module")
def program_file(tmp_path_factory, small_data):
    """A program compiled once for the ``ask`` tests (KATE, two exemplars; compiling calls no LM)."""
    out = tmp_path_factory.mktemp("prog") / "prog.json"
    with pytest.MonkeyPatch.context() as patch:
        for key, value in (("KDSPY_DATA_DIR", small_data), ("KDSPY_CACHE_DIR", out.parent / "cache"),
                           ("OPENAI_API_KEY", "test-key")):
            patch.setenv(key, str(value))
        assert main([*COMPILE, "-M", "2", "-o", str(out)]) == 0
    return out


def _ask(program_file, server, *extra):
    question = "What was the change in revenue?"
    return ["ask", str(program_file), "--question", question, "--lm", "openai/stub-model", "--api-base",
            server.base_url, "--num-retries", "0", *extra]


def _one_line(capsys, code) -> str:
    """The command's one error line (DSPy's own INFO progress lines, such as its evaluation's "Average
    Metric", are not errors and are left aside)."""
    captured = capsys.readouterr()
    assert code == 2, captured
    lines = [line for line in captured.err.strip().splitlines() if " INFO dspy." not in line]
    assert len(lines) == 1 and "Traceback" not in captured.err, captured.err
    return lines[0]


@pytest.mark.parametrize(
    "fault, expected",
    [
        (
            lambda s: s.fail_next(1, status=500),
            "the server at http://127.0.0.1:.* failed \\(HTTP 500\\).*try again later",
        ),
        (lambda s: s.fail_next(1, status=429), "rate limited \\(HTTP 429\\).*wait"),
        (lambda s: s.fail_next(1, status=401), "rejected the credentials \\(HTTP 401\\).*check the API key"),
        (lambda s: s.garbage_next(1), "not valid JSON.*OpenAI-compatible"),
        (lambda s: s.truncate_next(1), "cannot reach the server.*or it dropped the connection"),
        (lambda s: s.disconnect_next(1), "cannot reach the server.*or it dropped the connection"),
        (lambda s: s.empty_next(1), "no answer \\(an empty 'choices' list\\).*try again later"),
    ],
)
def test_ask_turns_every_lm_fault_into_one_line(env, capsys, program_file, fault, expected):
    import re

    with StubOpenAIServer(reply=chat_adapter_reply(program=PROGRAM)) as server:
        fault(server)
        line = _one_line(capsys, main(_ask(program_file, server, "--no-cache")))
    assert line.startswith("kdspy ask: error: LM openai/stub-model: ")
    assert re.search(expected, line), line


def test_ask_times_out_with_the_timeout_it_was_given(env, capsys, program_file):
    with StubOpenAIServer(reply=chat_adapter_reply(program=PROGRAM)) as server:
        server.hang_next(1, seconds=5)
        line = _one_line(capsys, main(_ask(program_file, server, "--no-cache", "--timeout", "0.5")))
    assert "no answer at http://127.0.0.1" in line and "within the timeout" in line


def test_an_empty_reply_is_retried_and_never_cached(env, capsys, program_file):
    with StubOpenAIServer(reply=chat_adapter_reply(program=PROGRAM)) as server:
        server.empty_next(1)
        assert main(_ask(program_file, server)) == 2  # the glitch: one line, nothing cached
        capsys.readouterr()
        assert main(_ask(program_file, server, "--json")) == 0  # asked again, answered
        assert json.loads(capsys.readouterr().out)["error"] is None
        assert server.completion_count() == 2
        assert main(_ask(program_file, server, "--json")) == 0  # the real answer is the cached one
        assert server.completion_count() == 2


def test_ask_prints_a_lone_surrogate_escaped(env, capsys, program_file):
    reply = chat_adapter_reply(program='ans = "\ud800"\nscale = ""')
    with StubOpenAIServer(reply=reply) as server:
        assert main(_ask(program_file, server, "--no-cache")) == 0
    captured = capsys.readouterr()
    assert "\\ud800" in captured.out and "Traceback" not in captured.err
    assert "lone surrogate (U+D800" in captured.out  # what the sandbox said about the program


def test_compile_search_stops_in_one_line_when_the_lm_fails(env, capsys):
    with StubOpenAIServer(reply=chat_adapter_reply(program="ans = 1")) as server:
        server.fail_next(1000, status=503)
        search = ["--search", "--lm-configs", "1", "--val-size", "3"]
        code = main([*COMPILE, *search, "--api-base", server.base_url, "--num-retries", "0", "-o",
                     str(env / "p.json")])
    line = _one_line(capsys, code)
    assert "the LM failed while the search scored a configuration on 3 validation questions" in line
    assert "HTTP 503" in line and "try again later" in line
    assert not (env / "p.json").exists()


def _suite(path: Path, api_base: str, **extra) -> Path:
    lines = [
        'name = "faults"',
        'dataset = "tatqa"',
        'pipeline = "pot"',
        'route = ""',
        'selector = "kate"',
        "budget = 3000",
        "max_exemplars = 2",
        'model = "openai/stub-model"',
        f'api_base = "{api_base}"',
        "limit = 6",
    ]
    lines += [f"{key} = {json.dumps(value)}" for key, value in extra.items()]
    path.write_text("\n".join(lines) + "\n")
    return path


def _rows(out: Path) -> list[dict]:
    return load_rows(out)


def test_bench_retries_transient_failures_on_resume_and_replaces_their_rows(env, capsys):
    out = env / "results"
    with StubOpenAIServer(reply=chat_adapter_reply(program="ans = 1")) as server:
        suite = _suite(env / "suite.toml", server.base_url, num_retries=0)
        server.fail_next(2, status=500)
        server.empty_next(1)
        server.fail_next(1, status=429)
        code = main(["bench", str(suite), "--out", str(out), "--quiet"])
        line = _one_line(capsys, code)
        assert "4 of 6 questions could not be asked (4 transient failures: run the same command again" in line
        first = _rows(out)
        assert len(first) == 6 and sum(r.get("error_kind") == "transient" for r in first) == 4
        assert "| answered wrong | could not ask | n |" in (out / "report.md").read_text()
        (m,) = json.loads((out / "metrics.json").read_text()).values()
        assert (m["could_not_ask"], m["could_not_ask_transient"], m["n"]) == (4, 4, 6)
        assert m["answered_wrong"] == 2 - sum(r["correct"] for r in first)
        asked = server.completion_count()
        # the server has recovered: the same command asks the 4 again, and only them
        assert main(["bench", str(suite), "--out", str(out), "--quiet"]) == 0
        assert server.completion_count() == asked + 4
    second = _rows(out)
    keys = [(r["run"], r["example_id"]) for r in second]
    assert len(second) == 6 and len(set(keys)) == 6  # each (run, example) once: replaced, not appended
    assert [r["example_id"] for r in second] == [r["example_id"] for r in first]  # in place
    assert not any(r.get("error") for r in second)
    assert sum(r["lm_calls"] for r in second) == 6


def test_bench_retries_other_errors_only_when_told(env, capsys, monkeypatch):
    out = env / "results"
    monkeypatch.chdir(env)
    with StubOpenAIServer(reply=chat_adapter_reply(program="ans = 1")) as server:
        suite = _suite(env / "suite.toml", server.base_url, num_retries=0)
        server.fail_next(1, status=401)  # a configuration error: not retried by a plain resume
        assert main(["bench", str(suite), "--out", str(out), "--quiet"]) == 2
        assert [r.get("error_kind") for r in _rows(out)].count("config") == 1
        _no_path_of_the_machine(env, out)
        assert main(["bench", str(suite), "--out", str(out), "--quiet"]) == 2
        assert server.completion_count() == 6
        assert main(["bench", str(suite), "--out", str(out), "--quiet", "--retry-errors"]) == 0
        assert server.completion_count() == 7
    capsys.readouterr()
    assert len(_rows(out)) == 6 and not any(r.get("error") for r in _rows(out))


def _no_path_of_the_machine(env: Path, out: Path) -> None:
    """What a results directory commits names no folder of this machine (issue 48): suite.json the suite relative to
    where the bench ran (``paths.portable_path``), a failed row's traceback each file from its ``site-packages`` or
    ``knapsack_dspy`` folder on (``paths.portable_traceback``)."""
    assert json.loads((out / "suite.json").read_text())["source"] == "suite.toml"
    (failed,) = [row for row in load_rows(out) if row.error]
    assert 'File "site-packages/' in failed.traceback and 'File "knapsack_dspy/' in failed.traceback
    machine = [str(env), os.environ["KDSPY_DATA_DIR"], sys.prefix, str(Path(knapsack_dspy.__file__).parents[1])]
    written = [path for path in out.iterdir() if path.suffix in (".json", ".jsonl", ".md")]
    assert len(written) >= 4  # rows, suite, metrics, report
    assert [(path.name, folder) for path in written for folder in machine if folder in path.read_text()] == []


def test_timeout_and_retries_are_set_per_suite_and_per_command(env, monkeypatch):
    from knapsack_dspy.bench.execution import run_job, runner
    from knapsack_dspy.bench.suites.suite import load_suite

    seen = []
    monkeypatch.setattr(
        run_job,
        "make_lm",
        lambda model, **kw: seen.append(kw) or (_ for _ in ()).throw(RuntimeError("stop here")),
    )
    suite_path = _suite(env / "suite.toml", "http://127.0.0.1:9/v1", timeout=7.5, num_retries=1)
    spec = load_suite(suite_path).runs[0]
    assert (spec.timeout, spec.num_retries) == (7.5, 1)
    assert (
        spec.key == load_suite(_suite(env / "plain.toml", "http://127.0.0.1:9/v1")).runs[0].key
    )  # not identity
    with pytest.raises(RuntimeError, match="stop here"):
        run_job.default_lm(spec)
    assert seen[-1]["timeout"] == 7.5 and seen[-1]["num_retries"] == 1
    from knapsack_dspy.cli import bench as bench_cli

    captured = {}
    monkeypatch.setattr(
        runner, "run_suite", lambda suite, out, **kw: captured.setdefault("runs", suite.runs) and {}
    )
    monkeypatch.setattr(bench_cli, "_print_results", lambda out, runs: 0)
    monkeypatch.setattr("knapsack_dspy.llm.check_lm_config", lambda *a, **k: None)
    assert (
        main(["bench", str(suite_path), "--out", str(env / "o"), "--timeout", "3", "--num-retries", "0"]) == 0
    )
    assert {(r.timeout, r.num_retries) for r in captured["runs"]} == {(3.0, 0)}
