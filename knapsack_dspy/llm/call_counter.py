"""Count the LM calls that really happen (as opposed to answers served from DSPy's cache).

Two taps, both installed idempotently:

- ``install_call_counter()`` wraps ``litellm.completion`` / ``litellm.acompletion`` (every ``make_lm`` LM calls
  through them, DSPy looks them up on the module at call time). A call that returns is a *real call*; one that
  raises is a *failed attempt* (DSPy retries it). A reply with an empty ``choices`` list is turned into a
  failed attempt here (``empty_reply.check_reply``), so it is retried and never cached. Nested calls
  (LiteLLM's own retry helpers re-entering ``completion``) are counted once, at the outermost level. Token
  usage and LiteLLM's ``response_cost`` of real calls are summed too, with the prompt tokens a provider's
  prompt cache served (``usage.prompt_tokens_details.cached_tokens``: OpenAI, LiteLLM's Anthropic mapping,
  llama.cpp; Anthropic's own ``cache_read_input_tokens`` when the details are missing), the tokens an
  Anthropic cache breakpoint wrote (``cache_creation_input_tokens``) and, for the embedded models, llama.cpp's
  prefill / decode time (``_hidden_params["timings"]``, set by ``local_provider``).
- ``install_cache_hit_counter()`` wraps the ``get`` of DSPy's response cache object (``dspy.cache``) and counts
  the LM requests it answers (requests whose cache key names a DSPy LM function).

Counts are kept process-wide (``call_counts()`` / ``real_call_count()``; take a snapshot before and subtract
after, which covers every thread) and, inside ``with counting_calls() as counts:``, for the current thread /
asyncio task only (what one prediction cost under a threaded ``dspy.Evaluate``).

Each completed call can also be observed whole, its request's keyword arguments (model, messages, api_base, ...)
with its response: by a listener of every call of the process (``add_call_listener``: a served model's token
calibration, ``token_calibration``) or, inside ``with observing_calls(observer):``, by an observer of the current
thread / task's calls (a bench row's per-call token counts). Observers run in the calling thread after the call
is counted; one that raises is logged and ignored.

Calls made through DSPy's native (non-LiteLLM) engine are not seen: ``make_lm`` always selects LiteLLM.
"""

from __future__ import annotations

import contextvars
import functools
import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, fields
from typing import Any

import dspy

from knapsack_dspy.llm.empty_reply import check_reply

logger = logging.getLogger(__name__)


@dataclass
class CallCounts:
    """Tallies of LM traffic. ``calls``: completed provider calls; ``failures``: attempts that raised;
    ``cache_hits``: LM requests answered by DSPy's cache; tokens and cost of the completed calls;
    ``cached_prompt_tokens``: their prompt tokens the provider's prompt cache served (KV reuse);
    ``cache_write_tokens``: prompt tokens written to a provider cache (Anthropic breakpoints);
    ``timed_calls``: calls that reported their timings, ``prefill_seconds`` / ``decode_seconds`` their sums;
    ``replayed``: LM calls answered from recorded replies (``recorded_replies``), not counted as calls."""

    calls: int = 0
    failures: int = 0
    cache_hits: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float = 0.0
    cached_prompt_tokens: int = 0
    cache_write_tokens: int = 0
    timed_calls: int = 0
    prefill_seconds: float = 0.0
    decode_seconds: float = 0.0
    replayed: int = 0

    def __sub__(self, other: CallCounts) -> CallCounts:
        return CallCounts(**{f.name: getattr(self, f.name) - getattr(other, f.name) for f in fields(self)})

    def __add__(self, other: CallCounts) -> CallCounts:
        return CallCounts(**{f.name: getattr(self, f.name) + getattr(other, f.name) for f in fields(self)})

    def copy(self) -> CallCounts:
        return CallCounts(**{f.name: getattr(self, f.name) for f in fields(self)})

    def as_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


_lock = threading.Lock()
_totals = CallCounts()
_scopes: contextvars.ContextVar[tuple[CallCounts, ...]] = contextvars.ContextVar("kdspy_call_scopes", default=())
_inside_call: contextvars.ContextVar[bool] = contextvars.ContextVar("kdspy_inside_llm_call", default=False)
_install_lock = threading.Lock()
_MARK = "_kdspy_counted"


def _add(**deltas: Any) -> None:
    targets = (_totals, *_scopes.get())
    with _lock:
        for target in targets:
            for name, delta in deltas.items():
                setattr(target, name, getattr(target, name) + delta)


def _field(obj: Any, key: str) -> Any:
    """``obj[key]`` of a dict, else the attribute (LiteLLM's usage objects); None when absent."""
    if obj is None:
        return None
    return obj.get(key) if isinstance(obj, dict) else getattr(obj, key, None)


def _count(value: Any) -> int:
    try:
        return max(0, int(value or 0))
    except (TypeError, ValueError):
        return 0


def _seconds(milliseconds: Any) -> float:
    try:
        return max(0.0, float(milliseconds or 0.0)) / 1000.0
    except (TypeError, ValueError):
        return 0.0


