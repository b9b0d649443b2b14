"""The server's bounded queue: at most ``max_queue`` requests admitted at once (answering or waiting for a
turn); one more is turned away at once (HTTP 429) with a ``Retry-After`` estimated from recent latencies.

The embedded model answers one call at a time (20-50 s each on 2 cores): without a bound, requests would pile
up until clients time out, each still costing a full LM call when its turn comes. Admission is decided on the
event loop's thread (no ``await`` between the check and the count), so it needs no lock there; ``leave`` may
be called from any thread.
"""

from __future__ import annotations

import math
import threading

__all__ = ["Admission"]

_SMOOTHING = 0.2  # weight of the newest latency in the moving average


class Admission:
    """``max_queue`` requests in at once; ``concurrency`` of them are answered at a time (the rest wait)."""

    def __init__(self, max_queue: int, concurrency: int, first_latency_s: float = 1.0):
        if max_queue < 1 or concurrency < 1:
            raise ValueError(f"max_queue and concurrency must be at least 1, got {max_queue} and {concurrency}")
        self.max_queue = max_queue
        self.concurrency = concurrency
        self.admitted = 0
        self.turned_away = 0
        self.answered = 0
        self._latency = float(first_latency_s)
        self._lock = threading.Lock()

    def enter(self) -> bool:
        """Admit one request (True) or turn it away (False: the queue is full)."""
        with self._lock:
            if self.admitted >= self.max_queue:
                self.turned_away += 1
                return False
            self.admitted += 1
            return True

    def leave(self, latency_s: float | None = None) -> None:
        """An admitted request is done (``latency_s``: how long its answer took, None if it was not answered)."""
        with self._lock:
            self.admitted -= 1
            if latency_s is not None:
                self.answered += 1
                self._latency += _SMOOTHING * (latency_s - self._latency)

    def retry_after_s(self) -> int:
        """Whole seconds until a place is likely free: the queue ahead, answered ``concurrency`` at a time."""
        with self._lock:
            rounds = max(1, math.ceil(self.admitted / self.concurrency))
            return max(1, math.ceil(rounds * self._latency))

    def snapshot(self) -> dict:
        with self._lock:
            return {"admitted": self.admitted, "max_queue": self.max_queue, "concurrency": self.concurrency,
                    "answered": self.answered, "turned_away": self.turned_away,
                    "mean_latency_s": round(self._latency, 3)}
