"""The CLI as a user runs it: compile -> ask, bench killed mid-run and resumed, cached re-runs, clear errors.

An OpenAI-compatible stub server on 127.0.0.1 stands in for the provider (``--lm openai/stub-model
--api-base ...``), so these tests prove the provider swap through LiteLLM too. The data are a small
slice of the real TAT-QA splits, written to a temporary folder.
"""

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from knapsack_dspy.cli.main import main
from knapsack_dspy.testing.openai_stub_server import StubOpenAIServer, chat_adapter_reply

DATA = Path(os.environ.get("KDSPY_DATA_DIR", Path(__file__).resolve().parents[3] / "shared" / "data"))
pytestmark = pytest.mark.skipif(not (DATA / "tatqa" / "dev_pool.json.gz").exists(), reason="TAT-QA data not found")


# small_data and env (the data slice in a temporary folder): tests/conftest.py


def test_compile_then_ask_through_a_local_openai_compatible_server(env, capsys):
    out = env / "prog.json"
    code = main(["compile", "--dataset", "tatqa", "--selector", "seer", "--budget", "3000", "-M", "3",
                 "--lm", "openai/stub-model", "-o", str(out), "--quiet"])
    assert code == 0
    report = json.loads(out.with_suffix(".report.json").read_text())
    assert list(report["predictors"]) == ["solve.write", "extract.answer"]  # routed: the default
    assert report["cost"]["lm_calls"] == 0
    written = report["predictors"]["solve.write"]
    assert written["selector"] == "seer" and written["budget"] == 3000
    assert "modality" in written["attribute_accuracy"]
    (env / "t.csv").write_text("Item,2019,2018\nRevenue,120,100\nCosts,80,70\n")
    (env / "notes.txt").write_text("Revenue grew because of new stores.\n\nCosts rose less than revenue.")
    program_text = 'table_query_0 = table["Revenue", "2019"]\ntable_query_1 = table["Revenue", "2018"]\n' \
                   'ans = (table_query_0 - table_query_1) / table_query_1 * 100\nscale = "percent"'
    with StubOpenAIServer(reply=chat_adapter_reply(program=program_text)) as server:
        capsys.readouterr()
        code = main(["ask", str(out), "--table", str(env / "t.csv"), "--text", str(env / "notes.txt"),
                     "--question", "What was the percentage change in revenue?", "--lm", "openai/stub-model",
                     "--api-base", server.base_url, "--json"])
        assert code == 0
        result = json.loads(capsys.readouterr().out)
        assert server.completion_count() == 1
        prompt = server.completion_requests()[0].body["messages"]
    assert result["answer"] == pytest.approx(20.0) and result["scale"] == "percent"
    assert 1 <= len(result["exemplars"]) <= 3
    assert result["prompt_tokens"] <= 3000
    assert "| Revenue | 120 | 100 |" in prompt[-1]["content"]  # the table went in as a table
    assert sum(m["role"] == "assistant" for m in prompt) == len(result["exemplars"])


def test_compile_reports_what_its_lm_search_cost_and_a_cached_rerun_costs_no_calls(env, capsys):
    args = ["compile", "--dataset", "tatqa", "--selector", "seer", "--budget", "3000", "--search", "--lm-configs", "1",
            "--val-size", "3", "--lm", "openai/stub-model", "--quiet", "--route", "none"]
    with StubOpenAIServer(reply=chat_adapter_reply(program='ans = 1\nscale = ""')) as server:
        args += ["--api-base", server.base_url]
        assert main([*args, "-o", str(env / "first.json")]) == 0
        first = json.loads((env / "first.report.json").read_text())["cost"]
        assert first["lm_calls"] == server.completion_count() >= 3  # the best config on 3 validation questions
        sent = sum(r.body and len(" ".join(m["content"] for m in r.body["messages"]).split())
                   for r in server.completion_requests())
        assert first["prompt_tokens"] == sent + first["lm_calls"]  # the stub counts words + 1
        assert first["completion_tokens"] > 0 and first["lm_cache_hits"] == 0 and first["seconds"] > 0
        assert f"compile cost: {first['lm_calls']} LM calls" in capsys.readouterr().out
        assert main([*args, "-o", str(env / "again.json")]) == 0
        again = json.loads((env / "again.report.json").read_text())["cost"]
        assert server.completion_count() == first["lm_calls"]  # nothing new reached the server
    assert (again["lm_calls"], again["lm_cache_hits"], again["prompt_tokens"]) == (0, first["lm_calls"], 0)


