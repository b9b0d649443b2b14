"""``PromptTokenCalibration``: an estimated token count brought toward what a server reports, call by call.

A served model whose server counts nothing (Ollama, an API behind an OpenAI-compatible proxy, a server without
``/tokenize``) is counted with an estimate (tiktoken ``cl100k_base``). Every completed call to it reports the
prompt tokens the server really saw; the calibration keeps the running ratio of those to the estimates of the same
prompts (sums over the calls, so a long prompt weighs more than a short one) and scales later estimates by it,
rounded to two decimals (a count changes only when the ratio moves by 1 %). Before the first call the ratio is 1.

What that means for a selection: a count is calibrated with the ratio at the moment it is made, and counts are
memoised, so the pool's costs, measured when a program compiles (usually before any call), stay raw estimates,
while each query's own prompt is counted with the ratio of the calls before it. The selections of a run against
such a server depend on the order its calls came back (``token_count`` stays ``"estimate"`` in the rows).
"""

from __future__ import annotations

import threading
from collections.abc import Callable

__all__ = ["PromptTokenCalibration"]


class PromptTokenCalibration:
    """Running ratio of reported to estimated prompt tokens. ``estimate(messages) -> int`` is the raw estimate."""

    def __init__(self, estimate: Callable[[list[dict]], int]):
        self._estimate = estimate
        self._lock = threading.Lock()
        self.calls = 0
        self.reported = 0
        self.estimated = 0

    def observe(self, messages: list[dict], reported: int) -> None:
        """One completed call: its ``messages`` and the prompt tokens the server reported for them."""
        if not messages or not isinstance(reported, int) or isinstance(reported, bool) or reported <= 0:
            return
        estimated = int(self._estimate(list(messages)))
        if estimated <= 0:
            return
        with self._lock:
            self.calls += 1
            self.reported += reported
            self.estimated += estimated

    @property
    def ratio(self) -> float:
        """Reported / estimated prompt tokens over the calls so far, two decimals (1.0 before any call)."""
        with self._lock:
            if not self.estimated:
                return 1.0
            return round(self.reported / self.estimated, 2)

    def scale(self, count: int) -> int:
        """An estimate calibrated with the current ratio."""
        ratio = self.ratio
        return int(count) if ratio == 1.0 else round(int(count) * ratio)

    def summary(self) -> dict:
        with self._lock:
            return {"calls": self.calls, "reported": self.reported, "estimated": self.estimated}
