"""Answering prompts from recorded replies: an earlier run's completions, matched by the reply key.

A results row keeps the fingerprint of every prompt it sent (``prompt_sha256``), its reply key (``reply_keys``: the
fingerprint with the model, its weights, the runtime and the decoding settings) and the text the model returned
(``completions``). ``with replaying(replies, keyed=...):`` answers every LM call whose reply key was recorded (or,
for rows older than reply keys, whose messages have a recorded fingerprint) with the recorded text, without
calling the model, and lets the others through to the model (or, with ``only=True``, fails them with
:class:`NotRecordedError`). Everything after the LM -- the adapter's parsing,
program execution, the scale rule, scoring -- runs with today's code, so a new run shares an old run's LM work
exactly where its prompts are byte-identical (the same exemplars in the same order), and a change after the LM
can be measured on a run that cost LM hours.

It wraps ``litellm.completion`` / ``litellm.acompletion`` (the functions every ``make_lm`` LM calls through)
while the block is open, outside the call counter: a replayed reply is counted as ``replayed``, not as a call.
DSPy's response cache is looked up first, as for any call.

A recorded reply stands in for a live one only as far as the model would give the same reply again. ``verify=N``
asks the model too for the first ``N`` prompts that have a recorded reply (in the order the run asks them) and
keeps the live reply for them; the block yields a :class:`ReplayCheck` that counts how many live replies were
identical to the recorded ones and lists the others.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from knapsack_dspy.errors import KnapsackDspyError
from knapsack_dspy.llm.call_counter import install_call_counter, note_replayed
from knapsack_dspy.llm.prompt_fingerprint import messages_sha256, reply_key

__all__ = ["REPLAY_CHECK_FILE", "NotRecordedError", "ReplayCheck", "active_check", "replaying", "replaying_now"]

#: Where a results directory keeps the check of its replayed replies (``kdspy bench --reuse DIR --verify N``).
REPLAY_CHECK_FILE = "replay_check.json"

_MARK = "_kdspy_replaying"
_lock = threading.Lock()
_state: dict[str, Any] = {"replies": None, "keyed": None, "only": False, "check": None}


@dataclass
class ReplayCheck:
    """Recorded replies checked against the model: ``wanted`` prompts to re-ask, ``asked`` so far, ``identical``
    of those, and each different one (``differences``: fingerprint, recorded text, live text)."""

    wanted: int = 0
    asked: int = 0
    identical: int = 0
    differences: list[dict] = field(default_factory=list)
    _pending: int = field(default=0, repr=False, compare=False)  # claimed, not yet answered
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def claim(self) -> bool:
        """One more prompt to re-ask? (Thread-safe; at most ``wanted`` in all.)"""
        with self._lock:
            if self.asked + self._pending >= self.wanted:
                return False
            self._pending += 1
            return True

    def record(self, sha: str, recorded: str, live: str | None) -> None:
        with self._lock:
            self._pending -= 1
            self.asked += 1
            if live == recorded:
                self.identical += 1
            else:
                self.differences.append({"prompt_sha256": sha, "recorded": recorded, "live": live})

    def release(self) -> None:  # a claimed call that failed: not a check
        with self._lock:
            self._pending -= 1

    @property
    def agreement(self) -> float | None:
        """The share of re-asked prompts whose live reply was the recorded one (None: none asked)."""
        return self.identical / self.asked if self.asked else None

    def summary(self) -> str:
        if not self.asked:
            return f"replay check: no recorded prompt was re-asked (wanted {self.wanted})"
        return (f"replay check: {self.identical} of {self.asked} re-asked prompts gave the recorded reply"
                + ("" if self.identical == self.asked else
                   f"; {self.asked - self.identical} differ: replayed rows do not stand in for live ones exactly "
                   "(compare arms on rows produced live in one run)"))

    def to_dict(self) -> dict:
        return {"wanted": self.wanted, "asked": self.asked, "identical": self.identical,
                "agreement": self.agreement, "differences": list(self.differences)}


class NotRecordedError(KnapsackDspyError, RuntimeError):
    """A replay without the model met a prompt no recorded reply answers."""


def _recorded(kwargs: Mapping) -> str | None:
    replies, keyed = _state["replies"], _state["keyed"]
    if replies is None:
        return None
    fingerprint = messages_sha256(kwargs.get("messages"))
    if keyed:
        text = keyed.get(reply_key(None, kwargs.get("model"), kwargs, fingerprint=fingerprint))
        if text is not None:
            return text
    return replies.get(fingerprint) if replies else None


def _response(text: str, model: str | None):
    import litellm

    response = litellm.ModelResponse(
        model=model or "replay", choices=[litellm.Choices(index=0, finish_reason="stop",
                                                          message=litellm.Message(role="assistant", content=text))])
    # usage is an extra field ModelResponse does not declare (litellm sets it so too)
    response.usage = litellm.Usage(prompt_tokens=0, completion_tokens=0, total_tokens=0)
    return response


def _refuse(kwargs: Mapping) -> None:
    if _state["only"] and _state["replies"] is not None:
        raise NotRecordedError(f"replay: no recorded reply for this prompt (sha256 "
                               f"{messages_sha256(kwargs.get('messages'))[:12]}...); the model is not called in a "
                               "replay")


def _live_text(response) -> str | None:
    try:
        return response.choices[0].message.content
    except (AttributeError, IndexError, KeyError, TypeError):
        return None


def _wrap_sync(fn):
    @functools.wraps(fn)
    def replayed(*args, **kwargs):
        text = _recorded(kwargs)
        check = _state["check"]
        if text is not None and check is not None and check.claim():
            try:
                response = fn(*args, **kwargs)
            except BaseException:
                check.release()
                raise
            check.record(messages_sha256(kwargs.get("messages")), text, _live_text(response))
            return response
        if text is not None:
            note_replayed()
            return _response(text, kwargs.get("model"))
        _refuse(kwargs)
        return fn(*args, **kwargs)

    setattr(replayed, _MARK, True)
    return replayed


def _wrap_async(fn):
    @functools.wraps(fn)
    async def replayed(*args, **kwargs):
        text = _recorded(kwargs)
        check = _state["check"]
        if text is not None and check is not None and check.claim():
            try:
                response = await fn(*args, **kwargs)
            except BaseException:
                check.release()
                raise
            check.record(messages_sha256(kwargs.get("messages")), text, _live_text(response))
            return response
        if text is not None:
            note_replayed()
            return _response(text, kwargs.get("model"))
        _refuse(kwargs)
        return await fn(*args, **kwargs)

    setattr(replayed, _MARK, True)
    return replayed


def _install() -> None:
    import litellm

    install_call_counter()  # first, so the replay sits outside the counter: a replayed reply is not a call
    if not getattr(litellm.completion, _MARK, False):
        litellm.completion = _wrap_sync(litellm.completion)
    if not getattr(litellm.acompletion, _MARK, False):
        litellm.acompletion = _wrap_async(litellm.acompletion)


def active_check() -> ReplayCheck | None:
    """The check of the open ``replaying(..., verify=N)`` block (None: no block, or no check asked for)."""
    return _state["check"]


def replaying_now() -> bool:
    """A ``replaying`` block is open (recorded replies answer prompts)."""
    return _state["replies"] is not None


@contextmanager
def replaying(replies: Mapping[str, str], *, only: bool = False, verify: int = 0,
              keyed: Mapping[str, str] | None = None) -> Iterator[ReplayCheck]:
    """Inside the block, LM calls whose reply key (``prompt_fingerprint.reply_key``: messages, model, weights,
    runtime, decoding settings) is a key of ``keyed``, or whose prompt fingerprint is a key of ``replies`` (replies
    recorded before reply keys), get that text as the reply; others call the model (``only=False``) or raise
    :class:`NotRecordedError` (``only=True``). ``verify``: the
    first ``verify`` calls with a recorded reply ask the model as well and keep its reply; the yielded
    :class:`ReplayCheck` compares them. Process-wide (the bench's worker threads see it); one block at a time."""
    if isinstance(verify, bool) or not isinstance(verify, int) or verify < 0:
        raise ValueError(f"verify must be a number of prompts >= 0, got {verify!r}")
    if verify and only:
        raise ValueError("verify asks the model: it cannot be combined with only=True")
    check = ReplayCheck(wanted=verify)
    with _lock:
        if _state["replies"] is not None:
            raise RuntimeError("replaying() blocks do not nest")
        _install()
        _state.update(replies=dict(replies), keyed=dict(keyed or {}), only=bool(only),
                      check=check if verify else None)
    try:
        yield check
    finally:
        with _lock:
            _state.update(replies=None, keyed=None, only=False, check=None)
