"""``kdspy serve`` under load: 16 concurrent clients for a bounded time against the stub LM, then the
malformed-request set.

A program is compiled with ``kdspy compile`` (TAT-QA, program of thought, KATE, M = 4, the real embedder; or
``--program``), served by ``kdspy serve`` in a child process on 127.0.0.1 with the stub OpenAI-compatible server
(``knapsack_dspy.testing.openai_stub_server``, answering after ``--delay`` seconds) as its LM, LM cache
off. ``--clients`` threads each send TAT-QA ``dev_tune`` questions one after another for ``--seconds`` (and at most
``--max-requests`` in all). Printed: requests per second answered (200), p50 / p99 latency seen by the clients,
the count of every status (target: zero 5xx; 429 only when the clients outnumber ``--max-queue``), then every
request of the malformed set (wrong types, missing fields, huge bodies, bad JSON, ...) with its status
(target: all 4xx).

    python benchmarks/serve_load.py                         # 16 clients, 30 s, instant stub, concurrency 8
    python benchmarks/serve_load.py --delay 1               # a stub LM answering after 1 s
    python benchmarks/serve_load.py --quick                 # a functional check (4 clients, 3 s): not a measurement

Loopback only; every loop is bounded. Needs the ``serve`` extra. Reads ``$KDSPY_DATA_DIR``.
"""

from __future__ import annotations

import http.client
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _request(port: int, method: str, path: str, body: bytes | None, timeout: float = 120.0):
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        connection.request(method, path, body=body, headers={"Content-Type": "application/json"})
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


def _wait_healthy(port: int, proc: subprocess.Popen, limit_s: float) -> None:
    deadline = time.time() + limit_s
    while time.time() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"kdspy serve exited ({proc.returncode}): {proc.stderr.read().decode()[-2000:]}")
        try:
            if _request(port, "GET", "/health", None, timeout=2)[0] == 200:
                return
        except OSError:
            pass
        time.sleep(0.2)
    raise SystemExit(f"kdspy serve did not answer /health within {limit_s} s")


def _questions(data_dir: str) -> list[bytes]:
    from knapsack_dspy.docqa.data import load_examples

    examples = list(load_examples("tatqa", split="dev_tune", data_dir=data_dir))[:200]
    return [json.dumps({"question": ex.question, "table": ex.table,
                        "paragraphs": [p["text"] if isinstance(p, dict) else p for p in ex.paragraphs]}).encode()
            for ex in examples]


