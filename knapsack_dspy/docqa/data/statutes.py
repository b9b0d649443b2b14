"""SARA statutes: ``sara/statutes/section<N>.txt`` -> ``{"<N>": raw text}``."""

from __future__ import annotations

import os
import re
from pathlib import Path

from knapsack_dspy import paths
from knapsack_dspy.docqa.data.errors import DataError

__all__ = ["load_statutes"]

_FILE = re.compile(r"^section(?P<number>\d+[A-Za-z]?)\.txt$")


def _order(number: str) -> tuple[int, str]:
    digits = re.match(r"\d+", number)
    return int(digits.group(0)), number


def load_statutes(data_dir: str | os.PathLike | None = None, path: str | os.PathLike | None = None
                  ) -> dict[str, str]:
    """Section number (``"7703"``) -> the statute's text exactly as in its file (bytes decoded as UTF-8,
    line endings untouched), in section order.

    ``path``: a folder of ``section<N>.txt`` files; default ``<data dir>/sara/statutes`` with the data
    directory from ``data_dir`` or ``$KDSPY_DATA_DIR``.
    """
    if path is None:
        try:
            folder = paths.data_dir(data_dir) / "sara" / "statutes"
        except paths.ConfigError as exc:
            raise DataError(str(exc)) from None
    else:
        folder = Path(path)
    if not folder.is_dir():
        raise DataError("statute folder does not exist (expected section<N>.txt files)", source=str(folder))
    files = {}
    for file in folder.iterdir():
        match = _FILE.match(file.name)
        if match and file.is_file():
            files[match.group("number")] = file
    if not files:
        raise DataError("no section<N>.txt files in the statute folder", source=str(folder))
    statutes = {}
    for number in sorted(files, key=_order):
        try:
            statutes[number] = files[number].read_bytes().decode("utf-8")  # no newline translation
        except UnicodeDecodeError as exc:
            raise DataError(f"not UTF-8 text ({exc.reason} at byte {exc.start})", source=str(files[number])) from None
        except OSError as exc:
            raise DataError(f"unreadable: {exc.strerror or exc}", source=str(files[number])) from None
    return statutes
