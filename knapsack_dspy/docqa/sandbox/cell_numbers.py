"""Read a table cell the way financial tables write numbers (for Python programs).

``"$1,234.5"`` -> 1234.5, ``"(123)"`` -> -123.0, ``"12%"`` -> 12.0 (percent cells keep percent units),
``"-4.5"`` / ``"\u22124.5"`` -> -4.5, ``"$ (1,234)"`` -> -1234.0: the package's number grammar
(:func:`knapsack_dspy.docqa.number_text.parse_number`). Placeholders for "no value" (``""``, ``"-"``, ``"\u2014"``,
``"n/a"``, ``"nm"``, ...) are :data:`MISSING`; any other text is :data:`TEXT`. FinQA's tokenised tables write a
number followed by its original spelling in parentheses: ``"-29.6 ( 29.6 )"`` -> -29.6, ``"9.9% ( 9.9 % )"`` -> 9.9
(the parenthesised spelling must be the same number, its sign aside). (The FinQA DSL reads cells differently --
the official ``process_row`` -- see ``finqa_executor``.)
"""

from __future__ import annotations

import re

from knapsack_dspy.docqa.number_text import number_text, parse_number

__all__ = ["MISSING", "TEXT", "parse_cell"]


class _Marker:
    def __init__(self, name: str):
        self._name = name

    def __repr__(self) -> str:
        return self._name


#: A cell that holds a placeholder for "no value" ("", "-", "—", "n/a", ...).
MISSING = _Marker("MISSING")
#: A cell that holds text, not a number.
TEXT = _Marker("TEXT")

_PLACEHOLDERS = {"", "-", "--", "---", "\u2013", "\u2014", "\u2015", "n/a", "na", "nm", "n.m.", "none",
                 "nil", "*", "***", "\u2012"}


def parse_cell(cell) -> float | _Marker:
    """The number in ``cell`` (a float), or :data:`MISSING` / :data:`TEXT`.

    Accepts ints and floats as they are (not bools, not NaN / infinities: those are :data:`MISSING`).
    """
    if isinstance(cell, bool) or cell is None:
        return MISSING
    if not isinstance(cell, (int, float, str)):
        return TEXT
    text = number_text(cell)
    if text is None:  # NaN / infinity
        return MISSING
    if isinstance(text, str) and text.replace("\u00a0", " ").strip().lower() in _PLACEHOLDERS:
        return MISSING
    value = parse_number(text)
    if value is None and isinstance(text, str):
        value = _finqa_spelling(text)
    return TEXT if value is None else value


_WITH_SPELLING = re.compile(r"^(?P<value>[^()]+?)\s*\(\s*(?P<written>[^()]+?)\s*\)$")


def _finqa_spelling(text: str) -> float | None:
    """``"-29.6 ( 29.6 )"`` -> -29.6: a number and, in parentheses, the same number as the source wrote it."""
    match = _WITH_SPELLING.match(text)
    if not match:
        return None
    value = parse_number(match.group("value").replace(" ", ""))
    written = parse_number(match.group("written").replace(" ", ""))
    if value is None or written is None or abs(value) != abs(written):
        return None
    return value
