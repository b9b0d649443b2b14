"""Measure the embedded model: weight joining, load time, prompt (prefill) and generation speed.

    python -m knapsack_dspy.llm.local_benchmark --model local/qwen2.5-coder-0.5b-instruct

Joining is measured into a fresh temporary cache (the parts are read and hashed, the GGUF written and
renamed), then the fast path (already verified: no hashing). Speed comes from llama.cpp's own timings of one
completion: a prompt of about ``--prompt-tokens`` tokens (a synthetic financial table) and ``--max-tokens`` new
tokens (end-of-sequence ignored so the count is reached). Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

from knapsack_dspy.llm.errors import LLMError
from knapsack_dspy.llm.local_models import local_model_spec, local_n_ctx
from knapsack_dspy.llm.local_server import LocalServer, _default_batch_threads, _default_threads
from knapsack_dspy.llm.local_weights import ensure_local_weights


def _synthetic_prompt(server, target_tokens: int) -> list[dict]:
    rows = [f"| {2000 + i} | revenue {4100 + 37 * i:,} | cost {2900 + 23 * i:,} | margin {12 + i % 7}.{i % 10}% |"
            for i in range(400)]
    lines: list[str] = []
    for row in rows:
        lines.append(row)
        if len(lines) % 10 == 0 and len(server.tokenize("\n".join(lines))) >= target_tokens - 40:
            break
    question = "Describe the trend of the margin column year by year, in full sentences."
    return [{"role": "system", "content": "You analyse financial tables."},
            {"role": "user", "content": "\n".join(lines) + "\n\n" + question}]


def measure(model: str, prompt_tokens: int = 1500, max_tokens: int = 128, cache_dir: str | None = None,
            measure_join: bool = True) -> dict:
    spec = local_model_spec(model)
    report: dict = {"model": spec.model, "size_bytes": spec.size}
    if measure_join:
        scratch = Path(tempfile.mkdtemp(prefix="kdspy-join-"))
        try:
            started = time.perf_counter()
            ensure_local_weights(spec, scratch)
            report["join_and_verify_seconds"] = round(time.perf_counter() - started, 2)
            started = time.perf_counter()
            ensure_local_weights(spec, scratch)
            report["verified_fast_path_ms"] = round((time.perf_counter() - started) * 1000, 2)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
    path = ensure_local_weights(spec, cache_dir)
    server = LocalServer(spec, path, n_ctx=max(local_n_ctx(), prompt_tokens + max_tokens + 64),
                         n_threads=_default_threads(), n_batch_threads=_default_batch_threads()).start()
    report.update(load_seconds=round(server.load_seconds or 0.0, 2), n_ctx=server.n_ctx, threads=server.n_threads,
                  batch_threads=server.n_batch_threads, load_average=round(os.getloadavg()[0], 2))
    messages = _synthetic_prompt(server, prompt_tokens)
    started = time.perf_counter()
    result = server.chat({"messages": messages, "max_tokens": max_tokens, "temperature": 0.0, "ignore_eos": True,
                          "cache_prompt": False})
    wall = time.perf_counter() - started
    if "error" in result:
        raise RuntimeError(f"completion failed: {result['error']}")
    timings = result.get("timings") or {}
    usage = result.get("usage") or {}
    report.update(
        prompt_tokens=usage.get("prompt_tokens"), completion_tokens=usage.get("completion_tokens"),
        prefill_tokens_per_second=round(float(timings.get("prompt_per_second") or 0), 1),
        decode_tokens_per_second=round(float(timings.get("predicted_per_second") or 0), 1),
        completion_wall_seconds=round(wall, 2),
        peak_rss_mb=round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    )
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="local/qwen2.5-coder-0.5b-instruct")
    parser.add_argument("--prompt-tokens", type=int, default=1500)
    parser.add_argument("--max-tokens", type=int, default=128)
    parser.add_argument("--cache-dir", default=None, help="project cache (default $KDSPY_CACHE_DIR or ~/.cache/...)")
    parser.add_argument("--skip-join", action="store_true", help="do not time a fresh join")
    args = parser.parse_args(argv)
    try:
        report = measure(args.model, args.prompt_tokens, args.max_tokens, args.cache_dir, not args.skip_join)
    except LLMError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
