"""Small helpers for tables given as rows of cell strings (header first)."""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["row_text"]

def row_text(row: Sequence[str]) -> str:
    """A row as the text that gets embedded / matched: its non-blank cells joined by " | "."""
    return " | ".join(str(cell).strip() for cell in row if str(cell).strip())
