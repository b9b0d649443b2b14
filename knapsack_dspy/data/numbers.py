"""Read a number written the way financial documents write it: ``"4,411"``, ``"(7,227)"``, ``"$ 1.5"``, ``"12.5%"``."""

from __future__ import annotations

import math
import re

__all__ = ["parse_number"]

_CURRENCY = re.compile(r"^(?:[A-Z]{0,2}[$€£¥])\s*")
_NUMBER = re.compile(r"^(?:\d+(?:,\d{3})*(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?$")


def parse_number(value) -> float | None:
    """The number ``value`` writes, or ``None`` when it is not (only) a number.

    Accepts ints / floats (not bools) and strings with an optional currency sign (``$``, ``€``, ``£``,
    ``¥``, also ``S$`` / ``A$``), thousands separators, an exponent (``"2e-05"``), a trailing ``%`` (kept in percent units:
    ``"12.5%"`` -> 12.5) and accounting negatives in parentheses (``"(7,227)"`` -> -7227.0). Text with
    words, ranges or several numbers gives ``None``.
    """
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        try:
            return float(value) if math.isfinite(value) else None
        except OverflowError:  # an int beyond the float range (more than ~308 digits)
            return None
    if not isinstance(value, str):
        return None
    text = value.strip().replace("\u2212", "-")
    negative = False
    if text.startswith("(") and text.endswith(")"):
        negative, text = True, text[1:-1].strip()
    sign = ""
    if text[:1] in "-+" and text:
        sign, text = text[0], text[1:].lstrip()
    text = _CURRENCY.sub("", text)
    if text.endswith("%"):
        text = text[:-1].rstrip()
    if not _NUMBER.match(text):
        return None
    number = float(sign + text.replace(",", ""))
    if not math.isfinite(number):
        return None
    return -number if negative else number
