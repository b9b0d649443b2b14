"""Measured prefill / decode rates of the embedded models: what a latency budget (``SelectionConfig.latency_budget``)
prices a prompt with, and what bench rows' ``predicted_latency_s`` is computed from.

One entry per model: ``prefill_tokens_per_s`` (new prompt tokens, after the prefix the server's prompt cache holds),
``decode_tokens_per_s``, ``overhead_s`` (a call's fixed cost: the prefill time's intercept and the rest of the
call) and ``output_tokens`` (the completion a prediction assumes: the median program-of-thought reply of the
recorded 1.5B runs is 53-57 tokens). ``measured`` says where the numbers come from and ``command`` how to measure
them again (``benchmarks/latency_rates.py`` prints an entry in this form); re-measure on the machine you run on
and pass the entry as ``SelectionConfig(latency_rates={...})`` (a suite: ``latency_rates = {...}``; ``kdspy
compile``: ``--latency-rates``) -- they are a property of the machine as much as of the model. Models without an
entry (API models) need ``latency_rates`` to use a latency budget.
"""

from __future__ import annotations

__all__ = ["MEASURED_RATES", "latency_rates"]

_COMMAND = "python benchmarks/latency_rates.py --model {model} (on an idle machine)"

MEASURED_RATES: dict[str, dict] = {
    "local/qwen2.5-coder-1.5b-instruct": {
        "prefill_tokens_per_s": 65.0, "decode_tokens_per_s": 21.4, "overhead_s": 0.3, "output_tokens": 60,
        "measured": "2026-11-26, 2 idle cores, GOMP_SPINCOUNT=1000 OMP_WAIT_POLICY=ACTIVE, 2 decode threads (beside "
                    "one busy-loop process: prefill 33.8, decode 13.7 tok/s with 1 decode thread); 2026-11-23 on the "
                    "same machine with passive waits: 76.8 / 18.5 (the machine's own speed varies between days)",
        "command": _COMMAND.format(model="local/qwen2.5-coder-1.5b-instruct"),
    },
    "local/qwen2.5-coder-0.5b-instruct": {
        "prefill_tokens_per_s": 76.0, "decode_tokens_per_s": 13.0, "overhead_s": 0.5, "output_tokens": 60,
        "measured": "docs/llm.md's local_benchmark runs (2 cores: prefill 76-137 tok/s at load avg ~2, decode "
                    "13-15 tok/s beside a busy-loop with passive waits: the low ends); to measure again",
        "command": _COMMAND.format(model="local/qwen2.5-coder-0.5b-instruct"),
    },
}


def latency_rates(model: str | None) -> dict | None:
    """The measured rates of ``model`` (None for models without an entry)."""
    entry = MEASURED_RATES.get(str(model or ""))
    return dict(entry) if entry is not None else None
