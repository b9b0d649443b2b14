"""Read a number written the way financial documents write it: ``"4,411"``, ``"(7,227)"``, ``"$ 1.5"``, ``"12.5%"``.

The package's own readers of numbers start here (the copies of official evaluation code in ``metrics/`` keep
their own, documented, rules): :func:`parse_number` for answers and replies, and :func:`number_text`, the
input handling every reader shares (``knapsack_dspy.docqa.metrics.sara.parse_dollars`` reads dollar amounts from it).
"""

from __future__ import annotations

import math
import re

__all__ = ["number_text", "parse_number"]

_CURRENCY = re.compile(r"^(?:[A-Z]{0,2}[$€£¥])\s*")
_NUMBER = re.compile(r"^(?:\d+(?:,\d{3})*(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?$")


def number_text(value) -> float | str | None:
    """What a reader of numbers looks at: an int or a float as a float (``None`` for NaN / infinity), a string
    stripped and with the minus sign ``−`` written ``-``, ``None`` for anything else (also ``True`` / ``False``)."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        try:
            return float(value) if math.isfinite(value) else None
        except OverflowError:  # an int beyond the float range (more than ~308 digits)
            return None
    if not isinstance(value, str):
        return None
    return value.strip().replace("\u2212", "-")


def parse_number(value) -> float | None:
    """The number ``value`` writes, or ``None`` when it is not (only) a number.

    Accepts ints / floats (not bools) and strings with an optional currency sign (``$``, ``€``, ``£``,
    ``¥``, also ``S$`` / ``A$``) before or after a sign (``"-$5"``, ``"$-5"``), thousands separators, an
    exponent (``"2e-05"``), a trailing ``%`` (kept in percent units: ``"12.5%"`` -> 12.5) and accounting
    negatives in parentheses, also after a currency sign (``"(7,227)"``, ``"$(7,227)"`` -> -7227.0). Text with
    words, ranges or several numbers gives ``None``. Table cells are read with it too
    (``knapsack_dspy.docqa.sandbox.cell_numbers.parse_cell``).
    """
    text = number_text(value)
    if not isinstance(text, str):
        return text
    negative = False
    if text.startswith("(") and text.endswith(")"):
        negative, text = True, text[1:-1].strip()
    text = _CURRENCY.sub("", text)
    if text[:1] in "-+" and text:
        negative ^= text[0] == "-"
        text = _CURRENCY.sub("", text[1:].lstrip())
    if not negative and text.startswith("(") and text.endswith(")"):  # "$(7,227)"
        negative, text = True, _CURRENCY.sub("", text[1:-1].strip())
    if text.endswith("%"):
        text = text[:-1].rstrip()
    if not _NUMBER.match(text):
        return None
    number = float(text.replace(",", ""))
    if not math.isfinite(number):
        return None
    return -number if negative else number
