"""``UsageLedger``: what a run cost, summed per prediction (safe under threaded evaluation).

DSPy's ``with dspy.track_usage()`` around a threaded ``dspy.Evaluate`` comes back empty (worker threads get
their own copy of the tracker), so the ledger is fed one prediction at a time instead:

    ledger = UsageLedger()
    metered = ledger.wrap(program)              # or: pred = ledger.call(program, question=...)
    dspy.Evaluate(devset=dev, metric=m, num_threads=4)(metered)
    ledger.summary()  # {"predictions": 50, "lm_calls": 50, "cache_hits": 0, "prompt_tokens": ..., ...}

``call``/``wrap`` run the program inside a fresh ``dspy.track_usage()`` (token usage of this prediction, as
``prediction.get_lm_usage()`` reports it with ``dspy.configure(track_usage=True)``) and a per-thread
``counting_calls()`` scope (real LM calls, failed attempts, cache hits, cost), and time it. ``record`` adds a
prediction produced elsewhere (tokens from ``prediction.get_lm_usage()``).
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any

import dspy

from knapsack_dspy.llm.call_counter import (
    CallCounts,
    cache_hit_count,
    call_counts,
    counting_calls,
    install_call_counter,
    real_call_count,
)

__all__ = ["UsageLedger", "UsageTotals", "cache_hit_count", "call_counts", "real_call_count"]


@dataclass
class UsageTotals:
    """Totals over the recorded predictions. ``lm_calls``/``cache_hits``/``failures``/``cost`` are known only
    for predictions run through ``call``/``wrap`` (or recorded with ``counts``)."""

    predictions: int = 0
    errors: int = 0
    lm_calls: int = 0
    cache_hits: int = 0
    failures: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float = 0.0
    seconds: float = 0.0
    by_model: dict[str, dict[str, int]] = field(default_factory=dict)

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def as_dict(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "by_model"}
        out["total_tokens"] = self.total_tokens
        out["cost"] = round(self.cost, 6)
        out["seconds"] = round(self.seconds, 3)
        out["by_model"] = {m: dict(v) for m, v in self.by_model.items()}
        return out


def _int(value: Any) -> int:
    try:
        return int(value or 0)
    except (TypeError, ValueError):
        return 0


def usage_by_model(prediction: Any) -> dict[str, dict[str, int]]:
    """``prediction.get_lm_usage()`` reduced to ``{model: {"prompt_tokens", "completion_tokens"}}``."""
    getter = getattr(prediction, "get_lm_usage", None)
    usage = getter() if callable(getter) else None
    out: dict[str, dict[str, int]] = {}
    for model, entry in (usage or {}).items():
        if isinstance(entry, dict):
            out[str(model)] = {"prompt_tokens": _int(entry.get("prompt_tokens")),
                               "completion_tokens": _int(entry.get("completion_tokens"))}
    return out


class UsageLedger:
    """Thread-safe accumulator of per-prediction LM usage (see the module docstring)."""

    def __init__(self):
        self._lock = threading.Lock()
        self._totals = UsageTotals()

    # -- feeding ---------------------------------------------------------------------------------------
    def record(self, prediction: Any = None, *, seconds: float = 0.0, counts: CallCounts | None = None,
               usage: dict[str, dict[str, int]] | None = None, error: bool = False) -> None:
        """Add one prediction. ``usage`` defaults to ``prediction.get_lm_usage()``; when neither gives token
        counts, ``counts``' tokens (from the LiteLLM responses) are used."""
        by_model = usage if usage is not None else usage_by_model(prediction)
        with self._lock:
            t = self._totals
            t.predictions += 1
            t.errors += int(bool(error))
            t.seconds += float(seconds or 0.0)
            if counts is not None:
                t.lm_calls += counts.calls
                t.cache_hits += counts.cache_hits
                t.failures += counts.failures
                t.cost += counts.cost
            if by_model:
                for model, entry in by_model.items():
                    slot = t.by_model.setdefault(model, {"prompt_tokens": 0, "completion_tokens": 0})
                    for key in ("prompt_tokens", "completion_tokens"):
                        slot[key] += _int(entry.get(key))
                        setattr(t, key, getattr(t, key) + _int(entry.get(key)))
            elif counts is not None:
                t.prompt_tokens += counts.prompt_tokens
                t.completion_tokens += counts.completion_tokens

    def call(self, program: Callable, *args: Any, **kwargs: Any) -> Any:
        """Run ``program(*args, **kwargs)`` and record what it cost. Exceptions are recorded and re-raised."""
        install_call_counter()
        started = time.perf_counter()
        prediction = None
        error = False
        with counting_calls() as counts, dspy.track_usage() as tracker:
            try:
                prediction = program(*args, **kwargs)
            except BaseException:
                error = True
                raise
            finally:
                usage = {model: {"prompt_tokens": _int(entry.get("prompt_tokens")),
                                 "completion_tokens": _int(entry.get("completion_tokens"))}
                         for model, entry in tracker.get_total_tokens().items()}
                self.record(prediction, seconds=time.perf_counter() - started, counts=counts,
                            usage=usage, error=error)
        return prediction

    def wrap(self, program: Callable) -> Callable:
        """A callable that runs ``program`` through ``call`` (hand it to ``dspy.Evaluate``)."""

        @functools.wraps(program)
        def metered(*args, **kwargs):
            return self.call(program, *args, **kwargs)

        return metered

    # -- reading ---------------------------------------------------------------------------------------
    def totals(self) -> UsageTotals:
        with self._lock:
            t = self._totals
            return UsageTotals(**{f.name: getattr(t, f.name) for f in fields(t) if f.name != "by_model"},
                               by_model={m: dict(v) for m, v in t.by_model.items()})

    def summary(self) -> dict[str, Any]:
        """JSON-friendly totals (what a report prints)."""
        return self.totals().as_dict()

    def merge(self, other: UsageLedger) -> None:
        theirs = other.totals()
        with self._lock:
            t = self._totals
            for f in fields(t):
                if f.name != "by_model":
                    setattr(t, f.name, getattr(t, f.name) + getattr(theirs, f.name))
            for model, entry in theirs.by_model.items():
                slot = t.by_model.setdefault(model, {"prompt_tokens": 0, "completion_tokens": 0})
                for key, value in entry.items():
                    slot[key] = slot.get(key, 0) + value

    def reset(self) -> None:
        with self._lock:
            self._totals = UsageTotals()
