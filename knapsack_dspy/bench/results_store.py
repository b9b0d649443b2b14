"""Append-only, crash-safe ``predictions.jsonl``.

Each finished example is one JSON line, written and flushed at once, so a crash, Ctrl-C or a killed
process loses at most the example in flight. Lines reach the disk itself (fsync) at most ``fsync_interval_s``
apart and on close: an operating-system crash or power cut can lose the last second of rows, no more.
(An fsync per row cost 11.7 of the 30 s of a selection-only suite of 3,528 rows; LM rows take seconds each,
so for them every row is synced anyway.) On reopening, a torn last line (the process died while writing
it) is cut off, and the rows already present are skipped by the runner: re-running the same command
continues where it stopped, with no duplicate and no missing row.

If the file is replaced while a run writes it (``git stash`` / ``git checkout`` of a committed results file,
a copy over it), the writer would go on appending to the replaced, now invisible file. Before every write the
store checks that its path still names the file it holds open; if not, it reopens the path and writes again
the rows of this run that the new file lacks (with a warning), so nothing is lost.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

logger = logging.getLogger(__name__)


class ResultsStore:
    def __init__(self, path: str | os.PathLike, fsync: bool = True, fsync_interval_s: float = 1.0):
        self.path = Path(path)
        self.fsync = fsync
        self.fsync_interval_s = float(fsync_interval_s)
        self._last_sync = time.monotonic()
        self._unsynced = False
        self._lock = threading.Lock()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._repair()
        self._done = {self.key(row) for row in self.rows()}
        self._written: list[str] = []  # lines this store wrote: re-written if the file is replaced under us
        self._fh = open(self.path, "a", encoding="utf-8")

    @staticmethod
    def key(row: dict) -> tuple:
        return row["run"], row["example_id"]

    def _repair(self) -> None:
        """Drop a torn trailing line left by a crash mid-write."""
        if not self.path.exists():
            return
        data = self.path.read_bytes()
        if not data or data.endswith(b"\n"):
            return
        cut = data.rfind(b"\n") + 1
        with open(self.path, "r+b") as fh:
            fh.truncate(cut)

    def rows(self) -> Iterator[dict]:
        if not self.path.exists():
            return
        with open(self.path, encoding="utf-8") as fh:
            for lineno, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                try:
                    yield json.loads(line)
                except json.JSONDecodeError as exc:
                    raise ValueError(f"{self.path}:{lineno}: corrupt results line ({exc}); "
                                     "remove that line to resume") from exc

    def done(self, run: str, example_id: str) -> bool:
        return (run, example_id) in self._done

    def append(self, row: dict) -> bool:
        """Write one row; returns False (and writes nothing) if that (run, example) is already stored."""
        line = json.dumps(row, ensure_ascii=False, default=str) + "\n"
        with self._lock:
            key = self.key(row)
            self._follow_replaced_file()
            if key in self._done:
                return False
            self._fh.write(line)
            self._fh.flush()
            self._unsynced = True
            if self.fsync and time.monotonic() - self._last_sync >= self.fsync_interval_s:
                self._sync()
            self._done.add(key)
            self._written.append(line)
        return True

    def _follow_replaced_file(self) -> None:
        """Our path no longer names the file we hold open: reopen it and restore our rows it lacks."""
        try:
            current = os.stat(self.path)
        except FileNotFoundError:
            current = None
        held = os.fstat(self._fh.fileno())
        if current is not None and (current.st_dev, current.st_ino) == (held.st_dev, held.st_ino):
            return
        self._fh.close()
        self._repair()
        present = {self.key(row) for row in self.rows()}
        missing = [line for line in self._written if self.key(json.loads(line)) not in present]
        self._fh = open(self.path, "a", encoding="utf-8")
        for line in missing:
            self._fh.write(line)
        self._fh.flush()
        if self.fsync:
            self._sync()
        self._done = present | {self.key(json.loads(line)) for line in missing}
        logger.warning("%s was replaced while this run wrote it; reopened it and wrote again %d rows of this run "
                       "it lacked", self.path, len(missing))

    def _sync(self) -> None:
        os.fsync(self._fh.fileno())
        self._last_sync = time.monotonic()
        self._unsynced = False

    def close(self) -> None:
        with self._lock:
            if not self._fh.closed:
                if self.fsync and self._unsynced:
                    self._sync()
                self._fh.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
