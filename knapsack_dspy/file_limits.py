"""Bounded reading of the files we are given: decompressed size, JSON nesting depth, integer digits.

Every reader of user files (data loaders, gold / prediction files of the scorers, ``kdspy ask`` inputs,
program JSON, suite TOML) reads through here, so that no file, however it was made, can exhaust memory or
the interpreter's stack:

- **Size**: a file is read (and a gzip file decompressed, as a stream) up to a limit, by default
  :data:`DEFAULT_MAX_FILE_MB` MB (``$KDSPY_MAX_FILE_MB`` or the ``limit_bytes`` argument override it); a
  2 MB gzip file that inflates to 2 GiB stops at the limit instead of being inflated whole.
- **Nesting**: a JSON text is scanned for its nesting depth *before* it is parsed (strings skipped; the
  brackets counted with numpy in chunks), so 100,000 ``[`` are refused with the record they are in instead
  of raising ``RecursionError`` from deep inside ``json``. Real files nest 5-8 levels; the limit is
  :data:`MAX_JSON_DEPTH`.
- **Values**: parsed JSON takes up to ~70 bytes of memory per value (``["a","a",...]``: a string object and
  a list slot per 4 bytes of text), so the number of values -- containers, items and keys, counted before
  parsing -- is limited too, to :data:`VALUES_PER_MB` per megabyte of the size limit (8,000,000 at 200 MB;
  the same number of fields for CSV and JSON lines): with the size limit this keeps the peak memory of
  reading any file under about 1 GB. Real files hold 15,000-55,000 values per MB.
- **Integer digits**: Python refuses to convert an integer of more than 4,300 digits
  (``sys.get_int_max_str_digits``) and ``json`` would raise a bare ``ValueError`` naming no file. Such an
  integer is parsed to a :class:`LongInteger` instead, an inert stand-in that the record checks of the
  loaders and scorers reject with the file, the record and the field.

Errors are :class:`FileLimitError` (a ``ValueError``); its message names the limit and how to raise it but
not the file: every caller wraps it in its own error type, which adds the file (and the record).
"""

from __future__ import annotations

import gzip
import json
import os
import zlib
from pathlib import Path
from typing import Any

from knapsack_dspy.errors import KnapsackDspyError

__all__ = [
    "DEFAULT_MAX_FILE_MB",
    "GZIP_ERRORS",
    "MAX_FILE_MB_ENV",
    "MAX_INT_DIGITS",
    "MAX_JSON_DEPTH",
    "VALUES_PER_MB",
    "DuplicateKeyError",
    "FileLimitError",
    "LongInteger",
    "check_text_values",
    "max_file_bytes",
    "max_values",
    "parse_json",
    "read_file_bytes",
    "read_file_text",
    "read_json",
]

MAX_FILE_MB_ENV = "KDSPY_MAX_FILE_MB"
DEFAULT_MAX_FILE_MB = 200
MAX_JSON_DEPTH = 100
VALUES_PER_MB = 40_000  # JSON containers + items + keys (or CSV fields) per MB of the size limit
MAX_INT_DIGITS = 4300  # Python's own default limit for int <-> str conversion
_GZIP_MAGIC = b"\x1f\x8b"
_CHUNK = 1 << 22  # numpy chunk for the depth scan


class FileLimitError(KnapsackDspyError, ValueError):
    """A file exceeds a reading limit (size, values, nesting depth); the message names the limit."""


class LongInteger:
    """An integer literal of more than :data:`MAX_INT_DIGITS` digits, left unconverted (see the module)."""

    __slots__ = ("digits",)

    def __init__(self, literal: str):
        self.digits = len(literal.lstrip("-"))

    def __repr__(self) -> str:
        return f"<integer of {self.digits} digits>"

    __str__ = __repr__


def max_file_bytes() -> int:
    """The size limit in bytes: ``$KDSPY_MAX_FILE_MB`` (a positive number of megabytes) or the default."""
    text = os.environ.get(MAX_FILE_MB_ENV, "").strip()
    if not text:
        return DEFAULT_MAX_FILE_MB * 1_000_000
    try:
        megabytes = float(text)
    except ValueError:
        megabytes = -1.0
    if not megabytes > 0:
        raise FileLimitError(f"${MAX_FILE_MB_ENV} must be a positive number of megabytes, got {text!r}")
    return int(megabytes * 1_000_000)


def max_values() -> int:
    """The value limit: :data:`VALUES_PER_MB` per megabyte of the size limit (8,000,000 at 200 MB)."""
    return int(VALUES_PER_MB * max_file_bytes() / 1_000_000)


