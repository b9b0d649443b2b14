"""The embedded model in this process vs behind its own server (``kdspy serve-model``), driven through LiteLLM as
any OpenAI-compatible server (issue 51): how many questions an hour, how many rows come out identical, how much
the server's prompt cache reuses.

Arms, each a fresh child process running ``kdspy bench``'s runner on ``benchmarks/served_model.toml`` (20 TAT-QA +
20 GSM8K tuning questions; LM cache off; its own results directory under ``--out``):

- ``in_process``: ``--lm local/<name>``, one worker;
- ``served_1x1``: ``kdspy serve-model --slots 1``, ``--lm openai/<name> --api-base URL``, one worker;
- ``served_2x2``: ``kdspy serve-model --slots 2``, two workers (threads) against it.

The runtimes are started alike (docs/llm.md, "Serving a model"): the same decode and prompt threads in every arm
(``--threads``, default every usable core: set for all, so no arm chooses by the machine's load), the prompt cache
on (the default; ``--reproducible`` turns it off everywhere and fixes the threads, ``KDSPY_LOCAL_REPRODUCIBLE=1``).
A warm-up run first compiles every program once, selection only, so the pools' embeddings are cached; each arm
then compiles from those caches (its seconds before the first question are ``compile_s``). A server's start
is not in any arm.

Per arm: questions, seconds answering (the first question sent to the last row written) and questions per hour,
mean seconds per question, error rows by kind, the share of rows identical to the in-process run (the same
prompts and the same replies; and the same answers), cached prompt tokens per question, and the LM calls whose
prompt tokens as the project counted them equal those the model reported. Printed as a table and written to
``OUT/served_model.json``.

    python benchmarks/served_model.py --model local/qwen2.5-coder-1.5b-instruct   # the measurement (40 questions)
    python benchmarks/served_model.py --quick --out DIR      # a functional check, not a measurement: 0.5B, 2 questions

Run it on an otherwise idle machine: the arms are compared with each other.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))

SUITE = Path(__file__).resolve().with_suffix(".toml")
ARMS = ("in_process", "served_1x1", "served_2x2")
SLOTS = {"served_1x1": 1, "served_2x2": 2}


def _served(model: str) -> str:
    return "openai/" + model.split("/", 1)[1]


def _arm(args) -> dict:
    """One arm, in this (child) process: the suite answered with the arm's model, server and workers."""
    from dataclasses import replace

    from scaleout_throughput import RowClock

    import knapsack_dspy  # noqa: F401 - environment defaults first
    from knapsack_dspy.bench.execution.runner import run_suite
    from knapsack_dspy.bench.results.store import load_rows
    from knapsack_dspy.bench.suites.suite import load_suite
    from knapsack_dspy.llm.cache import configure_cache

    configure_cache(enabled=False)
    suite = load_suite(args.suite)
    warm = args.arm == "warm"
    model = args.model if args.arm in ("warm", "in_process") else _served(args.model)
    suite.runs = [replace(run, model=model, api_base=args.api_base or "", limit=args.limit, selection_only=warm)
                  for run in suite.runs]
    clock = RowClock()
    started = time.perf_counter()
    run_suite(suite, Path(args.out), data_dir=args.data_dir, progress=False, log=lambda m: None,
              workers=args.workers)
    rows = load_rows(Path(args.out))
    times = clock.times
    if not rows or warm:
        return {"arm": args.arm, "questions": len(rows)}
    first_sent = times[0] - (rows[0].latency_s or 0.0)  # the first row written came from the first questions sent
    answering = max(times[-1] - first_sent, 1e-9)
    return {"arm": args.arm, "workers": args.workers, "questions": len(rows),
            "compile_s": round(first_sent - started, 1), "answering_s": round(answering, 1),
            "questions_per_hour": round(len(rows) / answering * 3600, 1),
            "mean_s_per_question": round(sum(r.latency_s or 0.0 for r in rows) / len(rows), 1),
            "errors": dict(Counter(r.error_kind or "error" for r in rows if r.error)),
            "client_loaded_xllamacpp": "xllamacpp" in sys.modules}


def _key(row) -> tuple:
    return row.spec.get("dataset"), row.example_id


def compare(arm_rows: list, reference: list | None) -> dict:
    """Of an arm's rows: the share identical to the in-process ones (prompts and replies; answers), cached prompt
    tokens per question, and the calls whose counted prompt tokens equal the reported ones."""
    out: dict = {"cached_tokens_per_question": round(sum(r.cached_prompt_tokens or 0 for r in arm_rows)
                                                     / max(1, len(arm_rows)), 1)}
    pairs = [(r, c) for row in arm_rows
             for r, c in zip(row.reported_prompt_tokens or [], row.counted_prompt_tokens or [], strict=False)
             if r is not None and c is not None]
    out["calls_counted_as_reported"] = f"{sum(r == c for r, c in pairs)} of {len(pairs)}"
    if reference is not None:
        theirs = {_key(row): row for row in reference}
        shared = [(row, theirs[_key(row)]) for row in arm_rows if _key(row) in theirs]
        same_reply = sum(a.prompt_sha256 == b.prompt_sha256 and a.completions == b.completions for a, b in shared)
        same_answer = sum(a.answer == b.answer for a, b in shared)
        out["identical_rows"] = f"{same_reply} of {len(shared)}"
        out["identical_share"] = round(same_reply / len(shared), 3) if shared else None
        out["same_answer_share"] = round(same_answer / len(shared), 3) if shared else None
    return out


