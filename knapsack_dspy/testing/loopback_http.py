"""A threaded HTTP server on 127.0.0.1 and a free port whose every GET / POST goes to one function: what the stub
model server (``openai_stub_server``) and the fault proxy (``fault_proxy``) share."""

from __future__ import annotations

import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

__all__ = ["serve_on_loopback", "shut_down"]

Handle = Callable[[BaseHTTPRequestHandler, str], None]


def serve_on_loopback(handle: Handle, name: str) -> tuple[ThreadingHTTPServer, threading.Thread]:
    """Start a server answering every request with ``handle(request, "GET" | "POST")`` (quiet: no access log) in a
    daemon thread called ``name``; the server and its thread."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):  # quiet
            pass

        def do_GET(self):
            handle(self, "GET")

        def do_POST(self):
            handle(self, "POST")

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, name=name, daemon=True)
    thread.start()
    return httpd, thread


def shut_down(httpd: ThreadingHTTPServer | None) -> None:
    """Stop a server ``serve_on_loopback`` started (None: nothing to stop)."""
    if httpd is not None:
        httpd.shutdown()
        httpd.server_close()
