"""Read a gold or prediction file: ``.json`` or ``.json.gz`` (gzip detected by the name or the magic bytes)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from knapsack_dspy.docqa.metrics.errors import ScoringInputError
from knapsack_dspy.file_limits import GZIP_ERRORS, DuplicateKeyError, FileLimitError, read_json

__all__ = ["read_json_file", "short_repr"]


def read_json_file(path: str | os.PathLike, what: str = "file", *, unique_keys: bool = False):
    """The JSON value stored at ``path``; :class:`ScoringInputError` naming the file (and ``what`` it should
    be, e.g. ``"gold file"``) when it is missing, not gzip / UTF-8 / JSON, larger than the size limit or
    nested deeper than the nesting limit (``knapsack_dspy.file_limits``), or -- with ``unique_keys`` -- when
    an object names a key twice."""
    path = Path(path)
    source = str(path)
    try:
        return read_json(path, unique_keys=unique_keys)
    except FileNotFoundError:
        raise ScoringInputError(f"{what} not found", source=source) from None
    except IsADirectoryError:
        raise ScoringInputError(f"{what} is a directory, expected a .json or .json.gz file", source=source) from None
    except FileLimitError as exc:
        raise ScoringInputError(f"{what} {exc}", source=source) from None
    except GZIP_ERRORS as exc:
        raise ScoringInputError(f"{what} is not a valid gzip file ({exc})", source=source) from None
    except OSError as exc:
        raise ScoringInputError(f"{what} is unreadable: {exc.strerror or exc}", source=source) from None
    except UnicodeDecodeError as exc:
        raise ScoringInputError(f"{what} is not UTF-8 text ({exc.reason} at byte {exc.start})",
                                source=source) from None
    except json.JSONDecodeError as exc:
        if not exc.doc.strip():
            raise ScoringInputError(f"{what} is empty", source=source) from None
        raise ScoringInputError(f"{what} is not valid JSON: line {exc.lineno} column {exc.colno}: {exc.msg}",
                                source=source) from None
    except DuplicateKeyError as exc:
        raise ScoringInputError(f"{what} names the key {exc.key!r} twice (json would keep only the last "
                                "value)", source=source, where=f"key {exc.key!r}") from None


def short_repr(value, limit: int = 80) -> str:
    """``repr(value)`` cut to ``limit`` characters (with ``...``), for one-line error messages."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