def test_demo_answers_a_mix_of_question_types(env, capsys):
    from knapsack_dspy.docqa.data import load_examples
    from knapsack_dspy.selection import SelectionConfig

    tune = {ex.question: ex for ex in load_examples("tatqa", split="dev_tune")}
    pool = {ex.question for ex in load_examples("tatqa", split="dev_pool")}
    with StubOpenAIServer(reply=chat_adapter_reply(program='ans = 1\nscale = ""', answer="1")) as server:
        code = main(["demo", "--lm", "openai/stub-model", "--api-base", server.base_url, "--questions", "3",
                     "--quiet", "--out", str(env / "demo")])
        assert code == 0 and server.completion_count() >= 3
    out = capsys.readouterr().out
    asked = [re.sub(r"^\[\d\] ", "", line) for line in out.splitlines() if re.match(r"^\[\d\] ", line)]
    assert len(asked) == 3 and all(q in tune for q in asked)
    types = [tune[q].answer_type for q in asked]
    present = [t for t in ("arithmetic", "span", "count", "multi-span") if t in {e.answer_type for e in tune.values()}]
    assert types == present[:3]  # the stated rule: the first question of each answer type in turn
    first = {t: next(e.question for e in load_examples("tatqa", split="dev_tune") if e.answer_type == t)
             for t in present}
    assert asked == [first[t] for t in types]
    marks = [line for line in out.splitlines() if re.match(r"^    (RIGHT|WRONG): answer ", line)]
    assert len(marks) == 3 and all(re.search(r"; \d+\.\d s$", m) for m in marks)  # a mark and the seconds
    shown = [line[8:] for line in out.splitlines() if line.startswith("      - ")]
    assert shown and all(q in pool for q in shown)  # the exemplars' questions
    assert re.search(r"prompt: \d exemplars?, \d+ tokens of a 2048-token budget", out)
    assert "route: extract" in out and "route: compute" in out  # the routed pipeline
    for question in asked:  # the stub answers 1: right exactly where the gold answer is 1 without a scale
        block = out.split(question, 1)[1].split("\n[", 1)[0]
        one = str(tune[question].answer) in ("1", "1.0") and not tune[question].scale
        assert ("RIGHT: answer" in block) == one
    assert re.search(r"\d of 3 answered right", out)
    assert f"| {SelectionConfig().selector} |" in out  # the report, of the default selector
    # it says which default it ran and why
    assert f"selector {SelectionConfig().selector}, demos cut to the rows and paragraphs" in out
    assert "why this default: the fewest prompt tokens whose accuracy is non-inferior" in out


def _bench_cmd(suite, out):
    return [sys.executable, "-m", "knapsack_dspy.cli.main", "bench", str(suite), "--out", str(out), "--quiet"]


def _write_suite(path, api_base):
    path.write_text(f'''
name = "killtest"
dataset = "tatqa"
pipeline = "pot"
route = ""
selector = ["kate", "seer"]
budget = 3000
max_exemplars = 2
model = "openai/stub-model"
api_base = "{api_base}"
''')


def _rows(path):
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.mark.slow
def test_killed_bench_resumes_to_complete_duplicate_free_results_and_cached_rerun_makes_no_calls(env):
    reply = chat_adapter_reply(program="ans = 1")
    with StubOpenAIServer(reply=reply) as server:
        server.hang_next(1000, seconds=0.4)  # slow answers, so the kill lands mid-run
        suite = env / "suite.toml"
        _write_suite(suite, server.base_url)
        out = env / "results"
        proc = subprocess.Popen(_bench_cmd(suite, out), env=os.environ.copy(), stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT)
        predictions = out / "predictions.jsonl"
        deadline = time.time() + 240
        while time.time() < deadline and (not predictions.exists() or len(_rows(predictions)) < 4):
            if proc.poll() is not None:
                pytest.fail(f"bench ended early: {proc.stdout.read().decode()[-2000:]}")
            time.sleep(0.2)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        before = _rows(predictions)
        assert 4 <= len(before) < 2 * 18  # killed mid-run
        done = subprocess.run(_bench_cmd(suite, out), env=os.environ.copy(), capture_output=True, text=True,
                              timeout=600)
        assert done.returncode == 0, done.stderr[-2000:]
        after = _rows(predictions)
        keys = [(r["run"], r["example_id"]) for r in after]
        n_questions = len({r["example_id"] for r in after})
        assert len(keys) == len(set(keys)) == 2 * n_questions  # complete, no duplicates
        assert after[: len(before)] == before  # what was written before the kill is untouched
        assert "| kate |" in (out / "report.md").read_text()
        calls = server.completion_count()
        # the same suite into a fresh results directory: every answer comes from the LM cache
        fresh = subprocess.run(_bench_cmd(suite, env / "again"), env=os.environ.copy(), capture_output=True,
                               text=True, timeout=600)
        assert fresh.returncode == 0, fresh.stderr[-2000:]
        assert server.completion_count() == calls
        again = _rows(env / "again" / "predictions.jsonl")
        assert len(again) == len(after)
        assert sum(r["lm_calls"] for r in again) == 0 and all(r["cache_hits"] >= 1 for r in again)
        assert sum(r["lm_calls"] for r in after) >= 1


