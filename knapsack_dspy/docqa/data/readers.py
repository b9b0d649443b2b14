"""Read raw records: local ``.json`` / ``.json.gz`` / ``.jsonl`` / ``.csv.gz`` files, or a Hugging Face data set.

Local files are parsed with the standard library so that errors can name the exact place (JSON line and
column, CSV line); a record-level problem (a bad JSONL line, a CSV row with the wrong number of fields) is
returned in place of the record as a :class:`DataError`, so that ``skip_invalid`` can skip just that
record. Reading is bounded (``knapsack_dspy.file_limits``): decompressed size, JSON nesting depth checked
before parsing, over-long integers kept as ``LongInteger`` stand-ins that the record parsers reject. Hub
data sets go through ``datasets.load_dataset`` and come back as plain dicts.
"""

from __future__ import annotations

import csv
import io
import json
import os
from pathlib import Path

from knapsack_dspy.docqa.data.errors import DataError
from knapsack_dspy.file_limits import (
    GZIP_ERRORS,
    FileLimitError,
    check_text_values,
    parse_json,
    read_file_text,
    read_json,
)

__all__ = ["LOCAL_SUFFIXES", "read_hub_rows", "read_records"]

LOCAL_SUFFIXES = (".json", ".json.gz", ".jsonl", ".jsonl.gz", ".csv", ".csv.gz")


def _suffix(path: Path) -> str:
    name = path.name.lower()
    for suffix in sorted(LOCAL_SUFFIXES, key=len, reverse=True):
        if name.endswith(suffix):
            return suffix
    return ""


def _file_error(path: Path, exc: BaseException) -> DataError:
    """The DataError for a file that cannot be read, whatever reading it raised (one of _READ_ERRORS)."""
    if isinstance(exc, FileNotFoundError):
        return DataError("file not found", source=str(path))
    if isinstance(exc, IsADirectoryError):
        return DataError("is a directory, expected a data file", source=str(path))
    if isinstance(exc, FileLimitError):
        return DataError(str(exc), source=str(path))
    if isinstance(exc, GZIP_ERRORS):
        return DataError(f"not a valid gzip file ({exc})", source=str(path))
    if isinstance(exc, UnicodeDecodeError):
        return DataError(f"not UTF-8 text ({exc.reason} at byte {exc.start})", source=str(path))
    if isinstance(exc, json.JSONDecodeError):
        return DataError(f"invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}", source=str(path))
    return DataError(f"unreadable: {getattr(exc, 'strerror', None) or exc}", source=str(path))


_READ_ERRORS = (OSError, FileLimitError, UnicodeDecodeError, json.JSONDecodeError, *GZIP_ERRORS)


def _read_text(path: Path) -> str:
    """The text of a JSON-lines or CSV file (gunzipped when it is gzip), within the size and value limits
    (``knapsack_dspy.file_limits``)."""
    try:
        text = read_file_text(path)
        check_text_values(text)
    except _READ_ERRORS as exc:
        raise _file_error(path, exc) from None
    return text


def _read_json(path: Path) -> list:
    """The records of a JSON file: nesting depth checked before parsing, over-long integers set aside."""
    try:
        value = read_json(path)
    except _READ_ERRORS as exc:
        raise _file_error(path, exc) from None
    if not isinstance(value, list):
        raise DataError(f"expected a JSON array of records, got a JSON {type(value).__name__}", source=str(path))
    return value


def _read_jsonl(path: Path, text: str) -> list:
    records: list = []
    for line_number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            records.append(parse_json(line))
        except json.JSONDecodeError as exc:
            records.append(DataError(f"invalid JSON on line {line_number} column {exc.colno}: {exc.msg}",
                                     source=str(path), index=len(records)))
        except FileLimitError as exc:
            records.append(DataError(f"line {line_number}: {exc}", source=str(path), index=len(records)))
    return records


def _read_csv(path: Path, text: str) -> list:
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        header = next(reader, None)
        if not header or not any(h.strip() for h in header):
            raise DataError("empty CSV file (no header row)", source=str(path))
        records: list = []
        for row in reader:
            if not row:
                continue
            if len(row) != len(header):
                records.append(DataError(f"row has {len(row)} fields, the header has {len(header)} "
                                         f"(line {reader.line_num})", source=str(path), index=len(records)))
            else:
                records.append(dict(zip(header, row, strict=True)))
    except csv.Error as exc:
        raise DataError(f"invalid CSV at line {reader.line_num}: {exc}", source=str(path)) from None
    return records


def read_records(path: str | os.PathLike) -> list:
    """All records of a local file, in file order; unparseable records are ``DataError`` items."""
    path = Path(path)
    suffix = _suffix(path)
    if not suffix:
        raise DataError(f"unsupported file type; expected one of {', '.join(LOCAL_SUFFIXES)}", source=str(path))
    if suffix.startswith(".json") and not suffix.startswith(".jsonl"):
        return _read_json(path)
    text = _read_text(path)
    if suffix.startswith(".jsonl"):
        return _read_jsonl(path, text)
    return _read_csv(path, text)


def read_hub_rows(dataset_id: str, split: str, cache_dir: str | os.PathLike | None = None) -> list[dict]:
    """Rows of ``datasets.load_dataset(dataset_id, split=split)`` as dicts.

    ``dataset_id`` is a hub id (``"next-tat/TAT-QA"``) or anything else ``load_dataset`` takes, such as a
    local folder of data files. A hub id downloads (unless ``HF_DATASETS_OFFLINE`` / ``HF_HUB_OFFLINE`` is set:
    knapsack_dspy sets neither).
    """
    source = f"hub:{dataset_id}"
    if not dataset_id.strip():
        raise DataError("empty hub dataset id (expected source='hub:<owner>/<name>')")
    import datasets  # heavy (pyarrow, pandas) and needed for hub sources only

    try:
        dataset = datasets.load_dataset(dataset_id, split=split,
                                        cache_dir=str(cache_dir) if cache_dir is not None else None)
    except Exception as exc:  # noqa: BLE001  (load_dataset raises many types: ConnectionError, ValueError, ...)
        hint = ""
        if os.environ.get("HF_DATASETS_OFFLINE", "0") not in ("0", "", "false", "False") or \
                os.environ.get("HF_HUB_OFFLINE", "0") not in ("0", "", "false", "False"):
            hint = " (offline mode is on: set HF_DATASETS_OFFLINE=0 and HF_HUB_OFFLINE=0 to download)"
        message = " ".join(str(exc).split())[:300]
        raise DataError(f"could not load split {split!r}: {type(exc).__name__}: {message}{hint}",
                        source=source) from None
    return [dict(row) for row in dataset]
