"""``kdspy serve``: answer questions with a compiled program over HTTP (FastAPI + uvicorn)."""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

from knapsack_dspy.cli.common import add_data_options, add_lm_options, load_program_and_lm, setup_caches
from knapsack_dspy.cli.main import UserError

EPILOG = """examples:
  kdspy serve prog.json                                   # http://127.0.0.1:8000, the program's own model
  kdspy serve prog.json --lm openai/gpt-4o-mini --concurrency 8 --max-queue 64
  curl -s localhost:8000/answer -d '{"question": "What was the change in revenue?",
        "table": [["", "2019", "2018"], ["Revenue", "1,200", "1,100"]], "paragraphs": ["..."]}'
  curl -s localhost:8000/health

POST /answer takes {"question", "table" (rows of cells), "paragraphs"} and returns the answer, its scale, the
program or reasoning, the selected exemplar ids, the prompt's tokens and the latency. At most --concurrency
questions are answered at once and --max-queue are admitted (answering or waiting); beyond that a request
gets 429 with Retry-After at once. Bad input gets a 4xx with a one-line reason. The server binds 127.0.0.1
unless --host says otherwise. See docs/scale_out.md for deployment.
"""

SETTINGS_ENV = "KDSPY_SERVE_SETTINGS"  # the parsed options, for the worker processes of --processes N


def register(subparsers) -> None:
    p = subparsers.add_parser("serve", help="serve a compiled program over HTTP (POST /answer, GET /health)",
                              description=__doc__, epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("program", help="program JSON written by 'kdspy compile'")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1: this machine only)")
    p.add_argument("--port", type=int, default=8000, help="port (default 8000)")
    p.add_argument("--max-queue", type=int, default=8, metavar="N",
                   help="requests admitted at once, answering or waiting (default 8); one more gets 429")
    p.add_argument("--concurrency", type=int, metavar="N",
                   help="questions answered at once (default: 1 for an embedded local/ model, 8 otherwise)")
    p.add_argument("--processes", type=int, default=1, metavar="N",
                   help="uvicorn worker processes, each loading the program (default 1); the queue is per process")
    p.add_argument("--max-body-kb", type=int, default=1000, metavar="KB",
                   help="largest request body in kilobytes (default 1000); larger gets 413")
    add_lm_options(p, default=None)
    add_data_options(p)
    p.set_defaults(func=run)


def _check(args) -> None:
    for flag, value in (("--max-queue", args.max_queue), ("--processes", args.processes),
                        ("--max-body-kb", args.max_body_kb), ("--concurrency", args.concurrency)):
        if value is not None and value < 1:
            raise UserError(f"{flag} must be 1 or more, got {value}")
    if not 0 <= args.port <= 65535:
        raise UserError(f"--port must be between 0 and 65535, got {args.port}")


def build_app(args, warm_up: bool = True):
    """Load the program and the LM named by ``args`` and return the ASGI app (one-line ``UserError`` s)."""
    from knapsack_dspy.llm import is_local_model
    try:
        from knapsack_dspy.serve.app import create_app
    except ImportError as exc:
        raise UserError(f"kdspy serve needs the serve extra ({exc.name} is missing): "
                        "pip install 'knapsack-dspy[serve]'") from None

    setup_caches(args)
    program, lm = load_program_and_lm(args)
    if warm_up:  # load the embedder and the tokenizer now, not on the first request
        program.select_for({"question": "warm up", "table": [], "paragraphs": []})
    concurrency = args.concurrency or (1 if is_local_model(args.lm) else 8)
    return create_app(program, lm, name=Path(args.program).name, max_queue=args.max_queue, concurrency=concurrency,
                      max_body_bytes=args.max_body_kb * 1000)


def app_from_environment():
    """The app of one uvicorn worker process (``--processes N``): the options come in ``$KDSPY_SERVE_SETTINGS``."""
    return build_app(argparse.Namespace(**json.loads(os.environ[SETTINGS_ENV])))


def run(args) -> int:
    _check(args)
    try:
        import uvicorn  # the serve extra
    except ImportError:
        raise UserError("kdspy serve needs the serve extra: pip install 'knapsack-dspy[serve]'") from None
    started = time.perf_counter()
    app = build_app(args, warm_up=args.processes == 1)  # with --processes: loaded here to fail early, in one line
    where = f"http://{args.host}:{args.port}"
    state = "ready" if args.processes == 1 else f"checked; starting {args.processes} processes"
    print(f"kdspy serve: {args.program} ({args.lm}) {state} in {time.perf_counter() - started:.1f} s on {where} "
          f"(POST /answer, GET /health); queue {args.max_queue} per process", flush=True)
    if args.processes == 1:
        uvicorn.run(app, host=args.host, port=args.port, log_level="warning", timeout_keep_alive=5)
        return 0
    del app
    settings = {key: value for key, value in vars(args).items() if key != "func"}
    os.environ[SETTINGS_ENV] = json.dumps(settings)
    uvicorn.run("knapsack_dspy.cli.serve:app_from_environment", factory=True, workers=args.processes,
                host=args.host, port=args.port, log_level="warning", timeout_keep_alive=5)
    return 0
