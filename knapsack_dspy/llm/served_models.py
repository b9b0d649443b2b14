"""Where this process's served models live: the ``api_base`` of each model string, as the process was told.

``make_lm(model, api_base=...)`` notes the server of an API model it builds, and so do the commands that name a
server without building an LM (``kdspy compile --api-base``, a bench run's ``api_base``); ``get_token_counter``
asks here, so that the prompt tokens of ``openai/<name>`` at ``http://127.0.0.1:8080/v1`` are counted by that
server (``served_token_counter``) wherever a counter is made for the model string alone (a reloaded program, a
Ray worker). The last server noted for a model string wins. Embedded ``local/`` models are never noted: they are
served in-process. Inside ``with without_servers():`` (``kdspy bench --reuse --replay-only``: nothing may contact a
model's server) no server is known: models are counted as without one (an estimate).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from knapsack_dspy.llm.local_models import is_local_model

__all__ = [
    "forget_served_models",
    "note_served_model",
    "served_address",
    "server_of",
    "server_root",
    "without_servers",
]

_addresses: dict[str, str] = {}
_lock = threading.Lock()
_hidden = [0]  # ``without_servers`` blocks entered and not left


def server_root(api_base: str) -> str:
    """The server's own address for an ``api_base``: without a trailing ``/`` and ``/v1`` (llama.cpp's and vLLM's
    token endpoints sit at the root, the OpenAI ones under ``/v1``)."""
    root = str(api_base).strip().rstrip("/")
    return root[: -len("/v1")] if root.endswith("/v1") else root


def note_served_model(model: str, api_base: str | None) -> None:
    """``model`` (a LiteLLM model string) is served at ``api_base`` (nothing is noted for an empty one or a
    ``local/`` model)."""
    if not api_base or not str(api_base).strip() or not isinstance(model, str) or is_local_model(model.strip()):
        return
    with _lock:
        _addresses[model.strip()] = str(api_base).strip().rstrip("/")


def served_address(model: str) -> str | None:
    """The ``api_base`` noted for ``model``, or None (always inside ``without_servers``)."""
    with _lock:
        return None if _hidden[0] else _addresses.get(str(model).strip())


def server_of(model: str, api_base: str | None = None) -> str | None:
    """The server ``model`` is counted on: ``api_base``, else the one noted for it; None inside ``without_servers``
    or when there is none."""
    with _lock:
        if _hidden[0]:
            return None
    return (str(api_base).strip().rstrip("/") if api_base and str(api_base).strip() else None) or served_address(model)


@contextmanager
def without_servers() -> Iterator[None]:
    """No model is known to be served inside the block (process-wide): its counters are made without a server."""
    with _lock:
        _hidden[0] += 1
    try:
        yield
    finally:
        with _lock:
            _hidden[0] -= 1


def forget_served_models() -> None:
    """Forget every noted server (tests)."""
    with _lock:
        _addresses.clear()
