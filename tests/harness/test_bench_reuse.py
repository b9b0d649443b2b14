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
    report = (env / "again" / "report.md").read_text()
    assert "6 of 6 rows took some reply" in report and "Not checked against the model" in report
    assert "Replayed replies" not in (env / "first" / "report.md").read_text()


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


def test_verify_re_asks_recorded_prompts_and_reports_the_agreement(env, capsys):
    """``--verify N``: the first N prompts with a recorded reply are asked live too (the live reply is kept), and
    the agreement is printed and written to replay_check.json -- 100 % when the model answers as recorded, and
    each difference listed when it does not."""
    suite = env / "suite.toml"
    with StubOpenAIServer(reply=chat_adapter_reply(program="ans = 7")) as server:
        write_suite(suite, server.base_url)
        assert main(["bench", str(suite), "--out", str(env / "first"), "--quiet", "--no-cache"]) == 0
        before = server.completion_count()
        assert main(["bench", str(suite), "--out", str(env / "same"), "--quiet", "--no-cache",
                     "--reuse", str(env / "first"), "--verify", "4"]) == 0
        assert server.completion_count() - before == 4  # four re-asked, two replayed
    assert "replay check: 4 of 4 re-asked prompts gave the recorded reply" in capsys.readouterr().out
    check = json.loads((env / "same" / "replay_check.json").read_text())
    assert (check["asked"], check["identical"], check["agreement"], check["differences"]) == (4, 4, 1.0, [])
    assert sorted(row.replayed or 0 for row in load_rows(env / "same")) == [0, 0, 0, 0, 1, 1]
    assert "Re-asked live: 4 of 4 identical" in (env / "same" / "report.md").read_text()

    with StubOpenAIServer(reply=chat_adapter_reply(program="ans = 8")) as other:  # the model answers otherwise now
        write_suite(suite, other.base_url)
        assert main(["bench", str(suite), "--out", str(env / "other"), "--quiet", "--no-cache",
                     "--reuse", str(env / "first"), "--verify", "3"]) == 0
    out = capsys.readouterr().out
    assert "replay check: 0 of 3 re-asked prompts gave the recorded reply; 3 differ" in out
    check = json.loads((env / "other" / "replay_check.json").read_text())
    assert check["agreement"] == 0.0 and len(check["differences"]) == 3
    assert {d["live"] for d in check["differences"]} == {chat_adapter_reply(program="ans = 8")}
    rows = load_rows(env / "other")
    assert sum(row.answer == 8 for row in rows) == 3 and sum(row.answer == 7 for row in rows) == 3
    assert "only 0 of 3 identical (replay_check.json): compare runs on rows produced live" in \
        (env / "other" / "report.md").read_text()
    # the same directory again with --reuse and no --verify: the check no longer describes every replayed row
    assert main(["bench", str(suite), "--out", str(env / "other"), "--quiet", "--no-cache",
                 "--reuse", str(env / "first"), "--replay-only"]) == 0
    assert not (env / "other" / "replay_check.json").exists()
    assert "Not checked against the model" in (env / "other" / "report.md").read_text()


def test_verify_needs_reuse_and_a_model(env, capsys):
    suite = env / "suite.toml"
    write_suite(suite, "http://127.0.0.1:9")
    assert main(["bench", str(suite), "--out", str(env / "x"), "--verify", "2"]) == 2
    assert "--verify needs --reuse DIR" in capsys.readouterr().err
    assert main(["bench", str(suite), "--out", str(env / "x"), "--reuse", str(env), "--replay-only",
                 "--verify", "2"]) == 2
    assert "cannot be combined with --replay-only" in capsys.readouterr().err


def test_a_recorded_reply_answers_only_the_same_model_weights_runtime_and_decoding():
    """The reply key holds the model, an embedded model's weights sha256 and runtime version and the decoding
    settings: another temperature, token limit or model is asked live; retries and timeouts do not matter."""
    from knapsack_dspy.llm import recorded_replies as rr
    from knapsack_dspy.llm.prompt_fingerprint import reply_context, reply_key

    messages = [{"role": "user", "content": "2 + 2?"}]
    recorded = {reply_key(messages, "openai/m", {"temperature": 0.0, "max_tokens": 64}): "REPLAYED"}

    def ask(**kwargs):
        return rr._live_text(rr._wrap_sync(lambda **kw: rr._response("LIVE", kw.get("model")))(**kwargs))

    with rr.replaying({}, keyed=recorded):
        assert ask(model="openai/m", messages=messages, temperature=0.0, max_tokens=64, num_retries=3,
                   timeout=5) == "REPLAYED"
        assert ask(model="openai/m", messages=messages, temperature=0.7, max_tokens=64) == "LIVE"
        assert ask(model="openai/m", messages=messages, temperature=0.0, max_tokens=32) == "LIVE"
        assert ask(model="openai/other", messages=messages, temperature=0.0, max_tokens=64) == "LIVE"
    local = reply_context("local/qwen2.5-coder-1.5b-instruct", {"temperature": 0})
    assert local["weights_sha256"] and local["decoding"] == {"temperature": 0}
    assert local["weights_sha256"] != reply_context("local/qwen2.5-coder-0.5b-instruct")["weights_sha256"]


def test_a_calls_own_sampling_settings_are_in_its_recorded_reply_key(monkeypatch):
    """DSPy hands a callback a call's keyword arguments nested under ``kwargs``: a sample's own temperature and
    seed must enter the recorded key as they enter the key the replay computes from LiteLLM's arguments."""
    import litellm

    from knapsack_dspy.bench.results.prompt_record import PromptRecorder
    from knapsack_dspy.llm.lm_factory import make_lm
    from knapsack_dspy.llm.prompt_fingerprint import reply_key

    sent = []

    def stub(*args, **kwargs):
        sent.append(kwargs)
        reply = litellm.ModelResponse(model=kwargs.get("model"), choices=[litellm.Choices(
            index=0, finish_reason="stop", message=litellm.Message(role="assistant", content="hi"))])
        reply.usage = litellm.Usage(prompt_tokens=1, completion_tokens=1, total_tokens=2)
        return reply

    monkeypatch.setattr(litellm, "completion", stub)
    lm = make_lm("openai/test-model", api_base="http://127.0.0.1:9/v1", cache=False)
    recorder = PromptRecorder()
    messages = [{"role": "user", "content": "hello"}]
    with dspy.context(callbacks=[recorder]):
        lm(messages=messages)
        lm(messages=messages, temperature=0.7, seed=1)
    replayed = [reply_key(kw.get("messages"), kw.get("model"), kw) for kw in sent]
    assert recorder.reply_keys == replayed and replayed[0] != replayed[1]
