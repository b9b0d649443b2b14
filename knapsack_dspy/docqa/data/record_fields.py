"""Typed access to fields of raw records: each helper raises a :class:`DataError` naming the field.

Parsers raise without knowing the file or record index; the loader adds those (``DataError.located``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from knapsack_dspy.docqa.data.errors import DataError
from knapsack_dspy.file_limits import LongInteger

__all__ = [
    "MISSING",
    "get_field",
    "get_id",
    "get_str",
    "get_str_list",
    "get_table",
    "leftovers",
    "require_mapping",
    "type_name",
]

MISSING = object()


def type_name(value) -> str:
    if isinstance(value, LongInteger):  # an integer literal too long to convert (file_limits)
        return repr(value)
    return "null" if value is None else type(value).__name__


def require_mapping(value, field: str | None = None, what: str = "a JSON object") -> Mapping:
    if not isinstance(value, Mapping):
        raise DataError(f"expected {what}, got {type_name(value)}", field=field)
    return value


def get_field(record: Mapping, key: str, path: str, default=MISSING):
    """``record[key]``; a missing key (or null) raises unless a ``default`` is given."""
    value = record.get(key, None)
    if value is None:
        if default is not MISSING:
            return default
        raise DataError("missing", field=path)
    return value


def get_id(record: Mapping, key: str, path: str) -> str:
    """An identifier: a non-empty string (ints are accepted and converted)."""
    value = get_field(record, key, path)
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise DataError(f"expected a string id, got {type_name(value)}", field=path)
    text = str(value).strip()
    if not text:
        raise DataError("empty id", field=path)
    return text


def get_str(record: Mapping, key: str, path: str, *, allow_empty: bool = False, default=MISSING) -> str:
    value = get_field(record, key, path, default)
    if not isinstance(value, str):
        raise DataError(f"expected a string, got {type_name(value)}", field=path)
    if not allow_empty and not value.strip():
        raise DataError("empty string", field=path)
    return value


def get_str_list(record: Mapping, key: str, path: str, default=MISSING) -> list[str]:
    value = get_field(record, key, path, default)
    if not isinstance(value, (list, tuple)):
        raise DataError(f"expected a list of strings, got {type_name(value)}", field=path)
    for i, item in enumerate(value):
        if not isinstance(item, str):
            raise DataError(f"item {i}: expected a string, got {type_name(item)}", field=path)
    return list(value)


def _cell_text(cell, path: str, r: int, c: int) -> str:
    if isinstance(cell, str):
        return cell
    if cell is None:
        return ""
    if isinstance(cell, (int, float)) and not isinstance(cell, bool):
        if isinstance(cell, float) and not math.isfinite(cell):
            raise DataError(f"row {r} cell {c}: non-finite number", field=path)
        return str(cell)
    raise DataError(f"row {r} cell {c}: expected a string, got {type_name(cell)}", field=path)


def get_table(value, path: str, *, required: bool = True) -> list[list[str]]:
    """Rows of cell strings, header first. Numbers become their JSON text, null cells ``""``.

    ``required``: an empty table (or one whose rows are all empty) is an error.
    """
    if value is None:
        if required:
            raise DataError("missing", field=path)
        return []
    if not isinstance(value, (list, tuple)):
        raise DataError(f"expected a list of rows, got {type_name(value)}", field=path)
    rows = []
    for r, row in enumerate(value):
        if not isinstance(row, (list, tuple)):
            raise DataError(f"row {r}: expected a list of cells, got {type_name(row)}", field=path)
        rows.append([_cell_text(cell, path, r, c) for c, cell in enumerate(row)])
    if required and not any(rows):
        raise DataError("empty table (a table is required)", field=path)
    return rows


def leftovers(record: Mapping, consumed: set[str] | frozenset[str]) -> dict:
    """The record's keys not turned into uniform fields (nulls dropped), for ``extra``."""
    return {k: v for k, v in record.items() if k not in consumed and v is not None}
