"""Questions per second of ``kdspy bench`` versus workers: threads (``--workers N``) and Ray actors (``--ray``).

A stub OpenAI-compatible server on 127.0.0.1 (``knapsack_dspy.testing.openai_stub_server``) answers every
question after a fixed delay (``--delay``, 1 s by default) with a valid program; the bench runs the real
pipeline (TAT-QA
``dev_tune``, program of thought, KATE, budget 2,048, M = 4, the real embedder and tokenizer) with the LM cache
off (``--no-cache``), so every question costs our own CPU (selection, prompt, execution, scoring, the row) plus
LiteLLM's, and one LM round trip.

For each kind of worker and each N, one fresh results directory (the compiled program copied in, so no run
compiles): start-up is the time from the start of ``run_suite`` to its first row (loading, a Ray cluster and its
actors, the embeddings of the questions); the steady-state rate counts the rows between the N-th and the
(total - N)-th, when every worker is busy. Each run answers ``max(--min-questions, N x --seconds / delay)``
questions, so every N gets about ``--seconds`` of steady state.

First the CPU ceiling: the same with an instant stub (``--delay 0``) at every N; its best rate is what this
machine's CPU allows. The target: at every N, rate >= 80 % of min(N x the one-worker rate, the ceiling), and
>= 3x the one-worker rate at 4 workers. The script prints a table and whether each row meets it.

    python benchmarks/scaleout_throughput.py                         # threads and Ray, N = 1, 2, 4, 8
    python benchmarks/scaleout_throughput.py --quick   # a functional check (~2 min): N = 1, 2, a 0.05 s stub

``--quick`` only shows that the script works end to end (threads and Ray, a few questions per run); its
numbers are not measurements.

Loopback only; every loop is bounded (questions per run, a time limit per run). Needs the ``ray`` extra for
``--modes ray``. Reads ``$KDSPY_DATA_DIR``; uses a fresh cache folder unless ``--cache-dir`` is given.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

import knapsack_dspy  # noqa: E402,F401 - environment defaults before dspy / litellm load

PROGRAM = "ans = 1\nscale = ''"


def _stub(delay: float):
    from knapsack_dspy.testing.openai_stub_server import StubOpenAIServer, chat_adapter_reply

    reply = chat_adapter_reply(program=PROGRAM)

    def answer(body):
        if delay:
            time.sleep(delay)
        return reply

    return StubOpenAIServer(reply=answer)


def _suite(base_url: str, limit: int):
    from knapsack_dspy.bench.suites.suite import suite_from_dict

    return suite_from_dict({"name": "scaleout", "dataset": "tatqa", "pipeline": "pot", "selector": "kate",
                            "budget": 2048, "max_exemplars": 4, "model": "openai/stub-model", "api_base": base_url,
                            "attributes": [], "limit": limit, "num_retries": 0, "timeout": 60})


class RowClock:
    """Records when each row is written (wraps ``ResultsStore.append`` for the script's lifetime)."""

    def __init__(self):
        from knapsack_dspy.bench.results import store as results_store

        self.times: list[float] = []
        self._lock = threading.Lock()
        original = results_store.ResultsStore.append
        clock = self

        def append(store, row):
            written = original(store, row)
            with clock._lock:
                clock.times.append(time.perf_counter())
            return written

        results_store.ResultsStore.append = append


def timed_run(clock: RowClock, suite, out: Path, programs: Path, data_dir: str, workers: int,
               ray: str | None) -> dict:
    from knapsack_dspy.bench.execution.runner import run_suite
    from knapsack_dspy.bench.results.store import load_rows

    if programs.exists():
        shutil.copytree(programs, out / "programs")
    clock.times.clear()
    started = time.perf_counter()
    run_suite(suite, out, data_dir=data_dir, progress=False, log=lambda message: None, workers=workers, ray=ray)
    ended = time.perf_counter()
    times = list(clock.times)
    rows = load_rows(out)
    lo, hi = (workers, len(times) - workers) if len(times) >= 3 * workers + 2 else (0, len(times) - 1)
    steady = (hi - lo) / (times[hi] - times[lo]) if hi > lo and times[hi] > times[lo] else float("nan")
    return {"workers": workers, "questions": len(times), "total_s": round(ended - started, 2), "rate": steady,
            "startup_s": round(times[0] - started, 2) if times else None,
            "errors": sum(bool(r.error) for r in rows),
            "pairs": len({(r.run, r.example_id) for r in rows})}


def _compile_once(data_dir: str, tmp: Path, clock: RowClock) -> Path:
    """Compile the program (and warm the embedding cache) once; later runs copy ``programs/``."""
    with _stub(0.0) as server:
        timed_run(clock, _suite(server.base_url, 1), tmp / "warm", tmp / "none", data_dir, 1, None)
    return tmp / "warm" / "programs"


def script_parser(doc: str) -> argparse.ArgumentParser:
    """The scale-out scripts' parser: their docstring as help, and ``--data-dir`` (``$KDSPY_DATA_DIR``)."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", default=os.environ.get("KDSPY_DATA_DIR", str(ROOT.parent / "shared" / "data")))
    return parser


def main() -> int:
    parser = script_parser(__doc__)
    parser.add_argument("--cache-dir", help="project cache (default: a fresh folder)")
    parser.add_argument("--modes", default="workers,ray", help="comma-separated: workers, ray")
    parser.add_argument("--workers", default="1,2,4,8", help="comma-separated worker counts")
    parser.add_argument("--delay", type=float, default=1.0, help="seconds the stub takes per answer")
    parser.add_argument("--seconds", type=float, default=30.0, help="steady state per run, about")
    parser.add_argument("--min-questions", type=int, default=24)
    parser.add_argument("--max-questions", type=int, default=504, help="dev_tune has 504")
    parser.add_argument("--no-ceiling", action="store_true", help="skip the instant-stub runs")
    parser.add_argument("--json", help="also write the results here")
    parser.add_argument("--quick", action="store_true",
                        help="a functional check, not a measurement: N = 1, 2, a 0.05 s stub, ~2 s per run")
    args = parser.parse_args()
    if args.quick:
        args.workers, args.delay, args.seconds, args.min_questions = "1,2", 0.05, 2.0, 8
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    counts = [int(n) for n in args.workers.split(",")]
    with tempfile.TemporaryDirectory(prefix="scaleout_") as tmp:
        tmp = Path(tmp)
        os.environ["KDSPY_CACHE_DIR"] = args.cache_dir or str(tmp / "cache")
        os.environ.setdefault("OPENAI_API_KEY", "stub")
        from knapsack_dspy.llm.cache import configure_cache

        configure_cache(enabled=False)  # --no-cache: every question reaches the stub
        clock = RowClock()
        programs = _compile_once(args.data_dir, tmp, clock)
        results = []
        delays = ([] if args.no_ceiling else [0.0]) + [args.delay]
        for delay in delays:
            for mode in modes:
                for n in counts:
                    per_question = delay or 0.05
                    limit = max(args.min_questions, min(args.max_questions, int(n * args.seconds / per_question)))
                    with _stub(delay) as server:
                        out = tmp / f"{mode}-{n}-{delay}"
                        result = timed_run(clock, _suite(server.base_url, limit), out, programs, args.data_dir, n,
                                            "" if mode == "ray" else None)
                    result.update(mode=mode, delay=delay)
                    results.append(result)
                    print(f"{mode:7} N={n:<2} delay={delay:g}s: {result['rate']:.2f} q/s steady, start-up "
                          f"{result['startup_s']} s, {result['questions']} questions, {result['errors']} errors",
                          flush=True)
    _report(results, args.delay, counts)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))
    return 0


def _report(results: list[dict], delay: float, counts: list[int]) -> None:
    ceiling = {}
    for r in results:
        if r["delay"] == 0:
            ceiling[r["mode"]] = max(ceiling.get(r["mode"], 0.0), r["rate"])
    print("\n| mode | N | q/s (steady) | start-up s | target: 80% of min(N x one, ceiling) | meets |")
    print("|---|---|---|---|---|---|")
    for mode in sorted({r["mode"] for r in results}):
        rows = {r["workers"]: r for r in results if r["mode"] == mode and r["delay"] == delay}
        one = rows.get(1, {}).get("rate")
        for n in counts:
            r = rows.get(n)
            if r is None:
                continue
            if not one:  # no one-worker run to compare with
                print(f"| {mode} | {n} | {r['rate']:.2f} | {r['startup_s']} | n/a | n/a |")
                continue
            bound = min(n * one, ceiling.get(mode, float("inf")))
            meets = r["rate"] >= 0.8 * bound and (n != 4 or r["rate"] >= 3 * one)
            print(f"| {mode} | {n} | {r['rate']:.2f} | {r['startup_s']} | {0.8 * bound:.2f} | "
                  f"{'yes' if meets else 'NO'} |")
    for mode, value in sorted(ceiling.items()):
        print(f"CPU ceiling ({mode}, instant stub): {value:.2f} q/s")


if __name__ == "__main__":
    sys.exit(main())
