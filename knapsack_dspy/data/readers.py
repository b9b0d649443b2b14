"""Read raw records: local ``.json`` / ``.json.gz`` / ``.jsonl`` / ``.csv.gz`` files, or a Hugging Face data set.

Local files are parsed with the standard library so that errors can name the exact place (JSON line and
column, CSV line); a record-level problem (a bad JSONL line, a CSV row with the wrong number of fields) is
returned in place of the record as a :class:`DataError`, so that ``skip_invalid`` can skip just that
record. Hub data sets go through ``datasets.load_dataset`` and come back as plain dicts.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import os
from pathlib import Path

from knapsack_dspy.data.errors import DataError

__all__ = ["LOCAL_SUFFIXES", "read_hub_rows", "read_records"]

LOCAL_SUFFIXES = (".json", ".json.gz", ".jsonl", ".jsonl.gz", ".csv", ".csv.gz")


def _suffix(path: Path) -> str:
    name = path.name.lower()
    for suffix in sorted(LOCAL_SUFFIXES, key=len, reverse=True):
        if name.endswith(suffix):
            return suffix
    return ""


def _read_text(path: Path) -> str:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise DataError("file not found", source=str(path)) from None
    except IsADirectoryError:
        raise DataError("is a directory, expected a data file", source=str(path)) from None
    except OSError as exc:
        raise DataError(f"unreadable: {exc.strerror or exc}", source=str(path)) from None
    if path.name.lower().endswith(".gz"):
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError) as exc:
            raise DataError(f"not a valid gzip file ({exc})", source=str(path)) from None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise DataError(f"not UTF-8 text ({exc.reason} at byte {exc.start})", source=str(path)) from None


def _read_json(path: Path, text: str) -> list:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise DataError(f"invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}",
                        source=str(path)) from None
    if not isinstance(value, list):
        raise DataError(f"expected a JSON array of records, got a JSON {type(value).__name__}", source=str(path))
    return value


def _read_jsonl(path: Path, text: str) -> list:
    records: list = []
    for line_number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError as exc:
            records.append(DataError(f"invalid JSON on line {line_number} column {exc.colno}: {exc.msg}",
                                     source=str(path), index=len(records)))
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
    text = _read_text(path)
    if suffix.startswith(".jsonl"):
        return _read_jsonl(path, text)
    if suffix.startswith(".json"):
        return _read_json(path, text)
    return _read_csv(path, text)


def read_hub_rows(dataset_id: str, split: str, cache_dir: str | os.PathLike | None = None) -> list[dict]:
    """Rows of ``datasets.load_dataset(dataset_id, split=split)`` as dicts.

    ``dataset_id`` is a hub id (``"next-tat/TAT-QA"``) or anything else ``load_dataset`` takes, such as a
    local folder of data files. Hub downloads need ``HF_DATASETS_OFFLINE=0`` (knapsack_dspy defaults to
    offline).
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
