"""What ``--workers N`` should do with the embedded model on this machine: one worker, N llama.cpp slots in one
process (threads), or N processes (Ray actors, each with its own copy of the model and cores / N threads).

Each configuration runs in a fresh child process (a model's slots are fixed when it loads): ``kdspy bench``'s
runner on the first ``--questions`` TAT-QA ``dev_tune`` questions (program of thought, KATE, the real embedder,
the model's own tokenizer), LM cache off. The compiled program is made once and copied in, so no
configuration compiles. Printed per configuration: start-up (to the first row: loading the model(s), and for
Ray the cluster), the answering rate (questions / time from the first question sent to the last row), and the
mean seconds per question as each row measured it (the first question of a worker includes loading its model),
and the error rows by kind (``answer``: the model's program failed, e.g. cut short by a small ``--max-tokens``).

    python benchmarks/local_workers.py                                          # 0.5B model, N = 2
    python benchmarks/local_workers.py --model local/qwen2.5-coder-1.5b-instruct --questions 6
    python benchmarks/local_workers.py --quick     # a functional check (1 question, 8 tokens): not a measurement

Needs the ``local-small`` (or ``local``) extra, and ``ray`` for the process configuration. Every loop is
bounded; run it on an otherwise idle machine (the point is to compare configurations).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))

CONFIGS = ("one", "slots", "processes")


def _suite(args, limit: int):
    from knapsack_dspy.bench.suites.suite import suite_from_dict

    return suite_from_dict({"name": "local_workers", "dataset": "tatqa", "pipeline": "pot", "selector": "kate",
                            "budget": args.budget, "max_exemplars": args.max_exemplars, "model": args.model,
                            "attributes": [], "limit": limit, "max_tokens": args.max_tokens})


def _one(args) -> dict:
    """One configuration, in this (child) process."""
    from scaleout_throughput import RowClock

    import knapsack_dspy  # noqa: F401 - environment defaults first
    from knapsack_dspy.bench.execution.runner import run_suite
    from knapsack_dspy.bench.results.store import load_rows
    from knapsack_dspy.llm.cache import configure_cache

    configure_cache(enabled=False)
    out = Path(args.out)
    if args.programs and Path(args.programs).exists():
        shutil.copytree(args.programs, out / "programs")
    workers = 1 if args.one == "one" else args.workers
    clock = RowClock()
    started = time.perf_counter()
    run_suite(_suite(args, args.questions), out, data_dir=args.data_dir, progress=False, log=lambda m: None,
              workers=workers, ray="" if args.one == "processes" else None)
    rows = load_rows(out)
    times = clock.times
    first_sent = times[0] - rows[0].latency_s if rows else started  # the first row, in file order, came first
    return {"config": args.one, "workers": workers, "questions": len(rows),
            "startup_s": round(first_sent - started, 1),
            "rate_q_per_s": round(len(rows) / (times[-1] - first_sent), 4) if rows else None,
            "mean_s_per_question": round(sum(r.latency_s for r in rows) / len(rows), 1) if rows else None,
            "errors": dict(Counter(r.get("error_kind") or "error" for r in rows if r.get("error")))}


def main() -> int:
    from scaleout_throughput import script_parser

    parser = script_parser(__doc__)
    parser.add_argument("--model", default="local/qwen2.5-coder-0.5b-instruct")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--questions", type=int, default=6)
    parser.add_argument("--budget", type=int, default=2048)
    parser.add_argument("-M", "--max-exemplars", type=int, default=4)
    parser.add_argument("--max-tokens", type=int, default=384)
    parser.add_argument("--configs", default=",".join(CONFIGS), help="comma-separated: one, slots, processes")
    parser.add_argument("--quick", action="store_true",
                        help="a functional check, not a measurement: 1 question, 8 tokens, budget 512, M = 1")
    parser.add_argument("--one", choices=CONFIGS, help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    parser.add_argument("--programs", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.quick:
        args.questions, args.max_tokens, args.budget, args.max_exemplars = 1, 8, 512, 1
    if args.one:
        print(json.dumps(_one(args)), flush=True)
        return 0
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    env.pop("KDSPY_LOCAL_SLOTS", None)
    base = [sys.executable, __file__, "--data-dir", args.data_dir, "--model", args.model, "--workers",
            str(args.workers), "--questions", str(args.questions), "--budget", str(args.budget), "-M",
            str(args.max_exemplars), "--max-tokens", str(args.max_tokens)]
    results = []
    with tempfile.TemporaryDirectory(prefix="local_workers_") as tmp:
        warm = Path(tmp) / "warm"  # compile once (one question answered, not timed)
        subprocess.run([*base[:-2], "--max-tokens", "8", "--questions", "1", "--one", "one", "--out", str(warm)],
                       env=env, check=True, capture_output=True)
        for config in [c.strip() for c in args.configs.split(",") if c.strip()]:
            done = subprocess.run([*base, "--one", config, "--out", str(Path(tmp) / config), "--programs",
                                   str(warm / "programs")], env=env, capture_output=True, text=True, timeout=7200,
                                  check=False)
            if done.returncode != 0:
                print(f"{config}: failed: {done.stderr.strip().splitlines()[-1:]}")
                continue
            result = json.loads(done.stdout.strip().splitlines()[-1])
            results.append(result)
            print(json.dumps(result), flush=True)
    print(f"\n{args.model}, {args.questions} questions, {os.cpu_count()} cores:\n")
    print("| configuration | workers | start-up s | questions/s | mean s / question | error rows by kind |")
    print("|---|---|---|---|---|---|")
    names = {"one": "1 worker", "slots": "slots in one process", "processes": "processes (Ray actors)"}
    for r in results:
        print(f"| {names[r['config']]} | {r['workers']} | {r['startup_s']} | {r['rate_q_per_s']} | "
              f"{r['mean_s_per_question']} | {r['errors']} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
