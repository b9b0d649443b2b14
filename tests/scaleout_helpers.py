"""Shared by the scale-out tests (threads, Ray, the server): a deterministic stub reply, a reply that takes its
time and counts how many requests it serves at once, an LM factory for the stub, and an embedder that kills
the Ray worker using it.

Everything here is importable by Ray workers (the tests folder travels to them on ``PYTHONPATH``) and
picklable (classes at module level, no lambdas).
"""

from __future__ import annotations

import http.client
import json
import os
import re
import threading
import time
from pathlib import Path

from helpers import HashingEmbedder, WordCounter

from knapsack_dspy.bench.results.store import load_rows
from knapsack_dspy.testing.openai_stub_server import chat_adapter_reply

DATA = Path(os.environ.get("KDSPY_DATA_DIR", Path(__file__).resolve().parents[2] / "shared" / "data"))
HAVE_DATA = (DATA / "tatqa" / "dev_pool.json.gz").exists()

# What must not depend on how many workers answered: the answer and everything about the prompt.
SAME_FIELDS = ("answer", "scale", "output", "exemplar_ids", "prompt_tokens", "prompt_sha256", "prompt_format",
               "correct", "error", "error_kind", "within_budget", "lm_calls")


def tatqa_splits(pool: int = 40, tune: int = 12) -> dict:
    """``{"pool": the first TAT-QA dev_pool questions, "eval": the first dev_tune questions}``."""
    from knapsack_dspy.docqa.data import load_examples

    return {"pool": list(load_examples("tatqa", split="dev_pool", data_dir=DATA))[:pool],
            "eval": list(load_examples("tatqa", split="dev_tune", data_dir=DATA))[:tune]}


def stub_suite(**fields):
    """A suite for the stub LM: KATE and Random, two exemplars, no attribute constraints, one solver (the stub
    writes programs), plus ``fields``."""
    from knapsack_dspy.bench.suites.suite import suite_from_dict

    return suite_from_dict({"name": "scaleout", "selector": ["kate", "random"], "budget": 4000, "max_exemplars": 2,
                            "model": "openai/stub-model", "attributes": [], "route": "", **fields})


def run_stub_suite(out, suite, splits: dict, base_url: str, embedder=None, **kw):
    """``run_suite`` of ``suite`` on ``splits`` with the stub LM at ``base_url`` and the cheap stand-ins."""
    from knapsack_dspy.bench.execution import runner
    from knapsack_dspy.bench.programs import run_program

    kw.setdefault("log", lambda message: None)
    original, run_program.load_split = run_program.load_split, lambda spec, which, data_dir: splits[which]
    try:
        return runner.run_suite(suite, out, embedder=embedder or HashingEmbedder(), token_counter_factory=word_counter,
                                lm_factory=StubLM(base_url), progress=False, **kw)
    finally:
        run_program.load_split = original


def rows_of(out: Path) -> dict:
    """The rows of ``out/predictions.jsonl`` by (run, example), checking that each pair is there once."""
    rows = load_rows(out)
    keyed = {(r["run"], r["example_id"]): r for r in rows}
    assert len(keyed) == len(rows)  # each (run, example) once
    return keyed


def same_fields(rows: dict) -> dict:
    """Of each row, the fields that must not depend on how many workers answered (``SAME_FIELDS``)."""
    return {key: {name: row.get(name) for name in SAME_FIELDS} for key, row in rows.items()}


def question_of(body) -> str:
    """The question of a chat request the bench sent (the last ``[[ ## question ## ]]`` section)."""
    text = body["messages"][-1]["content"] if isinstance(body, dict) else ""
    found = re.findall(r"\[\[ ## question ## \]\]\n(.*?)(?:\n\n|\n\[\[|$)", text, flags=re.S)
    return found[-1].strip() if found else ""


def deterministic_reply(body) -> str:
    """A program whose answer depends on the question only (its word count)."""
    return chat_adapter_reply(program=f"ans = {len(question_of(body).split())}\nscale = ''")


class SlowReply:
    """A stub reply that waits ``seconds`` before answering deterministically, and records the most requests it
    was serving at once (``peak``)."""

    def __init__(self, seconds: float):
        self.seconds = seconds
        self.active = 0
        self.peak = 0
        self._lock = threading.Lock()

    def __call__(self, body) -> str:
        with self._lock:
            self.active += 1
            self.peak = max(self.peak, self.active)
        try:
            time.sleep(self.seconds)
            return deterministic_reply(body)
        finally:
            with self._lock:
                self.active -= 1


def word_counter(model: str) -> WordCounter:
    """``token_counter_factory``: the word counter for any model."""
    return WordCounter()


class StubLM:
    """``lm_factory`` for the stub server: ``make_lm`` against ``base_url``, no retries, no cache."""

    def __init__(self, base_url: str):
        self.base_url = base_url

    def __call__(self, spec):
        from knapsack_dspy.llm import make_lm

        return make_lm("openai/stub-model", api_base=self.base_url, api_key="x", num_retries=0, cache=False,
                       max_tokens=spec.max_tokens)


class DyingEmbedder(HashingEmbedder):
    """A ``HashingEmbedder`` that, in a copy unpickled in another process (a Ray worker, never the driver that
    made it), kills that process (``os._exit``, as a crash or an out-of-memory kill would) when asked to embed
    one of the ``victims`` (question -> marker file, or None): once if the marker file does not exist yet (it is
    created first), every time if the marker is None."""

    def __init__(self, victims: dict[str, str | None]):
        super().__init__()
        self.victims = dict(victims)
        self.armed = False

    def __setstate__(self, state):
        self.__dict__.update(state)
        self.armed = True

    def encode(self, texts):
        for question, marker in self.victims.items() if self.armed else ():
            if any(question in str(text) for text in texts):
                if marker is None:
                    os._exit(17)
                if not Path(marker).exists():
                    Path(marker).write_text(str(os.getpid()))
                    os._exit(17)
        return super().encode(texts)


class ServerThread:
    """An ASGI app served by uvicorn on 127.0.0.1 (a free port) in a thread of this process, for the block."""

    def __init__(self, app):
        import socket

        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        import uvicorn

        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="error"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self):
        self.thread.start()
        deadline = time.time() + 30
        while not self.server.started and time.time() < deadline:
            time.sleep(0.02)
        return self

    def __exit__(self, *exc):
        self.server.should_exit = True
        self.thread.join(10)


class ServeSpec:
    """What a serve test's program asks of its LM (the stub LM reads ``max_tokens``)."""

    max_tokens = 384


def post(url: str, body, *, path: str = "/answer", method: str = "POST", headers: dict | None = None):
    """(status, headers, parsed JSON) of one request; ``body``: bytes as they are, anything else as JSON."""
    host, port = url.removeprefix("http://").split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=60)
    data = body if isinstance(body, bytes) or body is None else json.dumps(body).encode()
    connection.request(method, path, body=data, headers={"Content-Type": "application/json", **(headers or {})})
    response = connection.getresponse()
    payload = response.read()
    connection.close()
    headers = {key.lower(): value for key, value in response.getheaders()}
    return response.status, headers, json.loads(payload) if payload else None
