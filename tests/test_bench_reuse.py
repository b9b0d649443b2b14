"""``kdspy bench --reuse DIR``: a new run answers the prompts an earlier run recorded from the recorded replies
(rows' ``completions``; an older row's single program or extraction reply rebuilt), asks the model for the others,
and with ``--replay-only`` never asks it."""

import json

import dspy

from knapsack_dspy.bench.results.recorded_rows import chat_reply, recorded_replies
from knapsack_dspy.bench.results.store import load_rows
from knapsack_dspy.cli.main import main
from knapsack_dspy.testing.openai_stub_server import StubOpenAIServer, chat_adapter_reply


def write_suite(path, api_base, selectors='["kate"]', limit=6):
    path.write_text(f"""
name = "reuse"
dataset = "tatqa"
pipeline = "pot"
route = ""
selector = {selectors}
budget = 3000
max_exemplars = 2
model = "openai/stub-model"
api_base = "{api_base}"
limit = {limit}
""")


def answers(out):
    return {row.example_id: (row.answer, row.em) for row in load_rows(out)}  # api_base is in the run key


def test_a_rerun_from_recorded_replies_gives_the_same_rows_without_the_model(env, capsys):
    suite = env / "suite.toml"
    with StubOpenAIServer(reply=chat_adapter_reply(program="ans = 7")) as server:
        write_suite(suite, server.base_url)
        assert main(["bench", str(suite), "--out", str(env / "first"), "--quiet", "--no-cache"]) == 0
        asked = server.completion_count()
    first = load_rows(env / "first")
    assert asked == len(first) == 6 and all(row.completions == [chat_adapter_reply(program="ans = 7")]
                                            for row in first)
    write_suite(suite, "http://127.0.0.1:9")  # no server there: only recorded replies can answer
    code = main(["bench", str(suite), "--out", str(env / "again"), "--quiet", "--no-cache",
                 "--reuse", str(env / "first"), "--replay-only"])
    assert code == 0 and "--reuse: 6 recorded replies from 6 rows (6 recorded" in capsys.readouterr().out
    again = load_rows(env / "again")
    assert answers(env / "again") == answers(env / "first")
    assert all(row.replayed == 1 and row.lm_calls == 0 for row in again)


def test_prompts_not_recorded_are_asked_or_with_replay_only_refused(env):
    suite = env / "suite.toml"
    with StubOpenAIServer(reply=chat_adapter_reply(program="ans = 7")) as server:
        write_suite(suite, server.base_url, limit=3)
        assert main(["bench", str(suite), "--out", str(env / "first"), "--quiet", "--no-cache"]) == 0
        write_suite(suite, server.base_url, limit=6)  # three more questions
        before = server.completion_count()
        assert main(["bench", str(suite), "--out", str(env / "more"), "--quiet", "--no-cache",
                     "--reuse", str(env / "first")]) == 0
        assert server.completion_count() - before == 3  # only the new questions reached the model
    assert code_of_replay_only(env, suite) == 2  # 3 questions nobody recorded: could not ask


def code_of_replay_only(env, suite):
    write_suite(suite, "http://127.0.0.1:9", limit=6)
    code = main(["bench", str(suite), "--out", str(env / "only"), "--quiet", "--no-cache",
                 "--reuse", str(env / "first"), "--replay-only"])
    rows = load_rows(env / "only")
    assert sum("no recorded reply" in str(row.error) for row in rows) == 3
    return code


def test_an_older_rows_single_reply_is_rebuilt_as_the_chat_adapter_wrote_it(tmp_path):
    spec = {"pipeline": "pot", "samples": 1}
    rows = [{"run": "r", "example_id": "a", "spec": spec, "route": "compute", "output": "ans = 2",
             "prompt_sha256": ["s1"], "answer": 2},
            {"run": "r", "example_id": "b", "spec": spec, "route": "extract", "raw_answer": "the text",
             "prompt_sha256": ["s2"], "answer": "the text"},
            {"run": "r", "example_id": "c", "spec": spec, "route": "compute", "output": "ans = x",
             "prompt_sha256": ["s3"], "error": "NameError", "error_kind": "answer"},
            {"run": "r", "example_id": "d", "spec": spec, "route": "compute", "output": None,
             "prompt_sha256": ["s4"], "error": "timeout", "error_kind": "transient"},  # no reply: nothing
            {"run": "r", "example_id": "e", "spec": spec, "route": "compute", "output": "ans = 3",
             "prompt_sha256": ["s5", "s6"], "answer": 3}]  # a repair: the first reply is not in the row
    path = tmp_path / "predictions.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")  # version-1 rows: no completions
    recorded = recorded_replies([path])
    assert recorded.replies == {"s1": chat_reply(program="ans = 2"), "s2": chat_reply(answer="the text"),
                                "s3": chat_reply(program="ans = x")}
    assert recorded.rebuilt == 3 and recorded.from_completions == 0
    signature = dspy.Predict("question -> program").signature
    assert dspy.ChatAdapter().parse(signature, recorded.replies["s1"]) == {"program": "ans = 2"}