def _child(args, arm: str, out: Path, env: dict, *, api_base: str = "", workers: int = 1) -> dict:
    command = [sys.executable, __file__, "--arm", arm, "--out", str(out), "--model", args.model, "--suite",
               str(args.suite), "--data-dir", args.data_dir, "--limit", str(args.limit), "--workers", str(workers)]
    if api_base:
        command += ["--api-base", api_base]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=6 * 3600, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{arm}: failed: {done.stderr.strip()[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> int:
    from scaleout_throughput import script_parser

    parser = script_parser(__doc__)
    parser.add_argument("--model", default="local/qwen2.5-coder-1.5b-instruct")
    parser.add_argument("--suite", default=str(SUITE))
    parser.add_argument("--limit", type=int, default=20, help="questions per run of the suite (two runs)")
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "served_model"))
    parser.add_argument("--threads", type=int, help="decode and prompt threads of every arm (default: usable cores)")
    parser.add_argument("--reproducible", action="store_true",
                        help="KDSPY_LOCAL_REPRODUCIBLE=1 in every arm: every prompt processed whole")
    parser.add_argument("--arms", default=",".join(ARMS), help=f"comma-separated: {', '.join(ARMS)}")
    parser.add_argument("--quick", action="store_true",
                        help="a functional check, not a measurement: the 0.5B model, 1 question per run")
    parser.add_argument("--arm", help=argparse.SUPPRESS)
    parser.add_argument("--api-base", help=argparse.SUPPRESS)
    parser.add_argument("--workers", type=int, default=1, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.arm:
        print(json.dumps(_arm(args)), flush=True)
        return 0
    if args.quick:
        args.model, args.limit = "local/qwen2.5-coder-0.5b-instruct", 1

    from knapsack_dspy.bench.results.store import load_rows
    from knapsack_dspy.llm.cpu_load import usable_cores
    from knapsack_dspy.testing.model_server_process import ModelServerProcess

    threads = str(args.threads or usable_cores())
    settings = {"KDSPY_LOCAL_THREADS": threads, "KDSPY_LOCAL_BATCH_THREADS": threads}
    if args.reproducible:
        settings["KDSPY_LOCAL_REPRODUCIBLE"] = "1"
    env = {**os.environ, **settings,
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}
    env.pop("KDSPY_LOCAL_SLOTS", None)
    out = Path(args.out) / args.model.split("/", 1)[1]
    out.mkdir(parents=True, exist_ok=True)
    arms = [a.strip() for a in args.arms.split(",") if a.strip()]
    results: dict[str, dict] = {}
    _child(args, "warm", out / "warm", env)  # every program compiled once: the embeddings cached
    for arm in arms:
        if arm == "in_process":
            results[arm] = _child(args, arm, out / arm, env)
        else:
            with ModelServerProcess(args.model, slots=SLOTS[arm], env=settings) as server:
                results[arm] = _child(args, arm, out / arm, env, api_base=server.base_url, workers=SLOTS[arm])
                results[arm]["server"] = server.ready_line
        print(json.dumps(results[arm]), flush=True)
    reference = load_rows(out / "in_process") if "in_process" in results else None
    for arm, result in results.items():
        result.update(compare(load_rows(out / arm), None if arm == "in_process" else reference))
    summary = {"model": args.model, "suite": str(args.suite), "limit_per_run": args.limit, "settings": settings,
               "cores": os.cpu_count(), "arms": results}
    (out / "served_model.json").write_text(json.dumps(summary, indent=1) + "\n")
    print(f"\n{args.model}, {sum(r['questions'] for r in results.values()) // max(1, len(results))} questions per "
          f"arm, {threads} threads{', reproducible' if args.reproducible else ''}:\n")
    print("| arm | workers | questions / hour | mean s / question | identical to in-process (replies / answers) | "
          "cached tokens / question | counted = reported | error rows |")
    print("|---|---|---|---|---|---|---|---|")
    for arm, r in results.items():
        same = "—" if arm == "in_process" else f"{r['identical_rows']} / {100 * (r['same_answer_share'] or 0):.0f} %"
        print(f"| {arm} | {r['workers']} | {r['questions_per_hour']} | {r['mean_s_per_question']} | {same} | "
              f"{r['cached_tokens_per_question']} | {r['calls_counted_as_reported']} | {r['errors'] or '—'} |")
    print(f"\nwritten: {out / 'served_model.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
