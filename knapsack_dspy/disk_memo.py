"""``DiskMemo``: results of pure computations kept on disk across processes, valid for this exact package code.

``BoundedMemo`` (``memo.py``) shares work within a process; a compile in a new process would still redo it.
Rendering a pool's demos (retrieval, gold-program synthesis and its checks, table layout, execution: ~10 ms a
demo, ~11 s for TAT-QA's 1,164) is a pure function of the example, the settings in the key and the package's
code, so its results are kept under ``<project cache>/<name>/<code fingerprint>``: the fingerprint
(:func:`package_fingerprint`, sha256 of every ``.py`` file of the package) changes with any code change, so a
stale result is never read (old folders are left for ``<name>``'s size limit to bound, or to be deleted).
An unwritable cache only costs time.
"""

from __future__ import annotations

import functools
import hashlib
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from knapsack_dspy import paths

__all__ = ["DiskMemo", "package_fingerprint"]

logger = logging.getLogger(__name__)
_MISSING = object()


@functools.lru_cache(maxsize=8)
def package_fingerprint(root: str | None = None) -> str:
    """sha256 over the relative paths and contents of every ``.py`` file under ``root`` (default: this
    package), in sorted order: the same for a checkout and an export of one commit, different after any edit."""
    base = Path(root) if root else Path(__file__).resolve().parent
    digest = hashlib.sha256()
    for path in sorted(base.rglob("*.py")):
        digest.update(str(path.relative_to(base)).encode() + b"\x00")
        digest.update(path.read_bytes() + b"\x00")
    return digest.hexdigest()


class DiskMemo:
    """``get_or_compute(key, compute)`` backed by a ``diskcache.Cache`` in ``<cache>/<name>/<fingerprint[:16]>``
    (opened on first use); ``key`` is a string (a digest of everything the value depends on besides the code)."""

    def __init__(self, name: str, size_limit: int = 2**28):
        self.name = name
        self.size_limit = size_limit
        self._cache = None
        self._failed = False

    def _disk(self):
        if self._cache is None and not self._failed:
            try:
                import diskcache  # light, but only needed when a value is asked for

                folder = paths.cache_dir() / self.name / package_fingerprint()[:16]
                self._cache = diskcache.Cache(str(folder), size_limit=self.size_limit)
            except Exception as exc:  # noqa: BLE001 - an unusable cache only costs time
                logger.warning("the %s cache is unavailable (%s); computing instead", self.name, exc)
                self._failed = True
        return self._cache

    def get_or_compute(self, key: str, compute: Callable[[], Any]) -> Any:
        disk = self._disk()
        if disk is not None:
            try:
                value = disk.get(key, _MISSING)
            except Exception:  # noqa: BLE001 - a corrupt entry: compute it again
                value = _MISSING
            if value is not _MISSING:
                return value
        value = compute()
        if disk is not None:
            try:
                disk.set(key, value)
            except Exception as exc:  # noqa: BLE001 - full disk, read-only cache: the value is still returned
                logger.warning("could not write the %s cache (%s)", self.name, exc)
        return value
