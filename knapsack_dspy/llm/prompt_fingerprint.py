"""The fingerprint of a chat prompt (what a results row keeps instead of the prompt's text) and the key of a reply
(the fingerprint plus the model, its weights, the runtime and the decoding settings: what a replay of recorded
replies matches on)."""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Mapping
from typing import Any

from knapsack_dspy.llm.local_models import is_local_model, weights_sha256

__all__ = ["DECODING_SETTINGS", "messages_sha256", "reply_context", "reply_key"]


def messages_sha256(messages) -> str:
    """sha256 of the messages' roles and contents as canonical JSON."""
    canonical = [{"role": str(m.get("role", "")), "content": m.get("content")} for m in messages or []]
    return hashlib.sha256(json.dumps(canonical, sort_keys=True, ensure_ascii=False).encode()).hexdigest()


#: The call settings a reply depends on besides the messages (the rest -- retries, timeouts, caching -- do not
#: change what the model writes).
DECODING_SETTINGS = ("temperature", "top_p", "top_k", "min_p", "max_tokens", "max_completion_tokens", "stop",
                     "seed", "n", "presence_penalty", "frequency_penalty", "repeat_penalty", "logit_bias")


def reply_context(model: str | None, settings: Mapping[str, Any] | None = None) -> dict:
    """What a reply depends on besides its messages: the model, its weights (an embedded model's sha256), the
    runtime that runs it (xllamacpp's version) and the decoding settings of :data:`DECODING_SETTINGS`."""
    local = bool(model) and is_local_model(str(model))
    settings = settings or {}
    return {"model": model, "weights_sha256": weights_sha256(str(model)) if local else None,
            "runtime": _runtime_version() if local else None,
            "decoding": {key: settings.get(key) for key in DECODING_SETTINGS if settings.get(key) is not None}}


def reply_key(messages, model: str | None, settings: Mapping[str, Any] | None = None, *,
              fingerprint: str | None = None) -> str:
    """sha256 of the messages' fingerprint and the :func:`reply_context`: equal keys, the same model asked the same
    thing the same way -- what a recorded reply must match to stand in for a live one. ``fingerprint``: the
    messages' :func:`messages_sha256`, when the caller has it already."""
    payload = {"messages": fingerprint or messages_sha256(messages), "context": reply_context(model, settings)}
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()


@functools.cache
def _runtime_version() -> str | None:
    from importlib import metadata

    try:
        return metadata.version("xllamacpp")
    except metadata.PackageNotFoundError:
        return None
