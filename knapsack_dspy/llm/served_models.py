"""Where this process's served models live: the ``api_base`` of each model string, as the process was told.

``make_lm(model, api_base=...)`` notes the server of an API model it builds, and so do the commands that name a
server without building an LM (``kdspy compile --api-base``, a bench run's ``api_base``); ``get_token_counter``
asks here, so that the prompt tokens of ``openai/<name>`` at ``http://127.0.0.1:8080/v1`` are counted by that
server (``served_token_counter``) wherever a counter is made for the model string alone (a reloaded program, a
Ray worker). The last server noted for a model string wins. Embedded ``local/`` models are never noted: they are
served in-process.
"""

from __future__ import annotations

import threading

from knapsack_dspy.llm.local_models import is_local_model

__all__ = ["forget_served_models", "note_served_model", "served_address", "server_root"]

_addresses: dict[str, str] = {}
_lock = threading.Lock()


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
    """The ``api_base`` noted for ``model``, or None."""
    with _lock:
        return _addresses.get(str(model).strip())


def forget_served_models() -> None:
    """Forget every noted server (tests)."""
    with _lock:
        _addresses.clear()
