"""Committed rows, compressed: ``predictions.jsonl.xz`` (what ``benchmarks/commit_rows.sh`` writes) or, in results
committed before it, ``predictions.jsonl.gz``. A results directory holds at most one of them.

Why xz: every row repeats its run's spec, and a suite's spec lists its question ids (564 of them: ~22 KB per row).
Rows of one run are a few rows apart, further back than gzip's 32 KiB window reaches, so gzip cannot share them;
xz's dictionary (8 MiB at its default level) does. Issue 49's first 2,080 TAT-QA rows: 1,164,770 bytes gzipped,
350,732 with ``xz -6``.

The format is told by the file's name (``.xz`` / ``.gz``); both are read and written with the standard library
(``lzma``, ``gzip``), so nothing here needs the ``xz`` command.
"""

from __future__ import annotations

import gzip
import lzma
import zlib
from pathlib import Path
from typing import IO

ROWS_FILE = "predictions.jsonl"
#: the committed forms of ``ROWS_FILE``, the one ``commit_rows.sh`` writes first
COMPRESSED_ROWS_FILES = (ROWS_FILE + ".xz", ROWS_FILE + ".gz")
#: what reading a cut or damaged compressed file raises
DAMAGED_FILE_ERRORS = (EOFError, gzip.BadGzipFile, zlib.error, lzma.LZMAError)
_FORMATS = {".xz": "xz", ".gz": "gzip"}


def format_name(path: Path) -> str:
    """``"xz"``, ``"gzip"`` or ``"plain"``: how ``path`` is stored, by its name."""
    return _FORMATS.get(path.suffix, "plain")


def compressed_files(directory: Path) -> list[Path]:
    """The committed compressed rows files ``directory`` holds, in the order of :data:`COMPRESSED_ROWS_FILES`."""
    return [directory / name for name in COMPRESSED_ROWS_FILES if (directory / name).is_file()]


def open_for_reading(path: Path) -> IO[bytes]:
    """``path``'s bytes, decompressed as its name says."""
    if path.suffix == ".xz":
        return lzma.open(path, "rb")
    if path.suffix == ".gz":
        return gzip.open(path, "rb")
    return open(path, "rb")


def compressing_writer(path: Path, raw: IO[bytes]) -> IO[bytes]:
    """A writer onto the open file ``raw`` that compresses as ``path``'s name says (``raw`` itself for a plain
    file). Close it to finish the compressed stream; ``raw`` stays open. Output depends on the rows alone (no
    time stamp), so the same rows give the same bytes."""
    if path.suffix == ".xz":
        return lzma.LZMAFile(raw, "wb", preset=6)
    if path.suffix == ".gz":
        return gzip.GzipFile(fileobj=raw, mode="wb", mtime=0)
    return raw
