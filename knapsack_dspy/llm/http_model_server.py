"""An embedded model as llama.cpp's OpenAI-compatible HTTP server on 127.0.0.1 (``kdspy serve-model``).

The server is the same ``LocalServer`` the ``local/`` provider runs in-process (``local_server``): the same
xllamacpp parameters (context per slot, unified KV cache off, ``prefill_assistant`` off, decode and prompt threads
chosen the same way), so a greedy reply of the served model is the in-process model's when the two are started
alike (docs/llm.md, "Serving a model"). What a served model adds: a fixed port (0: a free one), its name as the
model id the OpenAI endpoints answer with, and llama.cpp's prompt cache as the default for requests that do not
say (``cache_prompt``; off under ``KDSPY_LOCAL_REPRODUCIBLE=1`` unless asked).

:func:`start_model_server` checks what a user can get wrong, each as one line (``ModelServerError``): a port
already taken, weights that are not installed (``LocalWeightsError``, from ``local_weights``), a context llama.cpp
serves smaller than the one asked per slot (it caps a slot at the model's trained context).
"""

from __future__ import annotations

import json
import socket
import urllib.error
import urllib.request
from dataclasses import dataclass

from knapsack_dspy.llm.errors import LocalModelError
from knapsack_dspy.llm.local_models import LocalModelSpec, local_model_spec, local_n_ctx
from knapsack_dspy.llm.local_server import LocalServer, default_threads, reproducible
from knapsack_dspy.llm.local_weights import ensure_local_weights

__all__ = ["HOST", "ModelServerError", "ServeSettings", "served_base_url", "slot_contexts", "start_model_server"]

HOST = "127.0.0.1"  # the only address served: this machine (put a proxy in front to serve others)
_LOOPBACK_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


class ModelServerError(LocalModelError):
    """A served model cannot start as asked: the port is taken, or the context does not fit."""


@dataclass(frozen=True)
class ServeSettings:
    """How to serve a model. ``model``: ``local/<name>`` or ``<name>`` of the catalogue (``local_models``).
    ``port``: 0 for a free one. ``slots``: requests decoded at once (llama.cpp's parallel slots). ``n_ctx``: tokens
    per slot (None: ``$KDSPY_LOCAL_N_CTX`` or 4096, as in-process). ``threads`` / ``batch_threads``: generation and
    prompt-processing threads (None: chosen as in-process). ``cache_prompt``: reuse the previous prompt's prefix in
    a slot unless a request says otherwise (None: on, off under ``KDSPY_LOCAL_REPRODUCIBLE=1``)."""

    model: str
    port: int = 0
    slots: int = 1
    n_ctx: int | None = None
    threads: int | None = None
    batch_threads: int | None = None
    cache_prompt: bool | None = None
    cache_dir: str | None = None

    def check(self) -> None:
        if not 0 <= self.port <= 65535:
            raise ModelServerError(f"port must be between 0 and 65535, got {self.port}")
        for name, value, least in (("slots", self.slots, 1), ("context", self.n_ctx, 256),
                                   ("threads", self.threads, 1), ("batch threads", self.batch_threads, 1)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < least):
                raise ModelServerError(f"{name} must be a whole number of at least {least}, got {value!r}")


def _check_port_free(port: int) -> None:
    """``ModelServerError`` unless ``port`` on 127.0.0.1 can be bound now (llama.cpp's own failure says only
    "Failed to init server")."""
    probe = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as llama.cpp binds: TIME_WAIT is no conflict
        probe.bind((HOST, port))
    except OSError as exc:
        raise ModelServerError(f"port {port} on {HOST} is already in use ({exc.strerror or exc}); choose another "
                               "port, or 0 for a free one") from None
    finally:
        probe.close()


def _get_json(url: str) -> object:
    with _LOOPBACK_OPENER.open(url, timeout=30) as response:
        return json.loads(response.read())


def slot_contexts(address: str) -> list[int]:
    """The context (tokens) of each slot of the llama.cpp server at ``address`` (``GET /slots``)."""
    try:
        slots = _get_json(address.rstrip("/") + "/slots")
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise ModelServerError(f"the model server at {address} did not describe its slots: {exc}") from exc
    if not isinstance(slots, list) or not slots:
        raise ModelServerError(f"the model server at {address} described no slots")
    return [int(slot.get("n_ctx") or 0) for slot in slots if isinstance(slot, dict)]


def served_base_url(server: LocalServer) -> str:
    """The OpenAI ``api_base`` of a started server (``http://127.0.0.1:PORT/v1``)."""
    return server.address.rstrip("/") + "/v1"


def start_model_server(settings: ServeSettings) -> LocalServer:
    """Load ``settings.model`` and serve it over HTTP on 127.0.0.1 (the ``LocalServer``, started; ``stop()`` it).
    One-line errors: ``ModelServerError`` (port, context), ``LocalWeightsError`` (weights), ``LLMConfigError``
    (an unknown model name)."""
    settings.check()
    spec: LocalModelSpec = local_model_spec(settings.model)
    n_ctx = settings.n_ctx or local_n_ctx()
    if settings.port:
        _check_port_free(settings.port)
    path = ensure_local_weights(spec, settings.cache_dir)
    threads, batch_threads = default_threads(settings.threads, settings.batch_threads)
    cache_prompt = (not reproducible()) if settings.cache_prompt is None else settings.cache_prompt
    server = LocalServer(spec, path, n_ctx=n_ctx, n_threads=threads, n_batch_threads=batch_threads,
                         slots=settings.slots, port=settings.port, cache_prompt=cache_prompt)
    try:
        server.start()
    except LocalModelError as exc:
        if settings.port:
            _check_port_free(settings.port)  # taken between the check and the load: say so
        raise LocalModelError(f"{exc} (a context of {settings.slots} x {n_ctx} tokens may not fit in memory: "
                              "ask for fewer slots or a smaller context)") from exc
    served = slot_contexts(server.address)
    if min(served) < n_ctx:
        server.stop()
        raise ModelServerError(f"{spec.model} serves at most {min(served)} tokens per slot, fewer than the {n_ctx} "
                               f"asked (its trained context is {spec.trained_context}); ask for a smaller context")
    return server

