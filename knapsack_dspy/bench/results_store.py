"""Crash-safe ``predictions.jsonl``: one row per (run, example), appended as it finishes.

Each finished example is one JSON line, written and flushed at once, so a crash, Ctrl-C or a killed
process loses at most the example in flight. Lines reach the disk itself (fsync) at most ``fsync_interval_s``
apart and on close: an operating-system crash or power cut can lose the last second of rows, no more.
(An fsync per row cost 11.7 of the 30 s of a selection-only suite of 3,528 rows; LM rows take seconds each,
so for them every row is synced anyway.) On reopening, a torn last line (the process died while writing
it) is cut off, and the rows already present are skipped by the runner: re-running the same command
continues where it stopped, with no duplicate and no missing row.

Rows to do again (``redo``: by default none; the runner passes ``row_outcomes.redo_on_resume``, which picks
rows whose LM call failed transiently) count as not done. The row that answers such an example again
*replaces* the old one: the file is rewritten with the new line in the old one's place (a temporary file,
fsynced, renamed over the original), so the file holds each (run, example) once at every moment, and a kill
during the rewrite leaves the old file whole.

Every row is written: a value JSON cannot carry as UTF-8 (a lone surrogate such as ``"\\ud800"``, valid JSON
from a server but not encodable) is written with the offending strings escaped (``\\ud800`` as text) and the
row lists the fields in ``escaped``. A file that cannot be written (read-only, uncreatable directory, full
disk) is a :class:`ResultsFileError` naming the file and the fix; rows written before stay.

Rows are ``row_schema.ResultRow`` objects: what is appended is checked against the schema
(an undeclared field is a ``RowSchemaError``, a bug), and what is read is migrated to the current schema version
(a row of a newer version is a ``ResultsFileError`` naming the line). :func:`load_rows` reads a results file
(``predictions.jsonl`` or a committed ``predictions.jsonl.gz``) without writing anything: what scripts and
tools read rows with.

If the file is replaced while a run writes it (``git stash`` / ``git checkout`` of a committed results file,
a copy over it), the writer would go on appending to the replaced, now invisible file. Before every write the
store checks that its path still names the file it holds open; if not, it reopens the path and writes again
the rows of this run that the new file lacks (with a warning), so nothing is lost.
"""

from __future__ import annotations

import errno
import gzip
import json
import logging
import os
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path

from knapsack_dspy.bench.row_schema import ResultRow
from knapsack_dspy.messages import one_line

logger = logging.getLogger(__name__)

_MAX_ESCAPE_DEPTH = 50


class ResultsFileError(ValueError):
    """The results file cannot be read or written; one line naming the file and what to do."""


def results_write_error(path: Path, exc: OSError) -> ResultsFileError:
    """The one-line error for a results file (or report file) that could not be written."""
    if exc.errno == errno.ENOSPC:
        fix = "free some space and run the same command again (rows written so far are kept)"
    elif exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        fix = "make the directory writable, or write elsewhere with --out"
    else:
        fix = "check the directory, or write elsewhere with --out"
    return ResultsFileError(f"cannot write {path}: {exc.strerror or exc}; {fix}")


