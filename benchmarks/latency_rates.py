"""Measure an embedded model's prefill and decode rates with its prompt cache in use: the latency model's rates.

Every call shares one system message (``--prefix`` tokens, cached by llama.cpp's slot after the first call) and
sends a new user message of N tokens (``--new``, varied so nothing after the system message is reused), then
generates ``--max-tokens`` tokens (end-of-sequence ignored). llama.cpp's own timings give prefill milliseconds
per new token (a straight-line fit of prefill time on the tokens processed: its slope is the rate, its
intercept part of the overhead) and decode tokens per second; the overhead is what a call's wall time adds to
both. Prints the entry for ``knapsack_dspy/llm/latency_rates.py`` (with the load average: measure on an idle
machine). ``--busy`` runs one busy-loop process beside the measurement (the loaded rates); with
``OMP_WAIT_POLICY=ACTIVE`` in the environment the runtime spins at its barriers as before the passive-waits fix
(docs/llm.md, "Threads"):

    python benchmarks/latency_rates.py --model local/qwen2.5-coder-1.5b-instruct [--repeats 3] [--busy]
    OMP_WAIT_POLICY=ACTIVE python benchmarks/latency_rates.py --model local/qwen2.5-coder-1.5b-instruct --busy
    python benchmarks/latency_rates.py --model local/qwen2.5-coder-0.5b-instruct --new 64,256,512 --repeats 1

About 2 + repeats x len(new) calls: ~3 min for the 1.5B with the defaults on 2 idle cores.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import knapsack_dspy  # noqa: F401  # isort: skip  (first: LiteLLM then loads with its bundled model map, _env.py)
import numpy as np

from knapsack_dspy.llm.local_server import get_local_server
from knapsack_dspy.testing.busy_loop import busy_loop
from knapsack_dspy.testing.json_result import print_and_save


def _text(server, tokens: int, offset: int) -> str:
    """Table-like text of about ``tokens`` tokens; ``offset`` makes it differ from the start."""
    lines: list[str] = []
    row = 0
    while True:
        year = 1900 + (offset * 37 + row) % 120
        revenue, cost = 4100 + 37 * (row + offset), 2900 + 23 * row
        lines.append(f"| {year} | revenue {revenue:,} | cost {cost:,} | item {offset}-{row} |")
        row += 1
        if row % 8 == 0 and len(server.tokenize("\n".join(lines))) >= tokens:
            return "\n".join(lines)


def measure(model: str, prefix: int, new: list[int], repeats: int, max_tokens: int) -> dict:
    server = get_local_server(model)
    system = {"role": "system", "content": "You read financial tables.\n" + _text(server, prefix, 0)}
    calls = []

    def call(tokens: int, offset: int) -> dict:
        messages = [system, {"role": "user", "content": _text(server, tokens, offset) + "\nSummarise the rows."}]
        started = time.perf_counter()
        result = server.chat({"messages": messages, "max_tokens": max_tokens, "temperature": 0.0,
                              "ignore_eos": True})
        wall = time.perf_counter() - started
        if "error" in result:
            raise RuntimeError(f"completion failed: {result['error']}")
        timings = result.get("timings") or {}
        return {"wall_s": wall, **{k: float(timings.get(k) or 0) for k in
                                   ("cache_n", "prompt_n", "prompt_ms", "predicted_n", "predicted_ms")}}

    call(new[0], 10_000)  # the system message into the slot
    for repeat in range(repeats):
        for k, tokens in enumerate(new):  # sizes interleaved, each with text no earlier call had
            calls.append(call(tokens, 1 + repeat * len(new) + k))
    prompt_n = np.array([c["prompt_n"] for c in calls])
    prompt_ms = np.array([c["prompt_ms"] for c in calls])
    slope, intercept = np.polyfit(prompt_n, prompt_ms, 1) if len(set(prompt_n)) > 1 else (prompt_ms.mean()
                                                                                           / prompt_n.mean(), 0.0)
    prefill = 1000.0 / slope
    decode = 1000.0 * sum(c["predicted_n"] for c in calls) / sum(c["predicted_ms"] for c in calls)
    overhead = float(np.mean([c["wall_s"] - c["prompt_n"] / prefill - c["predicted_ms"] / 1000 for c in calls]))
    return {
        "model": model,
        "entry": {"prefill_tokens_per_s": round(prefill, 1), "decode_tokens_per_s": round(decode, 1),
                  "overhead_s": round(max(0.0, overhead), 2), "output_tokens": 60,
                  "measured": f"{time.strftime('%Y-%m-%d')}, {os.cpu_count()} cores, load average "
                              f"{os.getloadavg()[0]:.1f}, OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY', '')} "
                              f"GOMP_SPINCOUNT={os.environ.get('GOMP_SPINCOUNT', '')}, {server.n_threads} decode / "
                              f"{server.n_batch_threads} prompt threads",
                  "command": " ".join(["python", "benchmarks/latency_rates.py", *sys.argv[1:]])},
        "prefill_intercept_ms": round(float(intercept), 1),
        "mean_cached_tokens": round(float(np.mean([c["cache_n"] for c in calls])), 1),
        "calls": [{k: round(v, 3) for k, v in c.items()} for c in calls],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="local/qwen2.5-coder-1.5b-instruct")
    parser.add_argument("--prefix", type=int, default=600, help="tokens of the shared system message")
    parser.add_argument("--new", default="64,256,512,1024", help="new prompt tokens per call (comma-separated)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--busy", action="store_true", help="one busy-loop process beside the measurement")
    parser.add_argument("--json", help="also write the result here")
    args = parser.parse_args(argv)
    new = [int(x) for x in args.new.split(",") if x.strip()]
    if not new or min(new) < 1 or args.repeats < 1:
        parser.error("--new needs positive token counts and --repeats at least 1")
    with busy_loop(args.busy):
        result = measure(args.model, args.prefix, new, args.repeats, args.max_tokens)
    result["entry"]["measured"] += ", beside one busy-loop process" if args.busy else ""
    print_and_save(result, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