def _values_text(limit: int, what: str) -> str:
    return (
        f"holds more than {limit:,} {what}, the value limit ({VALUES_PER_MB:,} per MB of the size limit; "
        f"{MAX_FILE_MB_ENV} raises both)"
    )


def _limit_text(limit: int) -> str:
    return f"{limit / 1_000_000:g} MB, the size limit (raise it with {MAX_FILE_MB_ENV}=<megabytes>)"


def read_file_bytes(path: str | os.PathLike, *, limit_bytes: int | None = None) -> bytes:
    """The bytes of ``path``, gunzipped when it is gzip (by its magic bytes or a ``.gz`` name).

    Raises ``OSError`` as ``open`` does, ``gzip.BadGzipFile`` / ``EOFError`` / ``zlib.error`` for a broken
    gzip file, and :class:`FileLimitError` when the (decompressed) content exceeds the limit; nothing beyond
    the limit is read.
    """
    limit = max_file_bytes() if limit_bytes is None else int(limit_bytes)
    path = Path(path)
    with open(path, "rb") as raw:
        head = raw.read(2)
        raw.seek(0)
        if head == _GZIP_MAGIC or path.name.lower().endswith(".gz"):
            if (
                head == _GZIP_MAGIC and _stated_gzip_size(raw) > limit
            ):  # the trailer's size of the (last) member: refused unread
                raise FileLimitError(f"decompresses to more than {_limit_text(limit)}")
            with gzip.GzipFile(fileobj=raw) as stream:
                data = stream.read(limit + 1)  # what the trailer may understate is stopped here
            if len(data) > limit:
                raise FileLimitError(f"decompresses to more than {_limit_text(limit)}")
            return data
        if path.is_file():
            if path.stat().st_size > limit:
                raise FileLimitError(f"is larger than {_limit_text(limit)}")
            data = raw.read()  # sized from the file's size: no limit-sized buffer to shrink afterwards
        else:  # a pipe or another special file
            data = raw.read(limit + 1)
    if len(data) > limit:
        raise FileLimitError(f"is larger than {_limit_text(limit)}")
    return data


def _stated_gzip_size(raw) -> int:
    """The uncompressed size a gzip file's trailer states (ISIZE: its last member's size modulo 2**32), or 0
    when the file cannot be seeked; ``raw`` is left at the start."""
    try:
        raw.seek(-4, os.SEEK_END)
        stated = int.from_bytes(raw.read(4), "little")
    except OSError:
        stated = 0
    raw.seek(0)
    return stated


#: Errors a broken gzip stream raises (besides ``OSError``): callers catch these with ``OSError``.
GZIP_ERRORS = (EOFError, zlib.error, gzip.BadGzipFile)


def read_file_text(path: str | os.PathLike, *, limit_bytes: int | None = None) -> str:
    """:func:`read_file_bytes` decoded as UTF-8 (a leading byte-order mark dropped); ``UnicodeDecodeError``
    for bytes that are not UTF-8."""
    return read_file_bytes(path, limit_bytes=limit_bytes).decode("utf-8-sig")


# -- JSON ------------------------------------------------------------------------------------------------
_KEEP = b"[]{},:"
_DELETE = bytes(b for b in range(256) if b not in _KEEP)
_SLICE = 1 << 20  # bytes of JSON stripped of strings at a time (bounds the pieces held at once)


def _structure(data: bytes) -> bytes:
    """The brackets, commas and colons of ``data`` that are outside JSON strings, in order.

    In slices of a megabyte (a slice never ends inside a run of backslashes): escaped backslashes and escaped
    quotes are blanked out, the slice is split at the remaining quotes, and the pieces outside strings are
    kept (whether a slice starts inside a string is carried over from the previous one)."""
    if b'"' not in data:
        return data.translate(None, _DELETE)
    pieces, inside, start = [], False, 0
    while start < len(data):
        end = min(start + _SLICE, len(data))
        while end < len(data) and data[end - 1] == 0x5C:  # a backslash: keep its run in this slice
            end += 1
        parts = data[start:end].replace(b"\\\\", b"__").replace(b'\\"', b"__").split(b'"')
        pieces.append(b"".join(parts[1 if inside else 0 :: 2]).translate(None, _DELETE))
        inside ^= len(parts) % 2 == 0  # an odd number of quotes: the next slice starts on the other side
        start = end
    return b"".join(pieces)


