"""One writer per results directory: ``kdspy bench`` and ``kdspy bench --rescore`` hold ``<dir>/.lock``.

Two runs appending to one ``predictions.jsonl`` would each answer the questions the other has not stored yet
(duplicates, twice the LM time), and a re-score replacing the file under a running bench would lose the rows
appended meanwhile. The lock is an advisory OS file lock (``filelock``): it is released when the process
ends, however it ends, so a killed run never leaves a stale lock behind.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from filelock import FileLock, Timeout

from knapsack_dspy.bench.results.store import results_write_error
from knapsack_dspy.errors import KnapsackDspyError

LOCK_NAME = ".lock"


class ResultsBusyError(KnapsackDspyError, RuntimeError):
    """Another process is writing this results directory."""


@contextmanager
def results_lock(out_dir: str | os.PathLike) -> Iterator[Path]:
    """Hold ``out_dir``'s lock for the block; ``ResultsBusyError`` at once if another process holds it."""
    out_dir = Path(out_dir)
    path = out_dir / LOCK_NAME
    lock = FileLock(str(path), timeout=0)
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        lock.acquire()
    except Timeout:
        raise ResultsBusyError(f"another kdspy bench is writing {out_dir} (it holds {path}); wait for it to "
                               "finish or write elsewhere with --out") from None
    except OSError as exc:  # an uncreatable or read-only results directory
        raise results_write_error(Path(exc.filename or path), exc) from None
    try:
        yield path
    finally:
        lock.release()
