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
(a row of a newer version is a ``ResultsFileError`` naming the line).

Committed results keep their rows compressed (``predictions.jsonl.xz``, or ``predictions.jsonl.gz`` in older
results: ``compressed_rows``). Every reader goes through :func:`load_rows` (a results file or directory, read
only; :func:`rows_file` names the file it reads), which reads the compressed file when there is no
``predictions.jsonl`` (that one wins when both are there: it is the one a run writes; a directory holding both
compressed forms and no plain file is an error). A run that resumes on a directory holding only the compressed
rows reads them from there (what is done is skipped) and, when it writes its first row, decompresses them to
``predictions.jsonl`` (atomically, the compressed file left as it was, a warning saying so) and appends there:
``benchmarks/commit_rows.sh`` compresses and commits it again. A run that writes nothing changes nothing.

If the file is replaced while a run writes it (``git stash`` / ``git checkout`` of a committed results file,
a copy over it), the writer would go on appending to the replaced, now invisible file. Before every write the
store checks that its path still names the file it holds open; if not, it reopens the path and writes again
the rows of this run that the new file lacks (with a warning), so nothing is lost.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path

from knapsack_dspy.bench.results.compressed_rows import (
    COMPRESSED_ROWS_FILES,
    DAMAGED_FILE_ERRORS,
    ROWS_FILE,
    compressed_files,
    compressing_writer,
    format_name,
    open_for_reading,
)
from knapsack_dspy.bench.results.row_schema import ResultRow
from knapsack_dspy.errors import KnapsackDspyError
from knapsack_dspy.messages import one_line

logger = logging.getLogger(__name__)

_MAX_ESCAPE_DEPTH = 50


__all__ = ["COMPRESSED_ROWS_FILES", "ROWS_FILE", "ResultsFileError", "ResultsStore", "committed_rows",
           "decompress_rows", "encode_row", "load_rows", "results_write_error", "rows_file"]


class ResultsFileError(KnapsackDspyError, ValueError):
    """The results file cannot be read or written; one line naming the file and what to do."""


def committed_rows(directory: str | os.PathLike) -> Path | None:
    """The compressed rows file a results directory was committed with (``predictions.jsonl.xz`` or ``.gz``), or
    None. Both at once is a ``ResultsFileError``: which one holds the rows is not for a reader to guess."""
    found = compressed_files(Path(directory))
    if len(found) > 1:
        raise ResultsFileError(f"{directory} holds both {found[0].name} and {found[1].name}: keep the one with all "
                               f"the rows (git rm the other)")
    return found[0] if found else None


def rows_file(path: str | os.PathLike) -> Path:
    """The rows file of ``path``: a ``.jsonl`` / ``.jsonl.xz`` / ``.jsonl.gz`` file is itself; any other path is a
    results directory, whose rows file is ``predictions.jsonl``, else its :func:`committed_rows` (how committed
    results keep their rows) when only that one exists, else the (missing) ``predictions.jsonl``."""
    path = Path(path)
    if path.name.endswith((".jsonl", ".jsonl.xz", ".jsonl.gz")) and not path.is_dir():
        return path
    plain = path / ROWS_FILE
    if plain.exists():
        return plain
    return committed_rows(path) or plain


def _open_for_reading(path: Path):
    try:
        return open_for_reading(path)
    except OSError as exc:
        raise _read_error(path, exc) from None


def _read_error(path: Path, exc: OSError) -> ResultsFileError:
    return ResultsFileError(f"cannot read {path}: {exc.strerror or exc}")


def _corrupt_line(where: str, exc: BaseException) -> ResultsFileError:
    return ResultsFileError(f"{where}: corrupt results line ({one_line(exc, 160)}); remove that line (or restore "
                            "the file, e.g. from git) to resume")


def _row_of(text: str, where: str) -> ResultRow:
    """The row one results line holds; a line that is not one is a ResultsFileError naming ``where``."""
    try:
        return ResultRow.from_json(json.loads(text))
    except (ValueError, RecursionError) as exc:  # row_schema.RowSchemaError is a ValueError
        raise _corrupt_line(where, exc) from None


