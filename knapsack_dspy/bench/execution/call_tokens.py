"""Each LM call's prompt tokens two ways, for a results row: as its provider reported them, and as the run's own
token counter counts the call's messages (what the run's budgets are checked with).

:class:`CallTokens` observes the calls one example makes (``llm.call_counter.observing_calls``): each completed
provider call's messages and its ``usage.prompt_tokens``. A row lists them in the order of its prompt fingerprints
(``prompt_sha256``; a call is matched to its fingerprint by its messages), beside the counter's count of the same
messages: ``reported_prompt_tokens`` and ``counted_prompt_tokens``. A call no provider answered (a DSPy cache hit,
a replayed reply, a failed call) has None in both. The two agree exactly when the counter is the model's own
tokenizer with its chat template (an embedded model, a served model whose server counts); the report shows how far
they do (``bench.reporting.token_agreement``).
"""

from __future__ import annotations

import threading
from collections import defaultdict, deque
from typing import Any

from knapsack_dspy.llm import get_token_counter
from knapsack_dspy.llm.prompt_fingerprint import messages_sha256
from knapsack_dspy.modules.selecting_predict import SelectingPredict

__all__ = ["CallTokens", "run_token_counter"]


def _prompt_tokens(response: Any) -> int | None:
    usage = response.get("usage") if isinstance(response, dict) else getattr(response, "usage", None)
    value = usage.get("prompt_tokens") if isinstance(usage, dict) else getattr(usage, "prompt_tokens", None)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def run_token_counter(program, lm):
    """The counter a run's budgets are checked with: its program's first selecting predictor's, else the LM's model's
    (at the LM's server); None when there is neither."""
    try:
        for _, predictor in program.named_predictors():
            if isinstance(predictor, SelectingPredict):
                return predictor.token_counter
    except Exception:  # noqa: BLE001 - a predictor without a counter (not compiled): the LM's model counts
        pass
    model = getattr(lm, "model", None)
    if not isinstance(model, str) or not model:
        return None
    try:
        return get_token_counter(model, api_base=(getattr(lm, "kwargs", None) or {}).get("api_base"))
    except Exception:  # noqa: BLE001 - bookkeeping: no counter, no counts
        return None


class CallTokens:
    """An observer of one example's LM calls (``observing_calls(CallTokens())``); see the module docstring."""

    def __init__(self):
        self._reported: dict[str, deque[int | None]] = defaultdict(deque)
        self._messages: dict[str, list[dict]] = {}
        self._lock = threading.Lock()

    def __call__(self, request: dict, response: Any) -> None:
        messages = request.get("messages")
        if messages is None:
            return
        fingerprint = messages_sha256(messages)
        with self._lock:
            self._reported[fingerprint].append(_prompt_tokens(response))
            self._messages.setdefault(fingerprint, list(messages))

    def row_fields(self, fingerprints: list[str], counter) -> dict:
        """``reported_prompt_tokens`` and ``counted_prompt_tokens`` in the order of ``fingerprints`` (the row's
        ``prompt_sha256``); nothing when no call reached a provider."""
        reported: list[int | None] = []
        counted: list[int | None] = []
        with self._lock:
            queues = {key: deque(values) for key, values in self._reported.items()}
        for fingerprint in fingerprints:
            queue = queues.get(fingerprint)
            value = queue.popleft() if queue else None
            reported.append(value)
            counted.append(None if value is None else self._count(counter, self._messages.get(fingerprint)))
        if all(value is None for value in reported):
            return {}
        return {"reported_prompt_tokens": reported, "counted_prompt_tokens": counted}

    @staticmethod
    def _count(counter, messages) -> int | None:
        if counter is None or messages is None:
            return None
        try:
            return int(counter.count_messages(messages))
        except Exception:  # noqa: BLE001 - a count that fails (a server gone since the call) is left out
            return None
