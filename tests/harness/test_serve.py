"""``kdspy serve``: a compiled program behind HTTP. Answers, the bounded queue (429 + Retry-After), LM failures
(503 / 502) and a set of malformed requests, every one a 4xx with a one-line reason, never a 500.

The server is uvicorn in a thread on 127.0.0.1; the LM is the OpenAI stub server; the program is compiled with
the cheap embedder and token counter of ``helpers``.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest
from helpers import HashingEmbedder, WordCounter
from scaleout_helpers import ServerThread, ServeSpec, SlowReply, StubLM, deterministic_reply, post

from knapsack_dspy.testing.malformed_requests import MALFORMED_REQUESTS
from knapsack_dspy.testing.openai_stub_server import StubOpenAIServer

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

DATA = Path(os.environ.get("KDSPY_DATA_DIR", Path(__file__).resolve().parents[3] / "shared" / "data"))
pytestmark = pytest.mark.skipif(not (DATA / "tatqa" / "dev_pool.json.gz").exists(), reason="data not found")


@pytest.fixture(scope="module")
def program():
    from knapsack_dspy.docqa.data import load_examples
    from knapsack_dspy.docqa.tasks import build_pipeline
    from knapsack_dspy.selection.config import SelectionConfig
    from knapsack_dspy.teleprompt import KnapsackFewShot

    pool = list(load_examples("tatqa", split="dev_pool", data_dir=DATA))[:40]
    student = build_pipeline("tatqa", "pot", route=None,
                             selection=SelectionConfig(selector="kate", max_exemplars=2, budget=4000, attributes=()),
                             embedder=HashingEmbedder(), token_counter=WordCounter(), model="openai/stub-model")
    return KnapsackFewShot(token_counter=WordCounter(), progress=False).compile(student, trainset=pool)


@pytest.fixture(scope="module")
def questions():
    from knapsack_dspy.docqa.data import load_examples

    return [{"question": ex.question, "table": ex.table, "paragraphs": [p["text"] if isinstance(p, dict) else p
                                                                         for p in ex.paragraphs]}
            for ex in list(load_examples("tatqa", split="dev_tune", data_dir=DATA))[:8]]


def _app(program, server, **kw):
    from knapsack_dspy.serve.app import create_app

    return create_app(program, StubLM(server.base_url)(ServeSpec()), **kw)


def test_answers_questions_with_the_programs_fields(program, questions):
    with StubOpenAIServer(reply=deterministic_reply) as lm_server, ServerThread(_app(program, lm_server)) as api:
        status, _, health = post(api.url, None, path="/health", method="GET")
        assert status == 200 and health["status"] == "ok" and health["model"] == "openai/stub-model"
        status, _, answer = post(api.url, questions[0])
    assert status == 200
    assert answer["answer"] == len(questions[0]["question"].split())  # the stub's answer for this question
    assert answer["program"].startswith("ans = ") and answer["error"] is None
    assert len(answer["exemplar_ids"]) == 2 and answer["prompt_tokens"] > 0 and answer["latency_s"] >= 0
    assert answer["usage"]["lm_calls"] == 1 and answer["usage"]["prompt_tokens"] > 0


def test_concurrent_requests_each_get_their_own_answer(program, questions):
    slow = SlowReply(0.3)
    results = {}
    with StubOpenAIServer(reply=slow) as lm_server, ServerThread(_app(program, lm_server, concurrency=4,
                                                                     max_queue=16)) as api:
        def ask(i):
            results[i] = post(api.url, questions[i])

        threads = [threading.Thread(target=ask, args=(i,)) for i in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert 2 <= slow.peak <= 4  # several at once, never more than the concurrency
    for i, (status, _, answer) in results.items():
        assert status == 200 and answer["answer"] == len(questions[i]["question"].split())


def test_beyond_the_queue_a_request_gets_429_with_retry_after_at_once(program, questions):
    results = []
    with StubOpenAIServer(reply=SlowReply(1.0)) as lm_server, ServerThread(_app(program, lm_server, concurrency=1,
                                                                               max_queue=2)) as api:
        def ask(i):
            results.append(post(api.url, questions[i]))

        threads = [threading.Thread(target=ask, args=(i,)) for i in range(5)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        status, _, health = post(api.url, None, path="/health", method="GET")
    statuses = sorted(status for status, _, _ in results)
    assert statuses.count(200) >= 2 and set(statuses) <= {200, 429} and statuses.count(429) >= 1
    for status, headers, body in results:
        if status == 429:
            assert int(headers["retry-after"]) >= 1 and "queue is full" in body["error"]
    assert health["queue"]["turned_away"] == statuses.count(429) and health["queue"]["admitted"] == 0


def test_lm_failures_are_503_or_502_in_one_line(program, questions):
    with StubOpenAIServer(reply=deterministic_reply) as lm_server, ServerThread(_app(program, lm_server)) as api:
        lm_server.fail_next(1, status=500)
        status, headers, body = post(api.url, questions[0])
        assert status == 503 and int(headers["retry-after"]) >= 1 and "\n" not in body["error"]
        lm_server.fail_next(1, status=401, message="bad key")
        status, _, body = post(api.url, questions[1])
        assert status == 502 and "\n" not in body["error"]
        status, _, _ = post(api.url, questions[2])
        assert status == 200  # and it goes on


def test_malformed_requests_are_4xx_with_a_one_line_reason(program):
    with StubOpenAIServer(reply=deterministic_reply) as lm_server, ServerThread(_app(program, lm_server)) as api:
        seen = {}
        for name, body in MALFORMED_REQUESTS.items():
            status, _, payload = post(api.url, body)
            seen[name] = status
            assert 400 <= status < 500, (name, status, payload)
            assert isinstance(payload.get("error"), str) and "\n" not in payload["error"] and payload["error"], name
        assert seen["a huge body"] == 413 and seen["not JSON"] == 400 and seen["nested too deeply"] == 400
        assert seen["an unknown field"] == 422 and seen["question a number"] == 422
        status, _, payload = post(api.url, None, path="/nowhere", method="GET")
        assert status == 404 and payload["error"]
        status, _, payload = post(api.url, None, path="/answer", method="GET")
        assert status == 405 and payload["error"]
        status, _, payload = post(api.url, b"x" * 10, headers={"Content-Length": "99999999999"})
        assert status == 413
        assert lm_server.completion_count() == 0  # none of them reached the LM
        status, _, _ = post(api.url, {"question": "What is it?"})
        assert status == 200  # the server is still up


def test_the_command_line_refuses_bad_options_and_programs_in_one_line(tmp_path, capsys):
    from knapsack_dspy.cli.main import main

    assert main(["serve", str(tmp_path / "missing.json"), "--lm", "openai/x", "--api-base", "http://127.0.0.1:9"]) == 2
    assert "not found" in capsys.readouterr().err
    (tmp_path / "bad.json").write_text("{}")
    assert main(["serve", str(tmp_path / "bad.json"), "--lm", "openai/x", "--api-base", "http://127.0.0.1:9"]) == 2
    assert "no pipeline spec" in capsys.readouterr().err
    assert main(["serve", "p.json", "--max-queue", "0"]) == 2
    assert "--max-queue must be 1 or more" in capsys.readouterr().err
