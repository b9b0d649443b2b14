"""What produced a results row, and refusing to mix rows of different origins in one results directory.

Every row a run writes records ``provenance``: the code (commit, and whether the working tree had uncommitted
changes), the versions of the packages the answers depend on (dspy, litellm, knapsack-dspy, and xllamacpp for
the embedded ``local/`` models), the model, the sha256 of its weights (``local/`` models: the catalogue's
digest, checked when the weights are joined, or a GGUF file's own, ``local_models.weights_sha256``), the DSPy
adapter and the seed.

The commit comes from git when the code is a checkout (``git rev-parse HEAD``; ``dirty`` from ``git status``),
or from ``knapsack_dspy/_commit.py``, which ``git archive`` stamps (an export has no ``.git``: ``dirty`` is
``None``, unknown).

A results directory holds one origin: :func:`provenance_conflict` compares a run's provenance with the rows
already there -- the environment part (code, packages) with every row, the run part (model, weights, adapter,
seed) with the rows of the same run -- and names the first difference. Rows written before provenance was
recorded have the provenance ``"unrecorded"``. ``kdspy bench --allow-mixed`` appends anyway.
"""

from __future__ import annotations

import functools
import json
import subprocess
from collections import Counter
from importlib import metadata
from pathlib import Path

from knapsack_dspy import _commit
from knapsack_dspy.bench.results.row_schema import as_row, rows_of
from knapsack_dspy.errors import KnapsackDspyError
from knapsack_dspy.llm.local_models import is_local_model, weights_sha256

__all__ = [
    "UNRECORDED",
    "ProvenanceMismatchError",
    "code_provenance",
    "describe",
    "describe_code",
    "provenance_conflict",
    "provenance_difference",
    "provenance_summary",
    "run_provenance",
]

UNRECORDED = "unrecorded"
ENVIRONMENT_KEYS = ("code", "packages")
RUN_KEYS = ("model", "model_sha256", "adapter", "seed")
_PACKAGES = ("dspy", "litellm", "knapsack-dspy")
_REPO = Path(_commit.__file__).resolve().parents[1]  # the checkout that holds the package


class ProvenanceMismatchError(KnapsackDspyError, ValueError):
    """The rows about to be written come from a different origin than the rows of the results directory."""


def _git(*args: str) -> str | None:
    try:
        done = subprocess.run(
            ["git", "-C", str(_REPO), *args], capture_output=True, text=True, timeout=30, check=True
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip()


@functools.lru_cache(maxsize=1)
def code_provenance() -> dict:
    """``{"commit": <hash or None>, "dirty": <bool or None>}`` of the running code (see the module doc)."""
    if not _commit.ARCHIVED_COMMIT.startswith("$Format"):
        return {"commit": _commit.ARCHIVED_COMMIT, "dirty": None}
    if (_REPO / ".git").exists():
        commit = _git("rev-parse", "HEAD")
        status = _git("status", "--porcelain", "--untracked-files=no")
        if commit:
            return {"commit": commit, "dirty": None if status is None else bool(status)}
    return {"commit": None, "dirty": None}


def _version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def run_provenance(model: str | None, *, adapter: str | None, seed: int | None) -> dict:
    """The provenance of a run's rows (``model`` None: no LM, selection only)."""
    local = bool(model) and is_local_model(model)
    packages = {name: _version(name) for name in _PACKAGES + (("xllamacpp",) if local else ())}
    return {
        "code": code_provenance(),
        "packages": packages,
        "model": model,
        "model_sha256": weights_sha256(model) if local else None,
        "adapter": adapter,
        "seed": seed,
    }


def _part(provenance, keys: tuple[str, ...]):
    if not isinstance(provenance, dict):
        return UNRECORDED
    return {key: provenance.get(key) for key in keys}


def describe_code(code: dict) -> str:
    """``code 1a2b3c4d5e6f (clean)`` / ``(uncommitted changes)`` / ``(working tree unknown)``."""
    commit = (code.get("commit") or "unknown commit")[:12]
    state = {True: "uncommitted changes", False: "clean"}.get(code.get("dirty"), "working tree unknown")
    return f"code {commit} ({state})"


def describe(provenance) -> str:
    """One line: ``code 1a2b3c4 (clean), dspy 3.4.1, litellm 1.80.0, ..., model local/... (weights sha256
    7f3e...), adapter ChatAdapter, seed 0``."""
    if not isinstance(provenance, dict):
        return "provenance not recorded (rows written before it was)"
    parts = [describe_code(provenance.get("code") or {})]
    parts += [f"{name} {version}" for name, version in (provenance.get("packages") or {}).items() if version]
    if provenance.get("model"):
        digest = provenance.get("model_sha256")
        parts.append(f"model {provenance['model']}" + (f" (weights sha256 {digest[:12]})" if digest else ""))
    for key in ("adapter", "seed"):
        if provenance.get(key) is not None:
            parts.append(f"{key} {provenance[key]}")
    return ", ".join(parts)


def provenance_difference(old, new) -> str:
    """The first difference between two provenances (or their parts): ``key: old -> new``, or ``same``."""
    if not isinstance(old, dict) or not isinstance(new, dict):
        return (
            f"{'unrecorded' if not isinstance(old, dict) else 'recorded'} -> "
            f"{'unrecorded' if not isinstance(new, dict) else 'recorded'}"
        )
    for key in new:
        if old.get(key) != new.get(key):
            before, after = (json.dumps(side.get(key), sort_keys=True) for side in (old, new))
            return f"{key}: {before} -> {after}"
    return "same"


def _shared_packages(environment, other):
    """``environment`` with only the packages ``other`` records too: a package one side does not record (the
    embedded runtime, recorded for LM runs of a local model only) is no difference between a selection-only row and
    an LM row of the same code."""
    if not isinstance(environment, dict) or not isinstance(other, dict):
        return environment
    mine, theirs = environment.get("packages"), other.get("packages")
    if not isinstance(mine, dict) or not isinstance(theirs, dict):
        return environment
    return {**environment, "packages": {name: mine[name] for name in mine if name in theirs}}


def provenance_conflict(rows, run: str, provenance: dict) -> str | None:
    """The first difference between ``provenance`` (of run ``run``) and the rows already stored, or None.
    Packages are compared where both record them (see :func:`_shared_packages`)."""
    new_run = _part(provenance, RUN_KEYS)
    for row in map(as_row, rows):
        old = row.provenance
        environment = _shared_packages(_part(old, ENVIRONMENT_KEYS), _part(provenance, ENVIRONMENT_KEYS))
        new_environment = _shared_packages(_part(provenance, ENVIRONMENT_KEYS), _part(old, ENVIRONMENT_KEYS))
        if environment != new_environment:
            difference = provenance_difference(environment, new_environment)
            return f"the rows there were written by other code or packages ({difference})"
        if row.run == run and _part(old, RUN_KEYS) != new_run:
            difference = provenance_difference(_part(old, RUN_KEYS), new_run)
            return f"this run's rows there used another model or setting ({difference})"
    return None


def provenance_summary(rows) -> list[tuple[str, int]]:
    """(description, row count) of each distinct provenance among ``rows``, most rows first."""
    counts = Counter(describe(row.provenance) for row in rows_of(rows))
    return counts.most_common()