def _parsed_lines(path: Path, *, torn_tail_ok: bool) -> Iterator[tuple[str, ResultRow]]:
    """(line, row) of every non-blank line of ``path`` (plain or compressed), the row migrated to the current schema
    (``row_schema``). A line that is not a results row is a ResultsFileError; with ``torn_tail_ok`` an unreadable
    *last* line without its newline (a run still writing it, or killed mid-line) is left out, as a resume would
    cut it off."""
    fh = _open_for_reading(path)
    with fh:
        try:
            lineno = 0
            for lineno, raw in enumerate(fh, 1):
                if not raw.strip():
                    continue
                try:
                    line = raw.decode("utf-8")
                    row = ResultRow.from_json(json.loads(line))
                except (ValueError, RecursionError) as exc:  # UnicodeDecodeError, RowSchemaError: ValueErrors
                    if torn_tail_ok and not raw.endswith(b"\n"):  # only the last line can lack it
                        return
                    raise _corrupt_line(f"{path}:{lineno}", exc) from None
                yield line, row
        except DAMAGED_FILE_ERRORS as exc:
            raise ResultsFileError(f"{path}: not a whole {format_name(path)} file after line {lineno} "
                                   f"({one_line(exc, 120)}); restore it (e.g. from git)") from None
        except OSError as exc:
            raise ResultsFileError(f"cannot read {path}: {exc.strerror or exc}") from None


def load_rows(path: str | os.PathLike) -> list[ResultRow]:
    """Every row of a results file or directory (its :func:`rows_file`: ``predictions.jsonl``, or the committed
    ``predictions.jsonl.xz`` / ``.gz``), in file order, migrated to the current schema; nothing is written. A torn
    last line (a run still writing, or killed mid-line) is left out, as a resume would cut it off. A missing file, a
    damaged compressed file or a line that is not a results row is a one-line ``ResultsFileError``. The one reader of
    stored rows outside a ``ResultsStore``: the package's readers and the scripts in ``benchmarks/`` use it."""
    return [row for _, row in _parsed_lines(rows_file(path), torn_tail_ok=True)]


def decompress_rows(out_dir: str | os.PathLike) -> Path | None:
    """When ``out_dir`` holds only its committed, compressed rows (:func:`committed_rows`), write them to
    ``predictions.jsonl`` (atomically: a temporary file, then a rename; the compressed file is left as it was) so a
    run can append to them. Returns the file written, or None when there was nothing to do."""
    plain = Path(out_dir) / ROWS_FILE
    if plain.exists():
        return None
    compressed = committed_rows(out_dir)
    if compressed is None:
        return None
    source = _open_for_reading(compressed)  # a file that cannot be read: "cannot read" it, not "cannot write"
    tmp = None
    try:
        handle, tmp = tempfile.mkstemp(prefix=ROWS_FILE + ".", suffix=".tmp", dir=plain.parent)
        with os.fdopen(handle, "wb") as out:
            _copy_rows(source, out, compressed)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(tmp, compressed.stat().st_mode & 0o7777)
        os.replace(tmp, plain)
    except OSError as exc:
        raise results_write_error(plain, exc) from None
    finally:
        source.close()
        if tmp is not None:  # gone after the rename; left behind by a failure
            Path(tmp).unlink(missing_ok=True)
    return plain


def _copy_rows(source, out, compressed: Path) -> None:
    """``source`` (the compressed rows, open) into ``out``; a damaged or unreadable ``compressed`` is a
    ResultsFileError naming it (an OSError out of here is the writing's)."""
    while True:
        try:
            chunk = source.read(1 << 20)
        except DAMAGED_FILE_ERRORS as exc:
            raise ResultsFileError(f"{compressed}: not a whole {format_name(compressed)} file "
                                   f"({one_line(exc, 120)}); restore it (e.g. from git)") from None
        except OSError as exc:
            raise _read_error(compressed, exc) from None
        if not chunk:
            return
        out.write(chunk)


