"""A tiny OpenAI-compatible chat-completions server for tests (127.0.0.1, random port, threaded).

Answers ``POST /v1/chat/completions`` (and ``GET /v1/models``) with a well-formed ``chat.completion``. Faults
can be queued to exercise clients: HTTP errors with or without ``Retry-After`` (429, 500, 503, ...), hangs
(the request is held open for a while), garbage bodies, dropped connections, each for the next N requests;
later requests succeed again. Every request is logged (``server.requests``).

``tokenize="llama.cpp"`` / ``"vLLM"`` also answers that server's token-count endpoints (llama.cpp:
``/apply-template``, ``/tokenize``, ``/props``; vLLM: ``/tokenize``) for a toy tokenizer -- words of a toy chat
template (:func:`stub_template`) -- and reports the same count as a completion's ``usage.prompt_tokens``.

    with StubOpenAIServer(reply="hello") as server:
        server.fail_next(2, status=500)          # two 500s, then success
        ... make_lm("openai/stub-model", api_base=server.base_url, api_key="x") ...
        assert server.completion_count() == 3
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from knapsack_dspy.testing.loopback_http import serve_on_loopback, shut_down


@dataclass
class Fault:
    """What to do instead of answering normally, for ``count`` requests.

    kind: "status" (send ``status`` with an OpenAI-style error body), "hang" (hold the request open for
        ``seconds``, then answer normally unless the client has gone), "garbage" (HTTP 200 with a body that is
        not JSON), "disconnect" (close the socket without an answer), "empty" (HTTP 200, a well-formed
        completion whose ``choices`` list is empty), "truncated" (the first half of a well-formed answer,
        then the connection closes).
    """

    kind: str
    count: int = 1
    status: int = 500
    retry_after: float | None = None
    seconds: float = 30.0
    message: str = "injected failure"


@dataclass
class LoggedRequest:
    method: str
    path: str
    body: Any
    headers: dict[str, str]
    outcome: str = ""
    at: float = field(default_factory=time.time)


def chat_adapter_reply(**fields: Any) -> str:
    """The text DSPy's ChatAdapter parses into ``fields`` (``[[ ## name ## ]]`` sections + completed marker)."""
    parts = [f"[[ ## {name} ## ]]\n{value}" for name, value in fields.items()]
    return "\n\n".join([*parts, "[[ ## completed ## ]]"])


def _words(messages: list[dict]) -> int:
    return sum(len(str(m.get("content", "")).split()) for m in messages or [])


def _message_words(messages: list[dict]) -> list[str]:
    """The words of a prompt in order, each message opened by its role (a prefix match stops at a new role)."""
    out: list[str] = []
    for message in messages or []:
        out.append(f"<{message.get('role')}>")
        out += str(message.get("content", "")).split()
    return out


def stub_template(messages: list[dict]) -> str:
    """The stub's chat template: each message as ``<|role|> content``, then ``<|assistant|>`` (its tokens: words)."""
    return " ".join([*(f"<|{m.get('role')}|> {m.get('content', '')}" for m in messages or []), "<|assistant|>"])


def _block_texts(content) -> list[tuple[str, bool]]:
    """(text, marked with cache_control) of each block of an Anthropic content (a string is one block)."""
    if isinstance(content, str):
        return [(content, False)]
    return [(str(block.get("text", "")), bool(block.get("cache_control"))) for block in content or []
            if isinstance(block, dict)]


