"""Render a table and paragraphs as prompt text.

``render_table``: one line per row, ``| cell | cell |``, header row first, cells exactly as written (only
whitespace runs, including newlines, collapse to one space, and a literal ``|`` inside a cell is written
``\\|`` as in Markdown; backslashes stay as they are). ``keep_rows`` renders only the listed row indices (0-based,
row 0 is the header), always with the header, in table order; dropped rows leave no marker.

``render_paragraphs``: one paragraph per line (internal whitespace runs collapsed), unnumbered by
default; ``numbered=True`` prefixes ``[1] ``, ``[2] `` ... (``start`` sets the first number).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

__all__ = ["render_paragraphs", "render_table"]

_SPACES = re.compile(r"\s+")


def _cell(cell) -> str:
    text = cell if isinstance(cell, str) else ("" if cell is None else str(cell))
    return _SPACES.sub(" ", text).strip().replace("|", "\\|")


def _check_rows(rows) -> list:
    if isinstance(rows, (str, bytes)) or not isinstance(rows, Sequence):
        raise TypeError(f"render_table: rows must be a list of rows, got {type(rows).__name__}")
    for i, row in enumerate(rows):
        if isinstance(row, (str, bytes)) or not isinstance(row, Sequence):
            raise TypeError(f"render_table: row {i} must be a list of cells, got {type(row).__name__}")
    return list(rows)


def render_table(rows: Sequence[Sequence[str]], keep_rows: Iterable[int] | None = None) -> str:
    """``[["", "2019"], ["Revenue", "1,234"]]`` -> ``"|  | 2019 |\\n| Revenue | 1,234 |"``; ``""`` for no rows."""
    rows = _check_rows(rows)
    if not rows:
        return ""
    if keep_rows is None:
        indices = range(len(rows))
    else:
        wanted = set()
        for index in keep_rows:
            if isinstance(index, bool) or not isinstance(index, int):
                raise TypeError(f"render_table: keep_rows items must be ints, got {type(index).__name__}")
            if not -len(rows) <= index < len(rows):
                raise ValueError(f"render_table: row index {index} out of range for a table of {len(rows)} rows")
            wanted.add(index % len(rows))
        indices = sorted(wanted | {0})
    return "\n".join("| " + " | ".join(_cell(c) for c in rows[i]) + " |" for i in indices)


def render_paragraphs(paragraphs: Sequence[str], numbered: bool = False, start: int = 1) -> str:
    """One paragraph per line; ``numbered=True``: ``"[1] first\\n[2] second"``. Empty paragraphs are kept
    (so numbers match positions)."""
    if isinstance(paragraphs, (str, bytes)) or not isinstance(paragraphs, Sequence):
        raise TypeError(f"render_paragraphs: paragraphs must be a list of strings, got {type(paragraphs).__name__}")
    lines = []
    for i, paragraph in enumerate(paragraphs):
        if not isinstance(paragraph, str):
            raise TypeError(f"render_paragraphs: paragraph {i} must be a string, got {type(paragraph).__name__}")
        text = _SPACES.sub(" ", paragraph).strip()
        lines.append(f"[{start + i}] {text}" if numbered else text)
    return "\n".join(lines)