def _load(port: int, bodies: list[bytes], clients: int, seconds: float, max_requests: int) -> dict:
    statuses: Counter = Counter()
    latencies: list[float] = []
    lock = threading.Lock()
    deadline = time.time() + seconds
    sent = {"n": 0}

    def client(index: int) -> None:
        turn = index
        while time.time() < deadline:
            with lock:
                if sent["n"] >= max_requests:
                    return
                sent["n"] += 1
            started = time.perf_counter()
            try:
                status, _ = _request(port, "POST", "/answer", bodies[turn % len(bodies)])
            except OSError as exc:
                status = f"connection error: {type(exc).__name__}"
            elapsed = time.perf_counter() - started
            with lock:
                statuses[status] += 1
                if status == 200:
                    latencies.append(elapsed)
            turn += clients

    threads = [threading.Thread(target=client, args=(i,), daemon=True) for i in range(clients)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(seconds + 180)
    wall = time.perf_counter() - started
    latencies.sort()
    return {"seconds": round(wall, 2), "requests": sum(statuses.values()), "statuses": dict(statuses),
            "answered_per_s": round(statuses.get(200, 0) / wall, 2),
            "p50_s": round(statistics.median(latencies), 3) if latencies else None,
            "p99_s": round(latencies[min(len(latencies) - 1, int(0.99 * len(latencies)))], 3) if latencies else None,
            "server_errors": sum(n for s, n in statuses.items() if not isinstance(s, int) or s >= 500)}


def main() -> int:
    from scaleout_throughput import script_parser

    parser = script_parser(__doc__)
    parser.add_argument("--program", help="a compiled program (default: compile one with kdspy compile)")
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--max-requests", type=int, default=20_000)
    parser.add_argument("--delay", type=float, default=0.0, help="seconds the stub LM takes per answer")
    parser.add_argument("--concurrency", type=int, default=8, help="kdspy serve --concurrency")
    parser.add_argument("--max-queue", type=int, default=32, help="kdspy serve --max-queue")
    parser.add_argument("--quick", action="store_true", help="a functional check, not a measurement: 4 clients, 3 s")
    args = parser.parse_args()
    if args.quick:
        args.clients, args.seconds = 4, 3.0
    from knapsack_dspy.testing.malformed_requests import MALFORMED_REQUESTS
    from knapsack_dspy.testing.openai_stub_server import StubOpenAIServer, chat_adapter_reply

    reply = chat_adapter_reply(program="ans = 1\nscale = ''")

    def answer(body):
        if args.delay:
            time.sleep(args.delay)
        return reply

    env = {**os.environ, "KDSPY_DATA_DIR": args.data_dir, "OPENAI_API_KEY": "stub",
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    kdspy = [sys.executable, "-m", "knapsack_dspy.cli.main"]
    with tempfile.TemporaryDirectory(prefix="serve_load_") as tmp, StubOpenAIServer(reply=answer) as stub:
        program = args.program
        if program is None:
            program = str(Path(tmp) / "prog.json")
            subprocess.run([*kdspy, "compile", "--dataset", "tatqa", "--pipeline", "pot", "--selector", "kate",
                            "-M", "4", "--budget", "2048", "--lm", "openai/stub-model", "--api-base", stub.base_url,
                            "-o", program], env=env, check=True, capture_output=True)
        port = _free_port()
        started = time.perf_counter()
        proc = subprocess.Popen([*kdspy, "serve", program, "--port", str(port), "--lm", "openai/stub-model",
                                 "--api-base", stub.base_url, "--no-cache", "--num-retries", "0",
                                 "--concurrency", str(args.concurrency), "--max-queue", str(args.max_queue)],
                                env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            _wait_healthy(port, proc, 300)
            print(f"kdspy serve ready in {time.perf_counter() - started:.1f} s (program loaded, embedder warm)")
            result = _load(port, _questions(args.data_dir), args.clients, args.seconds, args.max_requests)
            print(json.dumps(result, indent=2))
            malformed = {}
            for name, body in MALFORMED_REQUESTS.items():
                data = body if isinstance(body, bytes) else json.dumps(body).encode()
                status, payload = _request(port, "POST", "/answer", data)
                malformed[name] = status
                print(f"  {status}  {name}: {json.loads(payload).get('error', '')[:100]}")
            health = json.loads(_request(port, "GET", "/health", None)[1])
            print(f"health after: {json.dumps(health['queue'])}")
        finally:
            proc.terminate()
            proc.wait(30)
    bad = [name for name, status in malformed.items() if not 400 <= status < 500]
    print(f"\nkdspy serve --concurrency {args.concurrency} --max-queue {args.max_queue}, stub LM "
          f"{args.delay:g} s per answer:\n")
    print("| clients | seconds | answered/s | p50 s | p99 s | statuses | 5xx + connection errors | malformed: 4xx |")
    print("|---|---|---|---|---|---|---|---|")
    statuses = ", ".join(f"{status}: {n}" for status, n in sorted(result["statuses"].items(), key=str))
    print(f"| {args.clients} | {result['seconds']} | {result['answered_per_s']} | {result['p50_s']} | "
          f"{result['p99_s']} | {statuses} | {result['server_errors']} | {len(malformed) - len(bad)} of "
          f"{len(malformed)} |")
    for name in bad:
        print(f"NOT a 4xx: {name} ({malformed[name]})")
    return 0 if not bad and result["server_errors"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
