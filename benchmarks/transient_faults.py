"""A bench against a failing server, then the same command once it recovers: 0 error rows, each pair once.

The stub OpenAI-compatible server (``knapsack_dspy/testing/openai_stub_server.py``) answers every question with a valid
program, but the first requests fail, in turn: HTTP 500, 429 and 503, a body that is not JSON, a reply cut
mid-way, a dropped connection, an empty ``choices`` list and a hang past the suite's timeout. Run 1
(``kdspy bench``, ``num_retries = 0`` so that every fault reaches a row) records them as transient failures
and ends with one line, exit 2. Run 2, the same command after the server has recovered, asks exactly those
questions again; the script prints, per run, the exit code, rows, error rows and LM requests, and checks
that run 2 leaves 0 error rows, holds each (run, example) once, and kept every row run 1 had finished::

    run 1: exit 2, rows 60, error rows 16 (transient 16), requests 60
    run 2: exit 0, rows 60, error rows 0, requests 16 (the failed ones), unique pairs 60, kept 44 of 44

Run: ``python benchmarks/transient_faults.py`` (reads ``$KDSPY_DATA_DIR``; a fresh cache folder, so every
answer comes from the server; ``--faults`` sets how many requests fail).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FAULTS = ("500", "429", "503", "garbage", "truncated", "disconnect", "empty", "hang")


def _queue_faults(server, count: int, hang_seconds: float) -> None:
    from knapsack_dspy.testing.openai_stub_server import Fault

    for i in range(count):
        kind = FAULTS[i % len(FAULTS)]
        if kind.isdigit():
            server.add_fault(Fault("status", status=int(kind)))
        elif kind == "hang":
            server.add_fault(Fault("hang", seconds=hang_seconds))
        else:
            server.add_fault(Fault(kind))


def _rows(out: Path) -> list:
    from knapsack_dspy.bench.results.store import load_rows

    return load_rows(out)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--data-dir", default=os.environ.get("KDSPY_DATA_DIR", str(ROOT.parent / "shared" / "data"))
    )
    parser.add_argument("--questions", type=int, default=30, help="questions per selector (2 selectors)")
    parser.add_argument("--faults", type=int, default=16, help="failing requests, the kinds in turn")
    args = parser.parse_args()
    from knapsack_dspy.testing.openai_stub_server import StubOpenAIServer, chat_adapter_reply

    with tempfile.TemporaryDirectory(prefix="transient_faults_") as tmp:
        tmp = Path(tmp)
        out = tmp / "results"
        with StubOpenAIServer(reply=chat_adapter_reply(program="ans = 1\nscale = ''")) as server:
            suite = tmp / "suite.toml"
            suite.write_text(
                "\n".join(
                    [
                        'name = "transient_faults"',
                        'dataset = "tatqa"',
                        'pipeline = "pot"',
                        'selector = ["kate", "random"]',
                        "budget = 3000",
                        "max_exemplars = 2",
                        'model = "openai/stub-model"',
                        f'api_base = "{server.base_url}"',
                        f"limit = {args.questions}",
                        "num_retries = 0",
                        "timeout = 2",
                    ]
                )
                + "\n"
            )
            env = {
                **os.environ,
                "KDSPY_DATA_DIR": args.data_dir,
                "OPENAI_API_KEY": "stub",
                "KDSPY_CACHE_DIR": str(tmp / "cache"),
                "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
            }
            bench = ["bench", str(suite), "--out", str(out), "--quiet"]
            command = [sys.executable, "-m", "knapsack_dspy.cli.main", *bench]
            _queue_faults(server, args.faults, hang_seconds=5.0)
            first = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
            rows1, asked1 = _rows(out), server.completion_count()
            server.clear()  # the server has recovered
            second = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
            rows2, asked2 = _rows(out), server.completion_count()
    finished = {(r.run, r.example_id): r for r in rows1 if not r.error}
    kept = sum(1 for r in rows2 if finished.get((r.run, r.example_id)) == r)
    transient = sum(r.error_kind == "transient" for r in rows1)
    last_line = first.stderr.strip().splitlines()[-1] if first.stderr.strip() else ""
    errors1 = sum(bool(r.error) for r in rows1)
    print(
        f"run 1: exit {first.returncode}, rows {len(rows1)}, error rows {errors1} (transient {transient}), "
        f"requests {asked1}"
    )
    print(f"       {last_line[:300]}")
    errors2 = sum(bool(r.error) for r in rows2)
    pairs = len({(r.run, r.example_id) for r in rows2})
    print(
        f"run 2: exit {second.returncode}, rows {len(rows2)}, error rows {errors2}, requests {asked2} "
        f"(the failed ones), unique pairs {pairs}, kept {kept} of {len(finished)}"
    )
    ok = (
        second.returncode == 0
        and errors2 == 0
        and pairs == len(rows2) == len(rows1)
        and kept == len(finished)
        and asked2 == transient
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
