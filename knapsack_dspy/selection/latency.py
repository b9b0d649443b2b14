"""A latency model of one LM call, for selecting exemplars under a budget in seconds (opt-in).

On a server with a prompt cache (the embedded models' llama.cpp slot; providers' prefix caching) a call costs
``overhead + new prompt tokens / prefill rate + output tokens / decode rate``, where the new tokens are those
after the prefix the server already holds. Selection must not depend on what a server happened to process last
(the order questions are answered in, resuming, workers and replays would all change it), so the prefix counted
as held is only the *declared* shared prefix: what every prompt of the predictor opens with -- the system message
(and demos another optimizer fixed), plus a static set or a hybrid core, which open every prompt in one order
(``exemplar_pool.make_selection``). Everything else is priced as new.

Pure arithmetic (no DSPy, no model): the rates come from ``SelectionConfig.latency_rates`` or the table of
measured rates in ``knapsack_dspy.llm.latency_rates``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any

__all__ = ["LatencyModel"]


@dataclass(frozen=True)
class LatencyModel:
    """Seconds one call takes: ``overhead_s + new prompt tokens / prefill_tokens_per_s + output_tokens /
    decode_tokens_per_s`` (``output_tokens``: the completion length the prediction assumes)."""

    prefill_tokens_per_s: float
    decode_tokens_per_s: float
    overhead_s: float = 0.0
    output_tokens: int = 60

    def __post_init__(self):
        for name in ("prefill_tokens_per_s", "decode_tokens_per_s"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
                    or value <= 0:
                raise ValueError(f"latency rates: {name} must be a positive number, got {value!r}")
        for name in ("overhead_s", "output_tokens"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
                    or value < 0:
                raise ValueError(f"latency rates: {name} must be a non-negative number, got {value!r}")

    def seconds(self, new_prompt_tokens: float) -> float:
        """Predicted seconds of a call whose prompt has ``new_prompt_tokens`` after the declared shared prefix."""
        return (self.overhead_s + max(0.0, float(new_prompt_tokens)) / self.prefill_tokens_per_s
                + self.output_tokens / self.decode_tokens_per_s)

    def new_tokens_within(self, seconds: float) -> float:
        """The most new prompt tokens a call may have to take at most ``seconds`` (negative: not even the
        fixed part fits)."""
        return (float(seconds) - self.overhead_s - self.output_tokens / self.decode_tokens_per_s) \
            * self.prefill_tokens_per_s

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> LatencyModel:
        """The model ``to_dict`` (or a rates table entry) describes; keys it does not know are ignored only if
        they are the table's notes (``measured``, ``command``), otherwise an error names them."""
        if not isinstance(data, Mapping):
            raise ValueError(f"latency rates must be a mapping, got {type(data).__name__}")
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known - {"measured", "command"})
        if unknown:
            raise ValueError(f"latency rates: unknown keys {unknown}; valid: {sorted(known)}")
        missing = sorted(f.name for f in fields(cls)[:2] if f.name not in data)
        if missing:
            raise ValueError(f"latency rates: missing {missing}")
        return cls(**{k: v for k, v in data.items() if k in known})
