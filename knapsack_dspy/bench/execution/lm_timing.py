"""How long one example spent inside LM calls (``lm_seconds`` in its results row).

A row's ``latency_s`` covers everything the example did: retrieval, selection, the LM calls, running the program
and scoring it. Splitting it (the report's "time per question: LM / selection / other") needs the LM part on
its own: :class:`LMTimer` is a DSPy callback that adds up the wall-clock time between the start and the end of
every LM call made while it is installed (``dspy.context(callbacks=[..., timer])``), failed calls and answers
served from the LM cache included.
"""

from __future__ import annotations

import threading
import time

from dspy.utils.callback import BaseCallback

__all__ = ["LMTimer"]


class LMTimer(BaseCallback):
    """Seconds spent inside the LM calls made while it is active (``seconds``)."""

    def __init__(self):
        self.seconds = 0.0
        self._started: dict[str, float] = {}
        self._lock = threading.Lock()

    def on_lm_start(self, call_id, instance, inputs):
        with self._lock:
            self._started[call_id] = time.perf_counter()

    def on_lm_end(self, call_id, outputs, exception=None):
        with self._lock:
            started = self._started.pop(call_id, None)
            if started is not None:
                self.seconds += time.perf_counter() - started

    def row_fields(self) -> dict:
        return {"lm_seconds": round(self.seconds, 3)}
