"""``kdspy serve-model``: an embedded model as llama.cpp's OpenAI-compatible HTTP server on 127.0.0.1."""

from __future__ import annotations

import argparse
import os
import signal
import threading

from knapsack_dspy.cli.main import UserError
from knapsack_dspy.llm.default_model import DEFAULT_LOCAL_MODEL

EPILOG = """examples:
  kdspy serve-model local/qwen2.5-coder-1.5b-instruct --port 8080 --slots 2
  kdspy bench benchmarks/gsm8k_cot.toml --lm openai/qwen2.5-coder-1.5b-instruct \\
              --api-base http://127.0.0.1:8080/v1 --workers 2          # two workers, one model

Loads the model once, in this process, and serves llama.cpp's endpoints on 127.0.0.1: POST /v1/chat/completions
(OpenAI), /tokenize and /apply-template (what the clients count prompt tokens with), GET /health, /slots,
/props. One line says where when it is ready; it serves until interrupted (Ctrl-C or SIGTERM: it stops cleanly,
once the requests in flight are answered; a second signal stops it at once).
Clients reach it like any OpenAI-compatible server: --lm openai/<name> --api-base http://127.0.0.1:PORT/v1 (the
key is not checked), or dspy.LM("openai/<name>", api_base=..., api_key="local"); their processes load no
weights, and count prompt tokens on this server. --slots N decodes N requests at once, each slot with the
whole --ctx; KDSPY_LOCAL_REPRODUCIBLE=1 (or --threads with --no-prompt-cache) serves the greedy replies of the
in-process model started alike (docs/llm.md, "Serving a model").
"""


def register(subparsers) -> None:
    p = subparsers.add_parser("serve-model", help="serve an embedded model as an OpenAI-compatible HTTP server",
                              description=__doc__, epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model", nargs="?", default=DEFAULT_LOCAL_MODEL,
                   help=f"the embedded model: local/<name> or <name> (default {DEFAULT_LOCAL_MODEL})")
    p.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (default 0: a free one, printed)")
    p.add_argument("--slots", type=int, default=1, metavar="N",
                   help="requests decoded at once (llama.cpp parallel slots; default 1)")
    p.add_argument("--ctx", type=int, metavar="TOKENS",
                   help="context per slot (default $KDSPY_LOCAL_N_CTX, else 4096)")
    p.add_argument("--threads", type=int, metavar="N",
                   help="generation threads (default: as in-process, $KDSPY_LOCAL_THREADS or the cores left free)")
    p.add_argument("--batch-threads", type=int, metavar="N",
                   help="prompt-processing threads (default $KDSPY_LOCAL_BATCH_THREADS, else every usable core)")
    cache = p.add_mutually_exclusive_group()
    cache.add_argument("--prompt-cache", dest="prompt_cache", action="store_true", default=None,
                       help="reuse a slot's previous prompt prefix (the default, unless KDSPY_LOCAL_REPRODUCIBLE=1)")
    cache.add_argument("--no-prompt-cache", dest="prompt_cache", action="store_false",
                       help="process every prompt whole, unless a request asks for cache_prompt")
    p.add_argument("--cache-dir", metavar="DIR",
                   help="where the joined weights live (default $KDSPY_CACHE_DIR, else ~/.cache/knapsack-dspy)")
    p.set_defaults(func=run)


def _plural(count: int, word: str) -> str:
    return f"{count} {word}" + ("" if count == 1 else "s")


def run(args) -> int:
    from knapsack_dspy.llm.errors import LLMConfigError
    from knapsack_dspy.llm.http_model_server import ServeSettings, served_base_url, start_model_server

    settings = ServeSettings(model=args.model, port=args.port, slots=args.slots, n_ctx=args.ctx,
                             threads=args.threads, batch_threads=args.batch_threads, cache_prompt=args.prompt_cache,
                             cache_dir=args.cache_dir)
    stop = threading.Event()

    def on_signal(number, frame) -> None:
        if stop.is_set():  # a second signal: do not wait for the requests in flight
            os._exit(128 + number)
        stop.set()

    previous = {number: signal.signal(number, on_signal) for number in (signal.SIGINT, signal.SIGTERM)}
    try:
        try:
            server = start_model_server(settings)
        except LLMConfigError as exc:
            raise UserError(str(exc)) from None
        url = served_base_url(server)
        name = server.spec.name
        print(f"kdspy serve-model: {server.spec.model} ready at {url} ({_plural(server.slots, 'slot')} x "
              f"{server.n_ctx} tokens, {server.n_threads} generation / {server.n_batch_threads} prompt threads, "
              f"prompt cache {'on' if server.cache_prompt else 'off'}); clients: --lm openai/{name} --api-base {url}",
              flush=True)
        while not stop.wait(0.5):  # a signal sets it (the handler runs in this thread, between two waits)
            pass
        print("kdspy serve-model: stopping (the requests in flight finish first; signal again to stop at once)",
              flush=True)
        server.stop()
        print(f"kdspy serve-model: {server.spec.model} stopped", flush=True)
        return 0
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
