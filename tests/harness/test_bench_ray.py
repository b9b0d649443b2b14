"""``kdspy bench --ray``: Ray actors answer, the driver alone writes; the rows are the ones one worker writes; a
worker killed mid-run and a driver killed mid-run lose and duplicate nothing.

One local Ray cluster (``ray.init(num_cpus=2)``, ~8 s to start) serves the whole module. The LM is the OpenAI
stub server on 127.0.0.1; the embedder and token counter are the cheap stand-ins of ``helpers``, shipped to the
actors (the tests folder reaches them on ``PYTHONPATH``).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from scaleout_helpers import (
    HAVE_DATA,
    DyingEmbedder,
    SlowReply,
    deterministic_reply,
    rows_of,
    run_stub_suite,
    same_fields,
    stub_suite,
    tatqa_splits,
)

from knapsack_dspy.testing.openai_stub_server import StubOpenAIServer

ray = pytest.importorskip("ray")
pytestmark = [pytest.mark.ray, pytest.mark.skipif(not HAVE_DATA, reason="data not found")]


@pytest.fixture(scope="module")
def cluster():
    """A local Ray cluster of 2 CPUs for the module; its address."""
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
    try:
        yield ray.get_runtime_context().gcs_address
    finally:
        ray.shutdown()


@pytest.fixture(scope="module")
def splits():
    return tatqa_splits()


def test_ray_workers_write_the_rows_one_worker_writes(tmp_path, cluster, splits):
    suite = stub_suite()
    with StubOpenAIServer(reply=deterministic_reply) as server:
        run_stub_suite(tmp_path / "one", suite, splits, server.base_url, workers=1, log=lambda m: None)
    slow = SlowReply(0.2)
    with StubOpenAIServer(reply=slow) as server:
        run_stub_suite(tmp_path / "ray", suite, splits, server.base_url, workers=3, ray=cluster, log=lambda m: None)
    one, on_ray = rows_of(tmp_path / "one"), rows_of(tmp_path / "ray")
    assert len(one) == 24 and set(one) == set(on_ray)
    assert same_fields(one) == same_fields(on_ray)
    for key, row in one.items():  # the workers' own provenance, the same as the driver's
        assert (on_ray[key]["provenance"], on_ray[key]["spec"]) == (row["provenance"], row["spec"])
    assert 2 <= slow.peak <= 3


def test_workers_killed_mid_run_lose_and_duplicate_nothing(tmp_path, cluster, splits, monkeypatch):
    """The actor answering one question dies (os._exit) the first time: the question goes to another actor. An
    example that kills every actor it meets gets an error row after MAX_ATTEMPTS; the run goes on."""
    from knapsack_dspy.bench.execution import ray_workers

    monkeypatch.setattr(ray_workers, "MAX_ATTEMPTS", 2)
    once, always = splits["eval"][5], splits["eval"][2]
    embedder = DyingEmbedder({once.question: str(tmp_path / "died-once"), always.question: None})
    said = []
    suite = stub_suite(selector="kate", limit=8)
    with StubOpenAIServer(reply=SlowReply(0.1)) as server:
        run_stub_suite(tmp_path / "out", suite, splits, server.base_url, embedder=embedder, workers=2, ray=cluster,
            log=said.append)
    assert (tmp_path / "died-once").exists()  # a worker did die
    assert sum("a Ray worker died" in line and "another worker" in line for line in said) == 1 + 2
    rows = rows_of(tmp_path / "out")
    assert len(rows) == 8
    failed = {key: row for key, row in rows.items() if row.get("error")}
    assert set(failed) == {(spec.key, always.id) for spec in suite.runs}
    for row in failed.values():
        assert row["error_kind"] == "internal" and "died 2 times" in row["error"]


_DRIVER = """
import sys
sys.path.insert(0, {tests!r})
from scaleout_helpers import run_stub_suite, stub_suite, tatqa_splits

run_stub_suite(sys.argv[1], stub_suite(name="kill"), tatqa_splits(), sys.argv[2], workers=2, ray=sys.argv[3])
"""


def _lines(out: Path) -> list[str]:
    path = out / "predictions.jsonl"
    return path.read_text().split("\n") if path.exists() else []


def test_a_driver_killed_mid_run_then_resumed_writes_each_row_once(tmp_path, cluster):
    """SIGKILL of the driver (a process of its own, on the module's cluster) after some rows; the same command
    again: every expected row exactly once, every line whole."""
    driver = tmp_path / "driver.py"
    driver.write_text(_DRIVER.format(tests=str(Path(__file__).parents[1])))
    out = tmp_path / "out"
    env = {**os.environ, "KDSPY_CACHE_DIR": str(tmp_path / "cache"),
           "PYTHONPATH": os.pathsep.join([str(Path(__file__).resolve().parents[2]), os.environ.get("PYTHONPATH", "")])}
    with StubOpenAIServer(reply=SlowReply(0.3)) as server:
        proc = subprocess.Popen([sys.executable, str(driver), str(out), server.base_url, cluster], env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.time() + 120
        while time.time() < deadline and proc.poll() is None and len([x for x in _lines(out) if x]) < 5:
            time.sleep(0.05)
        assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        lines = _lines(out)
        whole = [json.loads(line) for line in lines[:-1]]  # the last piece: "" or a line cut mid-write
        assert 5 <= len(whole) < 24
        assert len({(r["run"], r["example_id"]) for r in whole}) == len(whole)
        done = subprocess.run([sys.executable, str(driver), str(out), server.base_url, cluster], env=env,
                              capture_output=True, text=True, timeout=300, check=False)
        assert done.returncode == 0, done.stderr[-2000:]
    rows = rows_of(out)  # every line parses, each pair once
    assert len(rows) == 24 and not any(r.get("error") for r in rows.values())
    for row in whole:
        assert rows[(row["run"], row["example_id"])] == row  # rows written before the kill are kept as they were