def _write_lines_atomically(path: Path, lines: Iterable[str]) -> None:
    """``lines`` in place of ``path``, in its form (an ``.xz`` / ``.gz`` compressed), atomically: a temporary file with
    the original's permissions, fsynced, renamed over it; a crash leaves the old file whole."""
    mode = path.stat().st_mode & 0o7777 if path.exists() else 0o644
    handle, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
    try:
        os.chmod(tmp, mode)  # mkstemp makes it 0600
        with os.fdopen(handle, "wb") as raw:
            out = compressing_writer(path, raw)
            for line in lines:
                out.write(line.encode("utf-8"))
            if out is not raw:
                out.close()  # ends the compressed stream; the file itself stays open
            raw.flush()
            os.fsync(raw.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


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
        # committed rows (predictions.jsonl.xz / .gz alone) are decompressed when the first row is written, not before:
        # a run that stops before writing (refused, nothing to do) leaves the directory as it was
        self._fh = None if self._compressed_source() is not None else self._open()
        if self._fh is None and not os.access(self.path.parent, os.W_OK):
            raise ResultsFileError(f"cannot write {self.path}: the directory is not writable; make it writable, or "
                                   "write elsewhere with --out")

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

    def _compressed_source(self) -> Path | None:
        """The committed compressed rows this store reads while its own file does not exist yet."""
        if self.path.name == ROWS_FILE and not self.path.exists():
            return committed_rows(self.path.parent)
        return None

    def _lines(self) -> Iterator[tuple[str, ResultRow]]:
        """(line, row) of every non-blank line; a line that is not a results row is a ResultsFileError."""
        source = self.path if self.path.exists() else self._compressed_source()
        if source is None:
            return
        yield from _parsed_lines(source, torn_tail_ok=False)

    def _handle(self):
        """The file rows are appended to, opened on first use when the rows were committed compressed
        (decompressed to ``predictions.jsonl`` first, with a warning)."""
        if self._fh is None:
            source = self._compressed_source()
            if decompress_rows(self.path.parent) is not None:
                logger.warning("%s held only %s: decompressed it to %s, which this run appends to (%s is left as "
                               "it was; benchmarks/commit_rows.sh compresses and commits the rows again)",
                               self.path.parent, source.name if source else "compressed rows", ROWS_FILE,
                               source.name if source else "it")
            self._fh = self._open()
        return self._fh

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
                    handle = self._handle()
                    handle.write(line)
                    handle.flush()
                    self._unsynced = True
                    if self.fsync and time.monotonic() - self._last_sync >= self.fsync_interval_s:
                        self._sync()
            except OSError as exc:
                raise results_write_error(self.path, exc) from None
            self._done.add(key)
            self._written.append(line)
        return True

    def replace_all(self, rows: Iterable[ResultRow]) -> None:
        """Replace the whole file by ``rows`` (in that order) atomically: a crash leaves the old file whole.
        Committed rows read from ``predictions.jsonl.xz`` / ``.gz`` alone (nothing written yet) are rewritten
        there, compressed the same way (``kdspy bench --rescore``)."""
        lines = [encode_row(row) for row in rows]
        with self._lock:
            compressed = self._compressed_source() if self._fh is None else None
            try:
                if compressed is not None:
                    _write_lines_atomically(compressed, lines)
                else:
                    self._rewrite(lines)
            except OSError as exc:
                raise results_write_error(compressed or self.path, exc) from None
            self._done, self._to_redo = self._index(self.rows())

    def _rewrite(self, lines: list[str]) -> None:
        """Replace the file by ``lines`` atomically (temporary file, fsync, rename) and reopen it."""
        _write_lines_atomically(self.path, lines)
        if self._fh is not None:
            self._fh.close()
        self._fh = self._open()
        self._last_sync = time.monotonic()
        self._unsynced = False

    def _replace(self, key: tuple, line: str) -> None:
        """The file with ``line`` in place of the row(s) of ``key``."""
        self._handle()  # committed rows: decompressed first
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
        if self._fh is None:  # nothing written yet (committed rows not decompressed): nothing to follow
            return
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
            if self._fh is not None and not self._fh.closed:
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
