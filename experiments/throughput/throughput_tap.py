"""Run ``kdspy bench`` with every embedded-model call's llama.cpp timings appended to a JSONL file.

The same measurement for any version of the code (``experiments/throughput/throughput.py`` runs the baseline commit from an
export with this tap too): whichever ``knapsack_dspy`` is on ``PYTHONPATH`` is imported, its ``LocalServer.chat``
is wrapped to log each completion's ``cache_n`` (prompt tokens reused from the slot's cache), ``prompt_n``,
``prompt_ms`` (prefill), ``predicted_n``, ``predicted_ms`` (decode), wall time and the server's decode / prompt
threads, and the model is loaded before
the bench starts (so no question pays the load).

    PYTHONPATH=<tree> python experiments/throughput/throughput_tap.py --log calls.jsonl --preload MODEL -- SUITE --out DIR ...
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import knapsack_dspy  # noqa: F401  # isort: skip  (the tree's environment defaults, e.g. OpenMP waits, first)
from knapsack_dspy.cli.main import main as kdspy
from knapsack_dspy.llm import local_server

TIMINGS = ("cache_n", "prompt_n", "prompt_ms", "predicted_n", "predicted_ms")


def tap(log_path: str) -> None:
    """Wrap ``LocalServer.chat`` (once) so that each call appends one JSON line to ``log_path``."""
    original = local_server.LocalServer.chat
    if getattr(original, "_throughput_tap", False):
        return

    def chat(self, request):
        started = time.time()
        result = original(self, request)
        timings = (result.get("timings") if isinstance(result, dict) else None) or {}
        record = {"at": round(started, 3), "wall_s": round(time.time() - started, 3), "model": self.spec.model,
                  "cache_prompt": request.get("cache_prompt", True), **{k: timings.get(k) for k in TIMINGS},
                  "threads": getattr(self, "n_threads", None), "batch_threads": getattr(self, "n_batch_threads", None)}
        with open(log_path, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(record) + "\n")
        return result

    chat._throughput_tap = True
    local_server.LocalServer.chat = chat


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    split = argv.index("--") if "--" in argv else len(argv)
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--log", required=True, help="JSONL file the calls' timings are appended to")
    parser.add_argument("--preload", help="a local/ model to load before the bench starts")
    args = parser.parse_args(argv[:split])
    tap(args.log)
    if args.preload:
        local_server.get_local_server(args.preload)
    return kdspy(["bench", *argv[split + 1:]])


if __name__ == "__main__":
    sys.exit(main())
