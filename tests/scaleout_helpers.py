"""Shared by the scale-out tests (threads, Ray, the server): a deterministic stub reply, a reply that takes its
time and counts how many requests it serves at once, an LM factory for the stub, and an embedder that kills
the Ray worker using it.

Everything here is importable by Ray workers (the tests folder travels to them on ``PYTHONPATH``) and
picklable (classes at module level, no lambdas).
"""

from __future__ import annotations

import os
import re
import threading
import time
from pathlib import Path

from helpers import HashingEmbedder, WordCounter
from openai_stub_server import chat_adapter_reply

# What must not depend on how many workers answered: the answer and everything about the prompt.
SAME_FIELDS = ("answer", "scale", "output", "exemplar_ids", "prompt_tokens", "prompt_sha256", "prompt_format",
               "correct", "error", "error_kind", "within_budget", "lm_calls")


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


def _deep(levels: int) -> bytes:
    return b'{"question": "q", "table": ' + b"[" * levels + b"]" * levels + b"}"


# Requests kdspy serve must answer with a 4xx and a one-line reason (tests/test_serve.py, benchmarks/serve_load.py).
MALFORMED_REQUESTS = {
    "not JSON": b"{question: what}",
    "cut JSON": b'{"question": "what',
    "not UTF-8": b'{"question": "\xff\xfe"}',
    "empty body": b"",
    "a JSON list": [1, 2, 3],
    "a JSON string": "question",
    "no question": {"table": [], "paragraphs": []},
    "empty question": {"question": ""},
    "blank question": {"question": "   "},
    "question a number": {"question": 7},
    "question null": {"question": None},
    "question a list": {"question": ["what"]},
    "table a string": {"question": "q", "table": "a,b"},
    "table rows not lists": {"question": "q", "table": ["a", "b"]},
    "a cell an object": {"question": "q", "table": [[{"a": 1}]]},
    "a cell a boolean": {"question": "q", "table": [[True]]},
    "paragraphs a string": {"question": "q", "paragraphs": "text"},
    "a paragraph a number": {"question": "q", "paragraphs": [1]},
    "an unknown field": {"question": "q", "tabel": []},
    "a lone surrogate": b'{"question": "what \\ud800 is it"}',
    "a huge integer": b'{"question": "q", "table": [[' + b"9" * 5000 + b"]]}",
    "nested too deeply": _deep(100_000),
    "a question too long": {"question": "word " * 2000},
    "too many cells": {"question": "q", "table": [["1"] * 100] * 600},
    "a huge body": {"question": "q", "paragraphs": ["x" * 2_000_000]},
}
