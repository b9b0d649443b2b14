"""Answering prompts from recorded replies: an earlier run's completions, matched by the prompt's fingerprint.

A results row keeps the fingerprint of every prompt it sent (``prompt_sha256``) and the text the model returned
(``completions``). ``with replaying(replies):`` answers every LM call whose messages have a recorded fingerprint
with the recorded text, without calling the model, and lets the others through to the model (or, with
``only=True``, fails them with :class:`NotRecordedError`). Everything after the LM -- the adapter's parsing,
program execution, the scale rule, scoring -- runs with today's code, so a new run shares an old run's LM work
exactly where its prompts are byte-identical (the same exemplars in the same order), and a change after the LM
can be measured on a run that cost LM hours.

It wraps ``litellm.completion`` / ``litellm.acompletion`` (the functions every ``make_lm`` LM calls through)
while the block is open, outside the call counter: a replayed reply is counted as ``replayed``, not as a call.
DSPy's response cache is looked up first, as for any call.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from knapsack_dspy.llm.call_counter import install_call_counter, note_replayed
from knapsack_dspy.llm.prompt_fingerprint import messages_sha256

__all__ = ["NotRecordedError", "replaying"]

_MARK = "_kdspy_replaying"
_lock = threading.Lock()
_state: dict[str, Any] = {"replies": None, "only": False}


class NotRecordedError(RuntimeError):
    """A replay without the model met a prompt no recorded reply answers."""


def _recorded(kwargs: Mapping) -> str | None:
    replies = _state["replies"]
    if replies is None:
        return None
    return replies.get(messages_sha256(kwargs.get("messages")))


def _response(text: str, model: str | None):
    import litellm

    response = litellm.ModelResponse(
        model=model or "replay", choices=[litellm.Choices(index=0, finish_reason="stop",
                                                          message=litellm.Message(role="assistant", content=text))])
    response.usage = litellm.Usage(prompt_tokens=0, completion_tokens=0, total_tokens=0)
    return response


def _refuse(kwargs: Mapping) -> None:
    if _state["only"] and _state["replies"] is not None:
        raise NotRecordedError(f"replay: no recorded reply for this prompt (sha256 "
                               f"{messages_sha256(kwargs.get('messages'))[:12]}...); the model is not called in a "
                               "replay")


def _wrap_sync(fn):
    @functools.wraps(fn)
    def replayed(*args, **kwargs):
        text = _recorded(kwargs)
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


@contextmanager
def replaying(replies: Mapping[str, str], *, only: bool = False) -> Iterator[None]:
    """Inside the block, LM calls whose prompt fingerprint is a key of ``replies`` get that text as the reply;
    others call the model (``only=False``) or raise :class:`NotRecordedError` (``only=True``). Process-wide (the
    bench's worker threads see it); one block at a time."""
    with _lock:
        if _state["replies"] is not None:
            raise RuntimeError("replaying() blocks do not nest")
        _install()
        _state.update(replies=dict(replies), only=bool(only))
    try:
        yield
    finally:
        with _lock:
            _state.update(replies=None, only=False)