def _escaped(value, path: str, escaped: list[str], depth: int = 0):
    """``value`` with every string that UTF-8 cannot encode escaped (``backslashreplace``); the paths of the
    changed values are added to ``escaped``. Containers nested deeper than 50 levels become their repr."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
            return value
        except UnicodeEncodeError:
            escaped.append(path)
            return value.encode("utf-8", "backslashreplace").decode("utf-8")
    if depth > _MAX_ESCAPE_DEPTH and isinstance(value, (dict, list, tuple)):
        escaped.append(path)
        return one_line(repr(value), 1000)
    if isinstance(value, dict):
        return {_escaped(str(k), f"{path}.<key>", escaped, depth + 1):
                _escaped(v, f"{path}.{k}" if path else str(k), escaped, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_escaped(v, f"{path}[{i}]", escaped, depth + 1) for i, v in enumerate(value)]
    return value


def _text_of(value) -> str:
    try:
        return one_line(repr(value), 1000)
    except Exception:  # noqa: BLE001 -- a value whose repr fails still gets a row
        return f"<unprintable {type(value).__name__}>"


def encode_row(row: Mapping) -> str:
    """One JSON line for ``row`` (``\\n``-terminated, UTF-8 encodable), whatever its values hold."""
    row = row.to_json() if isinstance(row, ResultRow) else row
    try:
        line = json.dumps(row, ensure_ascii=False, default=str)
        line.encode("utf-8")
    except Exception:  # noqa: BLE001 -- lone surrogates, circular or unprintable values: escape, never drop
        escaped: list[str] = []
        fixed = _escaped(row, "", escaped)
        fixed["escaped"] = sorted(set(escaped))
        line = json.dumps(fixed, ensure_ascii=False, default=_text_of)
    return line + "\n"


def _row_of(text: str, where: str) -> ResultRow:
    """The row one results line holds; a line that is not one is a ResultsFileError naming ``where``."""
    try:
        return ResultRow.from_json(json.loads(text))
    except (ValueError, RecursionError) as exc:  # row_schema.RowSchemaError is a ValueError
        raise ResultsFileError(f"{where}: corrupt results line ({one_line(exc, 160)}); remove that line (or "
                               "restore the file, e.g. from git) to resume") from None


def results_file(path: str | os.PathLike) -> Path:
    """The results file of ``path``: the file itself, or a results directory's ``predictions.jsonl`` (else its
    ``predictions.jsonl.gz``, as results directories are committed)."""
    path = Path(path)
    if path.is_dir():
        plain = path / "predictions.jsonl"
        gz = path / "predictions.jsonl.gz"
        return gz if not plain.exists() and gz.exists() else plain
    return path


def load_rows(path: str | os.PathLike) -> list[ResultRow]:
    """Every row of a results file or directory (``results_file``; gzip when the name ends in ``.gz``), in file
    order, migrated to the current schema; nothing is written. A torn last line (a run still writing, or killed
    mid-line) is left out, as a resume would cut it. A missing file or a line that is not a results row is a
    ``ResultsFileError``."""
    path = results_file(path)
    try:
        with (gzip.open(path, "rb") if path.suffix == ".gz" else open(path, "rb")) as fh:
            data = fh.read()
    except (OSError, EOFError) as exc:
        raise ResultsFileError(f"cannot read {path}: {getattr(exc, 'strerror', None) or exc}") from None
    lines = data.split(b"\n")
    torn = lines.pop() if lines else b""  # the text after the last newline: empty, or a line being written
    rows = []
    for lineno, raw in enumerate(lines, 1):
        if raw.strip():
            rows.append(_row_of(_decoded(raw, f"{path}:{lineno}"), f"{path}:{lineno}"))
    if torn.strip():
        try:
            rows.append(ResultRow.from_json(json.loads(torn.decode("utf-8"))))
        except (ValueError, RecursionError):
            pass
    return rows


def _decoded(raw: bytes, where: str) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ResultsFileError(f"{where}: corrupt results line ({one_line(exc, 160)}); remove that line (or "
                               "restore the file, e.g. from git) to resume") from None


class ResultsStore:
    def __init__(self, path: str | os.PathLike, fsync: bool = True, fsync_interval_s: float = 1.0,
                 redo: Callable[[ResultRow], bool] | None = None):
        self.path = Path(path)
        self.fsync = fsync
        self.fsync_interval_s = float(fsync_interval_s)
        self.redo = redo or (lambda row: False)
        self._last_sync = time.monotonic()
        self._unsynced = False
        self._lock = threading.Lock()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._repair()
        except OSError as exc:
            raise results_write_error(self.path, exc) from None
        self._done, self._to_redo = self._index(self.rows())
        self._written: list[str] = []  # lines this store wrote: re-written if the file is replaced under us
        self._fh = self._open()

    @staticmethod
    def key(row: ResultRow) -> tuple:
        return row.run, row.example_id

    def _open(self):
        try:
            return open(self.path, "a", encoding="utf-8")  # held open for the run, closed by close()
        except OSError as exc:
            raise results_write_error(self.path, exc) from None

    def _index(self, rows) -> tuple[set, set]:
        done, redo = set(), set()
        for row in rows:
            (redo if self.redo(row) else done).add(self.key(row))
        return done - redo, redo

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

    def rows(self) -> Iterator[ResultRow]:
        """The stored rows, in file order, migrated to the current schema (``row_schema``)."""
        for _, row in self._lines():
            yield row

    def _lines(self) -> Iterator[tuple[str, ResultRow]]:
        """(line, row) of every non-blank line; a line that is not a results row is a ResultsFileError."""
        if not self.path.exists():
            return
        try:
            fh = open(self.path, "rb")
        except OSError as exc:
            raise ResultsFileError(f"cannot read {self.path}: {exc.strerror or exc}") from None
        with fh:
            for lineno, raw in enumerate(fh, 1):
                if not raw.strip():
                    continue
                line = _decoded(raw, f"{self.path}:{lineno}")
                yield line, _row_of(line, f"{self.path}:{lineno}")

    def done(self, run: str, example_id: str) -> bool:
        """The example has a row that stands (not one to do again)."""
        return (run, example_id) in self._done

    def to_redo(self, run: str, example_id: str) -> bool:
        """The example has a row that a new one will replace."""
        return (run, example_id) in self._to_redo

    def append(self, row: Mapping) -> bool:
        """Write one row (a ``ResultRow``, or its fields: checked by ``ResultRow.build``, a ``RowSchemaError``
        if they do not match the schema); returns False (and writes nothing) if that (run, example) is already
        stored. A row for an example whose stored row is to be done again replaces it."""
        row = row if isinstance(row, ResultRow) else ResultRow.build(row)
        line = encode_row(row)
        with self._lock:
            key = self.key(row)
            self._follow_replaced_file()
            if key in self._done:
                return False
            try:
                if key in self._to_redo:
                    self._replace(key, line)
                    self._to_redo.discard(key)
                else:
                    self._fh.write(line)
                    self._fh.flush()
                    self._unsynced = True
                    if self.fsync and time.monotonic() - self._last_sync >= self.fsync_interval_s:
                        self._sync()
            except OSError as exc:
                raise results_write_error(self.path, exc) from None
            self._done.add(key)
            self._written.append(line)
        return True

    def replace_all(self, rows: Iterable[ResultRow]) -> None:
        """Replace the whole file by ``rows`` (in that order) atomically: a crash leaves the old file whole."""
        lines = [encode_row(row) for row in rows]
        with self._lock:
            try:
                self._rewrite(lines)
            except OSError as exc:
                raise results_write_error(self.path, exc) from None
            self._done, self._to_redo = self._index(self.rows())

    def _rewrite(self, lines: list[str]) -> None:
        """Replace the file by ``lines`` atomically (temporary file, fsync, rename) and reopen it."""
        mode = self.path.stat().st_mode & 0o7777 if self.path.exists() else 0o644
        handle, tmp = tempfile.mkstemp(prefix=self.path.name + ".", suffix=".tmp", dir=self.path.parent)
        try:
            os.chmod(tmp, mode)
            with os.fdopen(handle, "w", encoding="utf-8") as out:
                out.writelines(lines)
                out.flush()
                os.fsync(out.fileno())
            os.replace(tmp, self.path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        self._fh.close()
        self._fh = self._open()
        self._last_sync = time.monotonic()
        self._unsynced = False

    def _replace(self, key: tuple, line: str) -> None:
        """The file with ``line`` in place of the row(s) of ``key``."""
        lines, placed = [], False
        for old_line, row in self._lines():
            if self.key(row) != key:
                lines.append(old_line if old_line.endswith("\n") else old_line + "\n")
            elif not placed:
                lines.append(line)
                placed = True
        if not placed:
            lines.append(line)
        self._rewrite(lines)

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
        missing = [line for line in self._written if self.key(_row_of(line, str(self.path))) not in present]
        self._fh = self._open()
        for line in missing:
            self._fh.write(line)
        self._fh.flush()
        if self.fsync:
            self._sync()
        self._done, self._to_redo = self._index(self.rows())
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
                    try:
                        self._sync()
                    except OSError as exc:
                        raise results_write_error(self.path, exc) from None
                self._fh.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