class StubOpenAIServer:
    """See the module docstring. ``reply`` is a string or ``callable(request_body) -> str``."""

    def __init__(self, reply: str | Callable[[dict], str] = "stub answer", model_name: str | None = None,
                 prefix_cache: bool = False, tokenize: str | None = None, context_window: int = 4096):
        if tokenize not in (None, "llama.cpp", "vLLM"):
            raise ValueError(f"tokenize must be None, 'llama.cpp' or 'vLLM', got {tokenize!r}")
        self.reply = reply
        self.model_name = model_name
        self.prefix_cache = prefix_cache
        self.tokenize = tokenize
        self.context_window = context_window
        self._previous_words: list[str] = []
        self._anthropic_cache: set[str] = set()
        self.requests: list[LoggedRequest] = []
        self._faults: deque[Fault] = deque()
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle -------------------------------------------------------------------------------------
    def start(self) -> StubOpenAIServer:
        self._httpd, self._thread = serve_on_loopback(self._handle, "stub-openai")
        return self

    def stop(self) -> None:
        self._stopping.set()
        shut_down(self._httpd)
        self._httpd = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    @property
    def port(self) -> int:
        return self._httpd.server_address[1]

    @property
    def base_url(self) -> str:
        """The ``api_base`` to give an OpenAI client (ends in ``/v1``)."""
        return f"http://127.0.0.1:{self.port}/v1"

    # -- fault injection -------------------------------------------------------------------------------
    def fail_next(self, count: int = 1, *, status: int = 500, retry_after: float | None = None,
                  message: str = "injected failure") -> None:
        self.add_fault(Fault("status", count=count, status=status, retry_after=retry_after, message=message))

    def hang_next(self, count: int = 1, *, seconds: float = 30.0) -> None:
        self.add_fault(Fault("hang", count=count, seconds=seconds))

    def garbage_next(self, count: int = 1) -> None:
        self.add_fault(Fault("garbage", count=count))

    def disconnect_next(self, count: int = 1) -> None:
        self.add_fault(Fault("disconnect", count=count))

    def empty_next(self, count: int = 1) -> None:
        self.add_fault(Fault("empty", count=count))

    def truncate_next(self, count: int = 1) -> None:
        self.add_fault(Fault("truncated", count=count))

    def add_fault(self, fault: Fault) -> None:
        with self._lock:
            self._faults.append(fault)

    def clear(self) -> None:
        """Forget queued faults and the request log."""
        with self._lock:
            self._faults.clear()
            self.requests.clear()

    def _next_fault(self) -> Fault | None:
        with self._lock:
            if not self._faults:
                return None
            fault = self._faults[0]
            fault.count -= 1
            if fault.count <= 0:
                self._faults.popleft()
            return fault

    # -- request log -----------------------------------------------------------------------------------
    def completion_requests(self) -> list[LoggedRequest]:
        with self._lock:
            return [r for r in self.requests if r.path.rstrip("/").endswith("/chat/completions")]

    def completion_count(self) -> int:
        return len(self.completion_requests())

    # -- prompt caches ---------------------------------------------------------------------------------
    def _cached_words(self, messages: list[dict]) -> int:
        """Words this prompt shares from the start with the previous one (automatic prefix caching)."""
        words = _message_words(messages)
        with self._lock:
            shared = 0
            for a, b in zip(words, self._previous_words, strict=False):
                if a != b:
                    break
                shared += 1
            self._previous_words = words
        return shared

    def _anthropic_reply(self, body: Any) -> dict:
        """An Anthropic ``/v1/messages`` reply; the prompt up to its last ``cache_control`` block is cached."""
        body = body if isinstance(body, dict) else {}
        system = body.get("system") or []
        parts = [("system", text, marked) for text, marked in _block_texts(system)]
        for message in body.get("messages") or []:
            parts += [(message.get("role"), text, marked) for text, marked in _block_texts(message.get("content"))]
        words = [len(text.split()) for _, text, _ in parts]
        last_mark = max((k for k, (_, _, marked) in enumerate(parts) if marked), default=-1)
        read = written = 0
        if last_mark >= 0:
            key = json.dumps(parts[: last_mark + 1])
            cached = sum(words[: last_mark + 1])
            with self._lock:
                if key in self._anthropic_cache:
                    read = cached
                else:
                    written = cached
                    self._anthropic_cache.add(key)
        content = self.reply(body) if callable(self.reply) else str(self.reply)
        return {"id": f"msg_stub_{len(self.requests)}", "type": "message", "role": "assistant",
                "model": body.get("model", "stub-model"), "content": [{"type": "text", "text": content}],
                "stop_reason": "end_turn", "stop_sequence": None,
                "usage": {"input_tokens": sum(words) - read - written, "output_tokens": len(content.split()),
                          "cache_read_input_tokens": read, "cache_creation_input_tokens": written}}

    def message_requests(self) -> list[LoggedRequest]:
        """The Anthropic-format requests received."""
        with self._lock:
            return [r for r in self.requests if r.path.split("?", 1)[0].rstrip("/").endswith("/messages")]

    # -- token counts (tokenize=...) -------------------------------------------------------------------
    def _token_endpoint(self, method: str, path: str, body: Any) -> dict | None:
        """The answer of a token-count endpoint of the server ``tokenize`` names (None: not one of them)."""
        body = body if isinstance(body, dict) else {}
        if self.tokenize == "llama.cpp":
            if method == "POST" and path == "/apply-template":
                return {"prompt": stub_template(body.get("messages") or [])}
            if method == "POST" and path == "/tokenize":
                content = body.get("content", "")
                pieces = content if isinstance(content, list) else [content]
                tokens: list[int] = []
                for piece in pieces:
                    tokens += [piece] if isinstance(piece, int) else [7] * len(str(piece).split())
                return {"tokens": tokens}
            if method == "GET" and path == "/props":
                return {"default_generation_settings": {"n_ctx": self.context_window}, "total_slots": 1}
        if self.tokenize == "vLLM" and method == "POST" and path == "/tokenize":
            text = stub_template(body["messages"]) if "messages" in body else str(body.get("prompt", ""))
            count = len(text.split())
            return {"count": count, "max_model_len": self.context_window, "tokens": [7] * count}
        return None

    # -- handling --------------------------------------------------------------------------------------
    def _send(self, handler: BaseHTTPRequestHandler, status: int, body: bytes, headers: dict | None = None,
              content_type: str = "application/json") -> None:
        handler.send_response(status)
        handler.send_header("Content-Type", content_type)
        handler.send_header("Content-Length", str(len(body)))
        for key, value in (headers or {}).items():
            handler.send_header(key, value)
        handler.end_headers()
        handler.wfile.write(body)
        handler.wfile.flush()

    def _handle(self, handler: BaseHTTPRequestHandler, method: str) -> None:
        length = int(handler.headers.get("Content-Length") or 0)
        raw = handler.rfile.read(length) if length else b""
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = raw.decode("utf-8", "replace")
        entry = LoggedRequest(method, handler.path, body, {k.lower(): v for k, v in handler.headers.items()})
        with self._lock:
            self.requests.append(entry)
        path = handler.path.split("?", 1)[0].rstrip("/")
        if method == "GET" and path.endswith("/models"):
            entry.outcome = "models"
            data = {"object": "list", "data": [{"id": self.model_name or "stub-model", "object": "model"}]}
            return self._send(handler, 200, json.dumps(data).encode())
        if method == "POST" and path.endswith("/messages"):
            entry.outcome = "ok"
            return self._send(handler, 200, json.dumps(self._anthropic_reply(body)).encode())
        counted = self._token_endpoint(method, path, body)
        if counted is not None:
            entry.outcome = "tokens"
            return self._send(handler, 200, json.dumps(counted).encode())
        if not (method == "POST" and path.endswith("/chat/completions")):
            entry.outcome = "404"
            return self._send(handler, 404, json.dumps({"error": {"message": f"no route {path}"}}).encode())
        fault = self._next_fault()
        if fault is not None and fault.kind == "status":
            entry.outcome = f"status {fault.status}"
            headers = {} if fault.retry_after is None else {"Retry-After": f"{fault.retry_after:g}"}
            error = {"error": {"message": fault.message, "type": "stub_error", "code": str(fault.status)}}
            return self._send(handler, fault.status, json.dumps(error).encode(), headers)
        if fault is not None and fault.kind == "garbage":
            entry.outcome = "garbage"
            return self._send(handler, 200, b"<html>this is not json {{{", content_type="application/json")
        if fault is not None and fault.kind == "disconnect":
            entry.outcome = "disconnect"
            try:
                handler.connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            handler.close_connection = True
            return None
        if fault is not None and fault.kind == "hang":
            entry.outcome = "hang"
            if self._stopping.wait(fault.seconds):
                return None
        entry.outcome = entry.outcome or "ok"
        content = self.reply(body) if callable(self.reply) else str(self.reply)
        messages = body.get("messages", []) if isinstance(body, dict) else []
        prompt_tokens = len(stub_template(messages).split()) if self.tokenize else _words(messages) + 1
        completion_tokens = len(content.split())
        data = {
            "id": f"chatcmpl-stub-{len(self.requests)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self.model_name or (body.get("model") if isinstance(body, dict) else "stub-model"),
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                      "total_tokens": prompt_tokens + completion_tokens},
        }
        if self.prefix_cache:
            data["usage"]["prompt_tokens_details"] = {"cached_tokens": self._cached_words(messages)}
        if fault is not None and fault.kind == "empty":
            entry.outcome = "empty"
            data["choices"] = []
        body_bytes = json.dumps(data).encode()
        try:
            if fault is not None and fault.kind == "truncated":
                entry.outcome = "truncated"
                handler.send_response(200)
                handler.send_header("Content-Type", "application/json")
                handler.send_header("Content-Length", str(len(body_bytes)))
                handler.end_headers()
                handler.wfile.write(body_bytes[: len(body_bytes) // 2])
                handler.wfile.flush()
                handler.connection.shutdown(socket.SHUT_RDWR)
                handler.close_connection = True
                return None
            self._send(handler, 200, body_bytes)
        except OSError:  # the client gave up (timeout) while we were hanging
            entry.outcome += " (client gone)"
