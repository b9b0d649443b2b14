"""A fault-injecting HTTP proxy in front of a real model server (127.0.0.1, a free port, threaded).

A real llama.cpp server does not answer 500 or 429 on demand; this proxy does, for the next N chat completions,
and forwards everything else to the server unchanged (the token-count endpoints included):

    with FaultProxy("http://127.0.0.1:8080") as proxy:
        proxy.fail_next(2, status=429, retry_after=0)   # two 429s, then the server's own answers
        proxy.slow_next(1, seconds=3)                    # the next answer held back 3 s (a client timeout fires)
        ... make_lm("openai/<name>", api_base=proxy.base_url) ...

Faults: ``status`` (an OpenAI-style error body with that HTTP status, ``Retry-After`` when given), ``hang``
(``slow_next``: the request is forwarded after ``seconds``, unless the client gave up meanwhile: then the server
never sees it),
``disconnect`` (the connection closed without an answer). An upstream that does not answer is a 502. Every
request is logged (``proxy.requests``: path and outcome).
"""

from __future__ import annotations

import json
import select
import socket
import threading
import urllib.error
import urllib.request
from collections import deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from knapsack_dspy.testing.loopback_http import serve_on_loopback, shut_down
from knapsack_dspy.testing.openai_stub_server import Fault, LoggedRequest

__all__ = ["FaultProxy"]

_FORWARDED_HEADERS = ("content-type", "authorization", "accept")
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def _client_gone(connection: socket.socket) -> bool:
    """Whether the client closed its end (readable, and nothing left to read)."""
    try:
        readable, _, _ = select.select([connection], [], [], 0)
        return bool(readable) and connection.recv(1, socket.MSG_PEEK) == b""
    except OSError:
        return True


class FaultProxy:
    """See the module docstring. ``upstream``: the server's address (``http://127.0.0.1:PORT``, with or without
    ``/v1``)."""

    def __init__(self, upstream: str, timeout: float = 600.0):
        upstream = upstream.rstrip("/")
        self.upstream = upstream[: -len("/v1")] if upstream.endswith("/v1") else upstream
        self.timeout = timeout
        self.requests: list[LoggedRequest] = []
        self._faults: deque[Fault] = deque()
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._httpd: ThreadingHTTPServer | None = None

    # -- lifecycle -------------------------------------------------------------------------------------
    def start(self) -> FaultProxy:
        self._httpd, _ = serve_on_loopback(self._handle, "fault-proxy")
        return self

    def stop(self) -> None:
        self._stopping.set()
        shut_down(self._httpd)
        self._httpd = None

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    @property
    def base_url(self) -> str:
        """The ``api_base`` to give a client instead of the server's (ends in ``/v1``)."""
        if self._httpd is None:
            raise RuntimeError("the proxy is not started")
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    # -- faults ----------------------------------------------------------------------------------------
    def fail_next(self, count: int = 1, *, status: int = 500, retry_after: float | None = None) -> None:
        self._add(Fault("status", count=count, status=status, retry_after=retry_after))

    def slow_next(self, count: int = 1, *, seconds: float = 5.0) -> None:
        self._add(Fault("hang", count=count, seconds=seconds))

    def disconnect_next(self, count: int = 1) -> None:
        self._add(Fault("disconnect", count=count))

    def _add(self, fault: Fault) -> None:
        with self._lock:
            self._faults.append(fault)

    def _next_fault(self) -> Fault | None:
        with self._lock:
            if not self._faults:
                return None
            fault = self._faults[0]
            fault.count -= 1
            if fault.count <= 0:
                self._faults.popleft()
            return fault

    def outcomes(self, path_end: str = "/chat/completions") -> list[str]:
        """The outcome of each request whose path ends so, in order."""
        with self._lock:
            return [r.outcome for r in self.requests if r.path.split("?", 1)[0].rstrip("/").endswith(path_end)]

    # -- handling --------------------------------------------------------------------------------------
    @staticmethod
    def _send(handler: BaseHTTPRequestHandler, status: int, body: bytes, headers: dict | None = None) -> None:
        handler.send_response(status)
        for key, value in {"Content-Type": "application/json", **(headers or {})}.items():
            handler.send_header(key, value)
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body)
        handler.wfile.flush()

    def _handle(self, handler: BaseHTTPRequestHandler, method: str) -> None:
        length = int(handler.headers.get("Content-Length") or 0)
        raw = handler.rfile.read(length) if length else b""
        entry = LoggedRequest(method, handler.path, None, {k.lower(): v for k, v in handler.headers.items()})
        with self._lock:
            self.requests.append(entry)
        completion = handler.path.split("?", 1)[0].rstrip("/").endswith("/chat/completions")
        fault = self._next_fault() if completion else None
        try:
            if fault is not None and fault.kind == "status":
                entry.outcome = f"status {fault.status}"
                error = {"error": {"message": f"injected {fault.status}", "type": "proxy_error",
                                   "code": fault.status}}
                headers = {} if fault.retry_after is None else {"Retry-After": f"{fault.retry_after:g}"}
                return self._send(handler, fault.status, json.dumps(error).encode(), headers)
            if fault is not None and fault.kind == "disconnect":
                entry.outcome = "disconnect"
                handler.connection.shutdown(socket.SHUT_RDWR)
                handler.close_connection = True
                return None
            if fault is not None and fault.kind == "hang":
                entry.outcome = "slow "
                if self._stopping.wait(fault.seconds):
                    return None
                if _client_gone(handler.connection):  # it timed out meanwhile: the server never sees it
                    entry.outcome += "(client gone)"
                    return None
            status, body, content_type = self._forward(handler, method, raw)
            entry.outcome += "forwarded" if status < 500 else f"upstream {status}"
            self._send(handler, status, body, {"Content-Type": content_type})
        except OSError:  # the client gave up (a timeout while the answer was held back)
            entry.outcome += " (client gone)"
        return None

    def _forward(self, handler: BaseHTTPRequestHandler, method: str, raw: bytes) -> tuple[int, bytes, str]:
        headers = {k: v for k, v in handler.headers.items() if k.lower() in _FORWARDED_HEADERS}
        request = urllib.request.Request(self.upstream + handler.path, data=raw if method == "POST" else None,
                                         headers=headers, method=method)
        try:
            with _OPENER.open(request, timeout=self.timeout) as response:
                return response.status, response.read(), response.headers.get("Content-Type", "application/json")
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read(), exc.headers.get("Content-Type", "application/json")
        except (urllib.error.URLError, OSError) as exc:
            error = {"error": {"message": f"upstream {self.upstream} did not answer: {exc}", "type": "proxy_error",
                               "code": 502}}
            return 502, json.dumps(error).encode(), "application/json"
