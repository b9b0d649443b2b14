"""Prefill and decode rates of one llama.cpp runtime configuration of the embedded model (issue 13's levers).

Loads a GGUF file into an ``xllamacpp.Server`` with the options given, sends ``--repeats`` prompts of about
``--new`` tokens that share nothing (``cache_prompt`` off), generates ``--gen`` tokens each (end-of-sequence
ignored), and prints the median prefill and decode tokens per second from llama.cpp's own timings, as one JSON
line. OpenMP settings are read when the runtime loads, so set them in the environment of the command:

    python experiments/throughput/runtime_options.py  # the defaults (import knapsack_dspy)
    OMP_WAIT_POLICY=ACTIVE python experiments/throughput/runtime_options.py --busy  # spinning waits beside a busy-loop
    GOMP_SPINCOUNT=10000 python experiments/throughput/runtime_options.py --busy --threads 2
    python experiments/throughput/runtime_options.py --threads 1 --busy                   # one decode thread
    python experiments/throughput/runtime_options.py --torch-first  # torch's OpenMP threads alive too
    python experiments/throughput/runtime_options.py --no-repack --ubatch 1024 --flash-attn 1
    python experiments/throughput/runtime_options.py --gguf OTHER.gguf                    # e.g. the weights requantized
    python experiments/throughput/runtime_options.py --prompts prompts.json --speculative NGRAM_SIMPLE --spec-n 3 --spec-m 6

``--prompts`` (a JSON list of chat message lists, e.g. captured with ``prompt_capture.first_prompt``) measures
decode on real prompts instead (greedy, up to 300 tokens) and ``--replies FILE`` writes the replies, so two
configurations' outputs can be compared (speculative decoding must not change greedy output). Requantizing the
weights needs the ``gguf`` package (not a dependency): dequantize each Q4_K / Q6_K tensor and quantize it again
(``gguf.quants``), copying the metadata; docs/throughput.md lists what was measured.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

import knapsack_dspy  # noqa: F401  # isort: skip  (environment defaults first: OpenMP waits)
from knapsack_dspy.llm.local_models import local_model_spec
from knapsack_dspy.llm.local_weights import ensure_local_weights
from knapsack_dspy.testing.busy_loop import busy_loop

MODEL = "local/qwen2.5-coder-1.5b-instruct"


def synthetic_text(tokens: int, offset: int) -> str:
    """Table-like text of roughly ``tokens`` tokens that differs from the start for each ``offset``."""
    words: list[str] = []
    row = 0
    while len(words) < tokens * 0.55:
        words += (f"| {1900 + (offset * 37 + row) % 120} | revenue {4100 + 37 * (row + offset):,} | cost "
                  f"{2900 + 23 * row:,} | item {offset}-{row} |\n").split(" ")
        row += 1
    return " ".join(words)


def load_server(args):
    import xllamacpp  # the native runtime loads here, after the environment is set

    params = xllamacpp.CommonParams()
    params.model.path = args.gguf or str(ensure_local_weights(local_model_spec(args.model)))
    params.n_ctx, params.n_parallel, params.kv_unified = 4096, 1, False
    params.cpuparams.n_threads = args.threads
    params.cpuparams_batch.n_threads = args.batch_threads
    params.n_ubatch, params.n_batch = args.ubatch, max(args.ubatch, 2048)
    params.flash_attn_type = args.flash_attn
    params.no_extra_bufts = args.no_repack
    params.verbosity, params.warmup, params.prefill_assistant = -1, False, False
    if args.speculative != "NONE":
        kinds = xllamacpp.common_speculative_type
        params.speculative.types = [getattr(kinds, "COMMON_SPECULATIVE_TYPE_" + args.speculative)]
        for name in ("ngram_simple", "ngram_map_k", "ngram_map_k4v"):
            table = getattr(params.speculative, name)
            table.size_n, table.size_m = args.spec_n, args.spec_m
    started = time.perf_counter()
    server = xllamacpp.Server(params)
    return server, time.perf_counter() - started


def rate(n, ms) -> float:
    return 1000.0 * n / ms if ms else float("nan")


def torch_parallel_region() -> None:
    """One multi-threaded torch matmul, as embedding a query does in a bench process: with torch's OpenMP threads
    alive (one libgomp for torch and llama.cpp), libgomp counts more threads than cores and waits with its
    throttled spin count instead of ``GOMP_SPINCOUNT``."""
    import torch  # only for --torch-first

    torch.set_num_threads(os.cpu_count() or 1)
    a = torch.randn(512, 512)
    for _ in range(5):
        a = torch.tanh(a @ a)


def measure(args) -> dict:
    if args.torch_first:
        torch_parallel_region()
    server, load_s = load_server(args)
    calls, replies = [], []
    if args.prompts:
        with open(args.prompts, encoding="utf-8") as handle:
            conversations = json.load(handle)
        requests = [{"messages": m, "max_tokens": 300, "temperature": 0} for m in conversations]
    else:
        requests = [{"messages": [{"role": "user", "content": synthetic_text(args.new, 1000 * k + 7) + "\nSummarise."}],
                     "max_tokens": args.gen, "temperature": 0, "ignore_eos": True}
                    for k in range(args.repeats + 1)]
    for k, request in enumerate(requests):
        out = server.handle_chat_completions({**request, "cache_prompt": False})
        if "error" in out:
            raise RuntimeError(f"completion failed: {out['error']}")
        timings = out.get("timings") or {}
        replies.append(out["choices"][0]["message"]["content"])
        if args.prompts or k > 0:  # synthetic: the first call warms the runtime up
            calls.append({key: timings.get(key) for key in ("prompt_n", "prompt_ms", "predicted_n", "predicted_ms",
                                                           "draft_n", "draft_n_accepted")})
    decode_n = sum(c["predicted_n"] or 0 for c in calls)
    decode_ms = sum(c["predicted_ms"] or 0 for c in calls)
    if args.replies:
        with open(args.replies, "w", encoding="utf-8") as handle:
            json.dump(replies, handle, indent=1)
    return {
        "gguf": os.path.basename(args.gguf or local_model_spec(args.model).name + ".gguf"),
        "threads": args.threads, "batch_threads": args.batch_threads, "ubatch": args.ubatch,
        "flash_attn": args.flash_attn, "no_repack": args.no_repack, "speculative": args.speculative,
        "OMP_WAIT_POLICY": os.environ.get("OMP_WAIT_POLICY"), "GOMP_SPINCOUNT": os.environ.get("GOMP_SPINCOUNT"),
        "busy": args.busy, "torch_first": args.torch_first, "load_s": round(load_s, 2),
        "prompt_tokens": [c["prompt_n"] for c in calls],
        "prefill_tokens_per_s": round(statistics.median(rate(c["prompt_n"], c["prompt_ms"]) for c in calls), 1),
        "decode_tokens_per_s": round(rate(decode_n, decode_ms), 1),
        "draft_accepted": [c["draft_n_accepted"] for c in calls] if args.speculative != "NONE" else None,
        "load_average": round(os.getloadavg()[0], 2),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    parser.add_argument("--model", default=MODEL, help="a local/ model of the catalogue (its joined weights)")
    parser.add_argument("--gguf", help="another GGUF file instead (e.g. requantized weights)")
    parser.add_argument("--threads", type=int, default=2, help="decode threads")
    parser.add_argument("--batch-threads", type=int, default=2, help="prompt-processing threads")
    parser.add_argument("--ubatch", type=int, default=512)
    parser.add_argument("--flash-attn", type=int, default=-1, choices=(-1, 0, 1), help="-1: llama.cpp decides")
    parser.add_argument("--no-repack", action="store_true", help="no CPU weight repacking (extra buffer types)")
    parser.add_argument("--speculative", default="NONE",
                        choices=("NONE", "NGRAM_SIMPLE", "NGRAM_MAP_K", "NGRAM_MAP_K4V", "NGRAM_MOD"))
    parser.add_argument("--spec-n", type=int, default=3, help="n-gram speculation: n-gram size looked up")
    parser.add_argument("--spec-m", type=int, default=6, help="n-gram speculation: tokens drafted")
    parser.add_argument("--new", type=int, default=300, help="synthetic prompt tokens (roughly)")
    parser.add_argument("--gen", type=int, default=128, help="tokens generated per synthetic prompt")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--prompts", help="JSON list of chat message lists: decode measured on these")
    parser.add_argument("--replies", help="write the replies here (JSON list)")
    parser.add_argument("--busy", action="store_true", help="one busy-loop process beside the measurement")
    parser.add_argument("--torch-first", action="store_true",
                        help="run a multi-threaded torch matmul first (as a bench process embedding queries does)")
    args = parser.parse_args(argv)
    if min(args.threads, args.batch_threads, args.repeats, args.new, args.gen, args.ubatch) < 1:
        parser.error("--threads, --batch-threads, --repeats, --new, --gen and --ubatch must be at least 1")
    with busy_loop(args.busy):
        print(json.dumps(measure(args)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