@pytest.mark.parametrize("argv,message", [
    (["ask", "missing.json", "--question", "q?"], "not found"),
    (["ask", "x.json"], "no question"),
    (["bench", "nope.toml"], "not found"),
    (["compile", "--dataset", "tatqa", "-o", "p.json", "--data-dir", "/no/such/dir"], "does not exist"),
    (["compile", "--dataset", "tatqa", "-o", "p.json", "--lm", "local/no-such-model"], "local"),
    (["compile", "--dataset", "tatqa", "-o", "p.json", "--mode", "static", "--selector", "seer"],
     "selector 'seer' selects 'per_query', not in mode 'static'"),
    (["compile", "--dataset", "tatqa", "-o", "p.json", "--selector", "sear"], "unknown selector 'sear'"),
    (["compile", "--dataset", "tatqa", "-o", "p.json", "--alpha", "2"], "alpha must be a number in [0, 1]"),
])
def test_user_errors_are_one_clean_line(env, capsys, argv, message, monkeypatch):
    monkeypatch.chdir(env)
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2
    assert message in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_ask_interactive_answers_each_line_with_the_program_loaded_once(env, capsys, monkeypatch):
    import io

    from knapsack_dspy.docqa.pipelines import pipeline

    out = env / "prog.json"
    assert main(["compile", "--dataset", "tatqa", "--selector", "seer", "--budget", "3000", "-M", "2",
                 "--route", "none",
                 "--lm", "openai/stub-model", "-o", str(out), "--quiet"]) == 0
    (env / "t.csv").write_text("Item,2019,2018\nRevenue,120,100\n")
    loads = []
    real_load = pipeline.load_program
    monkeypatch.setattr(pipeline, "load_program", lambda *a, **k: loads.append(1) or real_load(*a, **k))
    lines = ["What was the revenue in 2019?", "", '{"question": "And the costs?", "table": [["Item", "2019"], '
             '["Costs", "80"]]}', '{"question": ', "What was the revenue in 2018?"]
    monkeypatch.setattr("sys.stdin", io.StringIO("\n".join(lines) + "\n"))
    with StubOpenAIServer(reply=chat_adapter_reply(program='ans = 120\nscale = ""')) as server:
        capsys.readouterr()
        code = main(["ask", str(out), "--table", str(env / "t.csv"), "--interactive", "--json", "--lm",
                     "openai/stub-model", "--api-base", server.base_url])
        prompts = [r.body["messages"][-1]["content"] for r in server.completion_requests()]
    captured = capsys.readouterr()
    results = [json.loads(line) for line in captured.out.splitlines()]
    assert code == 2 and len(loads) == 1  # one bad line; the program was loaded once for all
    assert [r["question"] for r in results] == ["What was the revenue in 2019?", "And the costs?",
                                               "What was the revenue in 2018?"]
    assert all(r["answer"] == 120 for r in results) and len(prompts) == 3
    assert all(r["seconds"] >= r["lm_seconds"] > 0 for r in results)  # each question timed, its LM part too
    assert "| Revenue | 120 | 100 |" in prompts[0] and "Costs" in prompts[1] and "Revenue" not in prompts[1]
    errors = captured.err.strip().splitlines()
    assert len(errors) == 1 and errors[0].startswith("kdspy ask: line 4: not a JSON object")
    assert main(["ask", str(out), "--interactive", "--question", "q?"]) == 2
    assert "leave out --question" in capsys.readouterr().err


def test_compile_with_a_latency_budget_needs_rates_and_keeps_them_in_the_program(env, capsys):
    out = env / "fast.json"
    base = ["compile", "--dataset", "tatqa", "--mode", "hybrid", "--budget", "3000", "-M", "3",
            "--lm", "openai/stub-model", "-o", str(out), "--quiet", "--latency-budget", "30"]
    assert main(base) == 2  # an API model has no measured rates: said at once, nothing compiled
    assert "--latency-rates" in capsys.readouterr().err and not out.exists()
    assert main([*base, "--latency-rates", "fast"]) == 2
    assert "PREFILL,DECODE" in capsys.readouterr().err
    assert main([*base, "--latency-rates", "100,20,0.5", "--demo-order", "canonical"]) == 0
    text = out.read_text()
    assert '"latency_budget": 30.0' in text and '"demo_order": "canonical"' in text
    assert '"prefill_tokens_per_s": 100.0' in text and '"overhead_s": 0.5' in text


def test_compile_with_an_exemplar_budget_keeps_it_in_the_program(env, capsys):
    out = env / "seer_l.json"
    base = ["compile", "--dataset", "tatqa", "--selector", "seer", "--budget", "3000", "-M", "3",
            "--lm", "openai/stub-model", "-o", str(out), "--quiet"]
    assert main([*base, "--exemplar-budget", "4000"]) == 2  # larger than the whole prompt's: one line, no program
    err = capsys.readouterr().err
    assert "exemplar_budget (4000) is larger than the whole prompt's budget (3000)" in err and not out.exists()
    assert main([*base, "--exemplar-budget", "600"]) == 0
    assert "exemplars within 600 tokens" in capsys.readouterr().out
    report = json.loads(out.with_suffix(".report.json").read_text())["predictors"]["solve.write"]
    assert report["exemplar_budget"] == 600
    assert '"exemplar_budget": 600' in out.read_text()
