"""What each LM call of one example was sent, recorded as a fingerprint (not the text) in its results row.

Rows must let a reader see "what did the model see" without committing every prompt (a 1.5B run is ~2,000
tokens per call). A row keeps, per LM call, the sha256 of the exact messages sent (roles and contents,
canonical JSON) and the prompt format version of the code that rendered them; a report can then re-render a
row's prompt from the compiled program and the example and check it against the hash (rows written before
fingerprints say they cannot be re-rendered exactly).

The row also keeps what each call returned (``completions``: the completion text only, in the order of the
fingerprints; answers served from the LM cache included), so a results directory can be replayed without the
LM cache: a replay LM serves the recorded completion of a prompt by its fingerprint.

``PROMPT_FORMAT_VERSION`` (``saved_format``) is bumped whenever rendering changes what a prompt holds for the
same program and example (table layout, demo rendering, instructions, adapter).
"""

from __future__ import annotations

import hashlib
import threading

from dspy.utils.callback import BaseCallback

from knapsack_dspy.llm.prompt_fingerprint import messages_sha256, reply_key
from knapsack_dspy.saved_format import PROMPT_FORMAT_VERSION  # its history is there

__all__ = ["PROMPT_FORMAT_VERSION", "PromptRecorder", "completion_text", "messages_sha256"]



def completion_text(outputs):
    """The text of what one LM call returned (DSPy's outputs: a list of texts, or of dicts with ``"text"`` when
    the reply also had reasoning, tool calls or log-probabilities): the one text, or a list for several."""
    items = outputs if isinstance(outputs, list) else [outputs]
    texts = [item.get("text") if isinstance(item, dict) else item if item is None or isinstance(item, str)
             else str(item) for item in items]
    return texts[0] if len(texts) == 1 else texts


class PromptRecorder(BaseCallback):
    """A DSPy callback collecting the fingerprint of every LM call made while it is active (install it for one
    example with ``dspy.context(callbacks=[..., recorder])``) and the text the call returned (``completions``,
    in the same order; None for a call that failed); ``keep_messages``: the messages too (re-rendering a prompt,
    ``bench.results.prompt_rendering``; a bench row keeps only the fingerprints)."""

    def __init__(self, keep_messages: bool = False):
        self.hashes: list[str] = []
        self.reply_keys: list[str] = []
        self.completions: list = []
        self.messages: list[list[dict]] = []
        self.instructions: str | None = None  # the first call's system message (what its prompt opens with)
        self.keep_messages = keep_messages
        self._position: dict[str, int] = {}  # call id -> its index in hashes (calls may end in another order)
        self._lock = threading.Lock()

    def on_lm_start(self, call_id, instance, inputs):
        messages = (inputs or {}).get("messages")
        if messages is None and (inputs or {}).get("prompt") is not None:
            messages = [{"role": "user", "content": inputs["prompt"]}]
        with self._lock:
            self._position[call_id] = len(self.hashes)
            fingerprint = messages_sha256(messages)
            self.hashes.append(fingerprint)
            # the LM's own settings, then the call's (DSPy's callback gets a call's keyword arguments nested under
            # "kwargs"): what the provider is sent, as the replay side sees it
            call = dict(inputs or {})
            nested = call.pop("kwargs", None)
            settings = {**(getattr(instance, "kwargs", None) or {}), **call,
                        **(nested if isinstance(nested, dict) else {})}
            self.reply_keys.append(reply_key(messages, getattr(instance, "model", None), settings,
                                             fingerprint=fingerprint))
            self.completions.append(None)
            if self.instructions is None and messages and str(messages[0].get("role")) == "system":
                self.instructions = str(messages[0].get("content") or "")
            if self.keep_messages:
                self.messages.append([{"role": str(m.get("role", "")), "content": m.get("content")}
                                      for m in messages or []])

    def on_lm_end(self, call_id, outputs, exception=None):
        with self._lock:
            position = self._position.pop(call_id, None)
            if position is not None and exception is None:
                self.completions[position] = completion_text(outputs)

    def row_fields(self) -> dict:
        return {"prompt_sha256": list(self.hashes), "prompt_format": PROMPT_FORMAT_VERSION,
                "completions": list(self.completions), "reply_keys": list(self.reply_keys)}

    def instruction_fields(self) -> dict:
        """``{"instructions_sha256"}``: the sha256 of the first call's system message as sent (``{}``: no call, or
        none opened with a system message)."""
        if self.instructions is None:
            return {}
        return {"instructions_sha256": hashlib.sha256(self.instructions.encode("utf-8")).hexdigest()}