def usage_deltas(response: Any) -> dict[str, Any]:
    """What one completed call adds to ``CallCounts`` (its usage, cost, prompt-cache use and timings)."""
    usage = _field(response, "usage")
    hidden = getattr(response, "_hidden_params", None) or {}
    hidden = hidden if isinstance(hidden, dict) else {}
    cached = _field(_field(usage, "prompt_tokens_details"), "cached_tokens")
    if cached is None:  # Anthropic's own name (LiteLLM usually maps it into the details too)
        cached = _field(usage, "cache_read_input_tokens")
    deltas = {"calls": 1, "prompt_tokens": _count(_field(usage, "prompt_tokens")),
              "completion_tokens": _count(_field(usage, "completion_tokens")),
              "cost": float(hidden.get("response_cost") or 0.0), "cached_prompt_tokens": _count(cached),
              "cache_write_tokens": _count(_field(usage, "cache_creation_input_tokens"))}
    timings = hidden.get("timings")
    if isinstance(timings, dict):
        deltas.update(timed_calls=1, prefill_seconds=_seconds(timings.get("prompt_ms")),
                      decode_seconds=_seconds(timings.get("predicted_ms")))
    return deltas


def note_replayed() -> None:
    """One LM call answered from a recorded reply (``recorded_replies``): no provider call."""
    _add(replayed=1)


#: ``observer(request_kwargs, response)``: told of one completed call (see the module docstring)
CallObserver = Callable[[dict, Any], None]
_listeners: list[CallObserver] = []
_observers: contextvars.ContextVar[tuple[CallObserver, ...]] = contextvars.ContextVar("kdspy_call_observers",
                                                                                     default=())


def add_call_listener(listener: CallObserver) -> None:
    """Tell ``listener`` of every completed call of the process from now on (idempotent per listener)."""
    with _lock:
        if listener not in _listeners:
            _listeners.append(listener)


def remove_call_listener(listener: CallObserver) -> None:
    with _lock:
        if listener in _listeners:
            _listeners.remove(listener)


@contextmanager
def observing_calls(observer: CallObserver) -> Iterator[CallObserver]:
    """Tell ``observer`` of every call the current thread / asyncio task completes inside the block (nestable)."""
    token = _observers.set((*_observers.get(), observer))
    try:
        yield observer
    finally:
        _observers.reset(token)


def _tell_observers(kwargs: dict, response: Any) -> None:
    with _lock:
        listeners = list(_listeners)
    for observer in (*listeners, *_observers.get()):
        try:
            observer(kwargs, response)
        except Exception:
            logger.warning("an LM call observer failed", exc_info=True)


def _record_success(response: Any, kwargs: dict | None = None) -> None:
    _add(**usage_deltas(response))
    if kwargs is not None:
        _tell_observers(kwargs, response)


def _wrap_sync(fn):
    @functools.wraps(fn)
    def counted(*args, **kwargs):
        if _inside_call.get():
            return fn(*args, **kwargs)
        token = _inside_call.set(True)
        try:
            response = fn(*args, **kwargs)
            check_reply(response, kwargs.get("model"))
        except BaseException:
            _add(failures=1)
            raise
        finally:
            _inside_call.reset(token)
        _record_success(response, kwargs)
        return response

    setattr(counted, _MARK, True)
    return counted


def _wrap_async(fn):
    @functools.wraps(fn)
    async def counted(*args, **kwargs):
        if _inside_call.get():
            return await fn(*args, **kwargs)
        token = _inside_call.set(True)
        try:
            response = await fn(*args, **kwargs)
            check_reply(response, kwargs.get("model"))
        except BaseException:
            _add(failures=1)
            raise
        finally:
            _inside_call.reset(token)
        _record_success(response, kwargs)
        return response

    setattr(counted, _MARK, True)
    return counted


def install_call_counter() -> None:
    """Wrap ``litellm.completion`` and ``litellm.acompletion`` (once per process; imports LiteLLM, which reading
    the counts does not need)."""
    import litellm

    with _install_lock:
        if not getattr(litellm.completion, _MARK, False):
            litellm.completion = _wrap_sync(litellm.completion)
        if not getattr(litellm.acompletion, _MARK, False):
            litellm.acompletion = _wrap_async(litellm.acompletion)


def _is_lm_request(request: Any) -> bool:
    return isinstance(request, dict) and str(request.get("_fn_identifier", "")).startswith("dspy.clients.")


def install_cache_hit_counter(cache: Any = None) -> None:
    """Count hits of DSPy's response cache (``dspy.cache`` unless given). Idempotent per cache object."""
    if cache is None:
        cache = dspy.cache
    with _install_lock:
        if getattr(cache.get, _MARK, False):
            return
        original = cache.get

        @functools.wraps(original)
        def counted_get(request, *args, **kwargs):
            value = original(request, *args, **kwargs)
            if value is not None and _is_lm_request(request):
                _add(cache_hits=1)
            return value

        setattr(counted_get, _MARK, True)
        cache.get = counted_get


def call_counts() -> CallCounts:
    """A snapshot of the process-wide counts (all threads)."""
    with _lock:
        return _totals.copy()


def real_call_count() -> int:
    """Completed LM calls that reached a provider (cache hits excluded), process-wide."""
    with _lock:
        return _totals.calls


def cache_hit_count() -> int:
    """LM requests answered by DSPy's response cache, process-wide."""
    with _lock:
        return _totals.cache_hits


@contextmanager
def counting_calls() -> Iterator[CallCounts]:
    """Count the calls made by the current thread / asyncio task inside the block (nestable)."""
    counts = CallCounts()
    token = _scopes.set((*_scopes.get(), counts))
    try:
        yield counts
    finally:
        _scopes.reset(token)
