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
import re
import zlib
from pathlib import Path

__all__ = [
    "DEFAULT_MAX_FILE_MB",
    "GZIP_ERRORS",
    "MAX_FILE_MB_ENV",
    "MAX_INT_DIGITS",
    "MAX_JSON_DEPTH",
    "DuplicateKeyError",
    "FileLimitError",
    "LongInteger",
    "max_file_bytes",
    "parse_json",
    "read_file_bytes",
    "read_file_text",
]

MAX_FILE_MB_ENV = "KDSPY_MAX_FILE_MB"
DEFAULT_MAX_FILE_MB = 200
MAX_JSON_DEPTH = 100
MAX_INT_DIGITS = 4300  # Python's own default limit for int <-> str conversion
_GZIP_MAGIC = b"\x1f\x8b"
_CHUNK = 1 << 22  # numpy chunk for the depth scan


class FileLimitError(ValueError):
    """A file exceeds a reading limit (size, nesting depth); the message names the limit."""


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
            with gzip.GzipFile(fileobj=raw) as stream:
                data = stream.read(limit + 1)
            if len(data) > limit:
                raise FileLimitError(f"decompresses to more than {_limit_text(limit)}")
            return data
        data = raw.read(limit + 1)
    if len(data) > limit:
        raise FileLimitError(f"is larger than {_limit_text(limit)}")
    return data


#: Errors a broken gzip stream raises (besides ``OSError``): callers catch these with ``OSError``.
GZIP_ERRORS = (EOFError, zlib.error, gzip.BadGzipFile)


def read_file_text(path: str | os.PathLike, *, limit_bytes: int | None = None) -> str:
    """:func:`read_file_bytes` decoded as UTF-8 (a leading byte-order mark dropped); ``UnicodeDecodeError``
    for bytes that are not UTF-8."""
    return read_file_bytes(path, limit_bytes=limit_bytes).decode("utf-8-sig")


# -- JSON ------------------------------------------------------------------------------------------------
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_KEEP = b"[]{},"
_DELETE = bytes(b for b in range(256) if b not in _KEEP)


def _depth_problem(data: bytes, limit: int) -> str | None:
    """Where ``data`` (JSON) nests deeper than ``limit``: ``"record 3"`` of a top-level array, ``"the
    document"`` otherwise; ``None`` when it does not."""
    if data.count(b"[") + data.count(b"{") <= limit:  # cannot nest deeper than it has brackets
        return None
    import numpy as np

    structure = _STRING.sub(b"", data).translate(None, _DELETE)  # brackets and commas outside strings
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
        too_deep = np.flatnonzero(levels > limit)
        commas = (chunk == ord(",")) & (levels == 1)
        if too_deep.size:
            if not top_level_array:
                return "the document"
            return f"record {records + int(np.count_nonzero(commas[: too_deep[0]]))}"
        records += int(np.count_nonzero(commas))
        depth = int(levels[-1])
    return None


def _parse_int(literal: str):
    if len(literal) - (literal[:1] == "-") > MAX_INT_DIGITS:
        return LongInteger(literal)
    return int(literal)


class DuplicateKeyError(ValueError):
    """A JSON object names the same key twice (``key``); ``json`` would silently keep the last value."""

    def __init__(self, key: str):
        super().__init__(f"duplicate key {key!r}")
        self.key = key


def _unique_pairs(pairs: list) -> dict:
    value = dict(pairs)
    if len(value) != len(pairs):
        seen: set = set()
        raise DuplicateKeyError(next(k for k, _ in pairs if k in seen or seen.add(k)))
    return value


def parse_json(text: str | bytes, *, max_depth: int = MAX_JSON_DEPTH, unique_keys: bool = False):
    """``json.loads(text)`` with the nesting depth checked first (:class:`FileLimitError` naming the record)
    and over-long integers parsed to :class:`LongInteger`. ``unique_keys``: an object naming a key twice is a
    :class:`DuplicateKeyError`. ``json.JSONDecodeError`` (and ``UnicodeDecodeError`` for bytes that are not
    UTF-8) as ``json.loads``."""
    data = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text
    where = _depth_problem(data, max_depth)
    if where is not None:
        raise FileLimitError(f"{where} is nested deeper than {max_depth} levels, the nesting limit")
    if isinstance(text, bytes):
        text = text.decode("utf-8-sig")
    data = None  # the caller may hold the bytes; this frame need not
    hook = {"object_pairs_hook": _unique_pairs} if unique_keys else {}
    try:
        try:
            return json.loads(text, **hook)
        except (json.JSONDecodeError, DuplicateKeyError):
            raise
        except ValueError:  # an integer past Python's digit limit: parse again, keeping such integers aside
            return json.loads(text, parse_int=_parse_int, **hook)
    except RecursionError:  # not reached below the depth limit; kept so nothing escapes as a traceback
        raise FileLimitError(f"is nested too deeply to parse (limit {max_depth} levels)") from None
