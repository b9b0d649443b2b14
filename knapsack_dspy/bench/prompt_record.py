"""What each LM call of one example was sent, recorded as a fingerprint (not the text) in its results row.

Rows must let a reader see "what did the model see" without committing every prompt (a 1.5B run is ~2,000
tokens per call). A row keeps, per LM call, the sha256 of the exact messages sent (roles and contents,
canonical JSON) and the prompt format version of the code that rendered them; a report can then re-render a
row's prompt from the compiled program and the example and check it against the hash (rows written before
fingerprints say they cannot be re-rendered exactly).

``PROMPT_FORMAT_VERSION`` is bumped whenever rendering changes what a prompt holds for the same program and
example (table layout, demo rendering, instructions, adapter).
"""

from __future__ import annotations

import hashlib
import json
import threading

from dspy.utils.callback import BaseCallback

__all__ = ["PROMPT_FORMAT_VERSION", "PromptRecorder", "messages_sha256"]

PROMPT_FORMAT_VERSION = 2  # 1: rows before fingerprints; 2: table layout, shared tables, literal programs, routing


def messages_sha256(messages) -> str:
    """The fingerprint of a chat prompt: sha256 of its messages' roles and contents as canonical JSON."""
    canonical = [{"role": str(m.get("role", "")), "content": m.get("content")} for m in messages or []]
    return hashlib.sha256(json.dumps(canonical, sort_keys=True, ensure_ascii=False).encode()).hexdigest()


class PromptRecorder(BaseCallback):
    """A DSPy callback collecting the fingerprint of every LM call made while it is active (install it for one
    example with ``dspy.context(callbacks=[..., recorder])``); ``keep_messages``: the messages too (re-rendering a
    prompt, ``bench.prompt_rendering``; a bench row keeps only the fingerprints)."""

    def __init__(self, keep_messages: bool = False):
        self.hashes: list[str] = []
        self.messages: list[list[dict]] = []
        self.keep_messages = keep_messages
        self._lock = threading.Lock()

    def on_lm_start(self, call_id, instance, inputs):
        messages = (inputs or {}).get("messages")
        if messages is None and (inputs or {}).get("prompt") is not None:
            messages = [{"role": "user", "content": inputs["prompt"]}]
        with self._lock:
            self.hashes.append(messages_sha256(messages))
            if self.keep_messages:
                self.messages.append([{"role": str(m.get("role", "")), "content": m.get("content")}
                                      for m in messages or []])

    def row_fields(self) -> dict:
        return {"prompt_sha256": list(self.hashes), "prompt_format": PROMPT_FORMAT_VERSION}