def _structure_problem(data: bytes, max_depth: int, limit: int | None = None) -> str | None:
    """What makes ``data`` (JSON) too costly to parse: more than ``limit`` values, or nesting deeper
    than ``max_depth`` (``"nests record 3 deeper ..."`` for a top-level array, ``"nests deeper ..."``);
    ``None`` when nothing does."""
    limit = max_values() if limit is None else limit
    opens = data.count(b"[") + data.count(b"{")
    if opens <= max_depth and opens + data.count(b",") + data.count(b":") < limit:
        return None  # (counts that include strings' characters can only overstate)
    import numpy as np

    # brackets, commas and colons outside strings (one copy when there is no string at all)
    structure = _structure(data)
    values = len(structure) - structure.count(b"]") - structure.count(b"}") + 1
    if values > limit:
        return _values_text(limit, "JSON values (containers, items and keys)")
    step = np.zeros(256, dtype=np.int8)
    step[list(b"[{")] = 1
    step[list(b"]}")] = -1
    depth, records = 0, 0
    top_level_array = structure[:1] == b"["
    for start in range(0, len(structure), _CHUNK):
        chunk = np.frombuffer(
            structure, dtype=np.uint8, count=min(_CHUNK, len(structure) - start), offset=start
        )
        levels = np.cumsum(step[chunk], dtype=np.int64) + depth
        too_deep = np.flatnonzero(levels > max_depth)
        commas = (chunk == ord(",")) & (levels == 1)
        if too_deep.size:
            record = records + int(np.count_nonzero(commas[: too_deep[0]]))
            what = f"record {record} " if top_level_array else ""
            return f"nests {what}deeper than {max_depth} levels, the nesting limit"
        records += int(np.count_nonzero(commas))
        depth = int(levels[-1])
    return None


def check_text_values(text: str, limit: int | None = None) -> None:
    """:class:`FileLimitError` when a JSON-lines or CSV text holds more than the value limit of values or
    fields (counted as separators, brackets and line ends, which can only overstate)."""
    limit = max_values() if limit is None else limit
    if sum(text.count(mark) for mark in ",:[{\n") > limit:
        raise FileLimitError(_values_text(limit, "values (JSON values or CSV fields)"))


def _parse_int(literal: str):
    if len(literal) - (literal[:1] == "-") > MAX_INT_DIGITS:
        return LongInteger(literal)
    return int(literal)


class DuplicateKeyError(KnapsackDspyError, ValueError):
    """A JSON object names the same key twice (``key``); ``json`` would silently keep the last value."""

    def __init__(self, key: str):
        super().__init__(f"duplicate key {key!r}")
        self.key = key


def _unique_pairs(pairs: list) -> dict:
    value = dict(pairs)
    if len(value) != len(pairs):
        seen: set = set()
        for key, _ in pairs:
            if key in seen:
                raise DuplicateKeyError(key)
            seen.add(key)
    return value


def _check_depth(data: bytes, max_depth: int) -> None:
    problem = _structure_problem(data, max_depth)
    if problem is not None:
        raise FileLimitError(problem)


def _loads(text: str, unique_keys: bool, max_depth: int):
    hook: dict[str, Any] = {"object_pairs_hook": _unique_pairs} if unique_keys else {}
    try:
        try:
            return json.loads(text, **hook)
        except (json.JSONDecodeError, DuplicateKeyError):
            raise
        except ValueError:  # an integer past Python's digit limit: parse again, keeping such integers aside
            return json.loads(text, parse_int=_parse_int, **hook)
    except RecursionError:  # not reached below the depth limit; kept so nothing escapes as a traceback
        raise FileLimitError(f"nests too deeply to parse (limit {max_depth} levels)") from None


def parse_json(text: str | bytes, *, max_depth: int = MAX_JSON_DEPTH, unique_keys: bool = False):
    """``json.loads(text)`` with the nesting depth checked first (:class:`FileLimitError` naming the record)
    and over-long integers parsed to :class:`LongInteger`. ``unique_keys``: an object naming a key twice is a
    :class:`DuplicateKeyError`. ``json.JSONDecodeError`` (and ``UnicodeDecodeError`` for bytes that are not
    UTF-8) as ``json.loads``."""
    _check_depth(text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text, max_depth)
    if isinstance(text, bytes):
        text = text.decode("utf-8-sig")
    return _loads(text, unique_keys, max_depth)


def read_json(
    path: str | os.PathLike,
    *,
    limit_bytes: int | None = None,
    max_depth: int = MAX_JSON_DEPTH,
    unique_keys: bool = False,
):
    """:func:`parse_json` of the file at ``path`` (:func:`read_file_bytes`: size-limited, gzip as a stream),
    holding one copy of its text at a time: the bytes are dropped once decoded, before parsing."""
    data = read_file_bytes(path, limit_bytes=limit_bytes)
    _check_depth(data, max_depth)
    text = data.decode("utf-8-sig")
    del data
    return _loads(text, unique_keys, max_depth)
