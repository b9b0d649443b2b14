"""``TokenCountStore``: token counts kept on disk across processes, read and written a batch at a time.

A count is a pure function of the model's tokenizer and the prompt, so a re-run (a compile, a pool grown by a
few exemplars) reads the counts it already made instead of loading the model to count again. A pool's costs
are counted in batches of hundreds to thousands of prompts, and a key-value cache with one statement per key
(``diskcache``: a ``get`` and a ``set`` with its size check per prompt, ~30-100 us each) took a third of a batched
count's time; here a batch is one ``SELECT ... IN`` per 500 keys and one ``executemany`` in one transaction.

One SQLite file per model (``<cache>/token_counts/<model>.sqlite3``), write-ahead log, so several processes
(a bench's workers, Ray actors on one machine) share it. Keys are the sha256 of the prompt's key (32 bytes);
values are integers. At most ``max_rows`` counts are kept (the oldest written are dropped past it). A store
that cannot be opened or written (a read-only or full disk, a corrupt file) only costs time: it warns once and
forgets; a write that finds the file locked by another process past the timeout is skipped (the counts are made
again next time), with a warning. A connection is per thread and per process: a forked child opens its own
(SQLite connections must not cross a fork).
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path

__all__ = ["DEFAULT_MAX_ROWS", "TokenCountStore"]

logger = logging.getLogger(__name__)

DEFAULT_MAX_ROWS = 4_000_000  # ~90 bytes a count with its key and index: ~360 MB, a 10^6 pool's prompts four times
_READ_CHUNK = 500  # keys per SELECT (SQLite's limit on bound variables is 32,766 in recent builds, 999 in old ones)


class TokenCountStore:
    """Counts by key (``bytes``, e.g. a sha256 digest) in the SQLite file ``path`` (created with its folder)."""

    def __init__(self, path: str | Path, max_rows: int = DEFAULT_MAX_ROWS):
        if int(max_rows) < 1:
            raise ValueError(f"max_rows must be at least 1, got {max_rows!r}")
        self.path = Path(path)
        self.max_rows = int(max_rows)
        self._local = threading.local()  # one connection per thread (SQLite connections are not shared)
        self._failed = False
        self._warned_locked = False

    def _connection(self) -> sqlite3.Connection | None:
        if self._failed:
            return None
        conn = getattr(self._local, "conn", None)
        if conn is not None and getattr(self._local, "pid", None) != os.getpid():
            conn = None  # inherited through a fork: the parent's connection is not this process's to use
        if conn is None:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                conn = sqlite3.connect(str(self.path), timeout=60, isolation_level=None)
                conn.execute("PRAGMA journal_mode=WAL")
                conn.execute("PRAGMA synchronous=NORMAL")
                conn.execute("CREATE TABLE IF NOT EXISTS counts (key BLOB PRIMARY KEY, n INTEGER NOT NULL)")
            except (OSError, sqlite3.Error) as exc:
                self._fail("open", exc)
                return None
            self._local.conn, self._local.pid = conn, os.getpid()
        return conn

    def _fail(self, what: str, exc: Exception) -> None:
        if not self._failed:
            logger.warning("token counts on disk unavailable (%s %s: %s); counting without them", what, self.path,
                           exc)
        self._failed = True

    def get_many(self, keys: Sequence[bytes]) -> list[int | None]:
        """The stored count of each key, ``None`` where there is none."""
        conn = self._connection()
        if conn is None or not keys:
            return [None] * len(keys)
        found: dict[bytes, int] = {}
        try:
            for start in range(0, len(keys), _READ_CHUNK):
                part = list(dict.fromkeys(keys[start:start + _READ_CHUNK]))
                marks = ",".join("?" * len(part))
                found.update(conn.execute(f"SELECT key, n FROM counts WHERE key IN ({marks})", part).fetchall())
        except sqlite3.Error as exc:
            self._fail("read", exc)
            return [None] * len(keys)
        return [found.get(key) for key in keys]

    def put_many(self, items: Iterable[tuple[bytes, int]]) -> None:
        """Store the counts (one transaction), then drop the oldest past ``max_rows``."""
        rows = [(key, int(n)) for key, n in items]
        conn = self._connection()
        if conn is None or not rows:
            return
        try:
            conn.execute("BEGIN IMMEDIATE")
            try:
                conn.executemany("INSERT OR REPLACE INTO counts (key, n) VALUES (?, ?)", rows)
                top = conn.execute("SELECT max(rowid) FROM counts").fetchone()[0] or 0
                if top > self.max_rows:  # rowids grow with each insert: those far below the top are the oldest
                    conn.execute("DELETE FROM counts WHERE rowid <= ?", (top - self.max_rows,))
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:  # SQLite may have rolled back itself (a full disk, an I/O error)
                    try:
                        conn.execute("ROLLBACK")
                    except sqlite3.Error:
                        pass
                raise
        except sqlite3.OperationalError as exc:
            if "locked" in str(exc) or "busy" in str(exc):  # another process held the file past the timeout
                if not self._warned_locked:
                    logger.warning("token counts on disk: %s is locked by another process (%s); these counts are "
                                   "not kept", self.path, exc)
                    self._warned_locked = True
                return
            self._fail("write", exc)
        except sqlite3.Error as exc:
            self._fail("write", exc)

    def get(self, key: bytes) -> int | None:
        return self.get_many([key])[0]

    def put(self, key: bytes, n: int) -> None:
        self.put_many([(key, n)])

    def __len__(self) -> int:
        conn = self._connection()
        if conn is None:
            return 0
        try:
            return int(conn.execute("SELECT count(*) FROM counts").fetchone()[0])
        except sqlite3.Error as exc:
            self._fail("read", exc)
            return 0

    def __repr__(self) -> str:
        return f"TokenCountStore({str(self.path)!r}, max_rows={self.max_rows})"
