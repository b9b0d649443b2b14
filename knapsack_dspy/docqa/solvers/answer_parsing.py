"""Read an answer an LM wrote as text: numbers, lists of spans, scales, SARA labels and dollar amounts.

LMs decorate answers: ``"$1,234.5 million"``, ``"12.5%"``, ``'["2019", "2018"]'``, ``"Answer: 3"``,
``"**Entailment**"``. These helpers turn them into values the metrics can compare:

- :func:`parse_answer` -> ``(value, scale_hint)``: a number (``int`` when written without decimals,
  else ``float``), a list of strings (several spans) or the stripped string (one span);
  ``scale_hint`` is the scale the text itself states (``"12.5%"`` -> ``"percent"``,
  ``"3.2 million"`` -> ``"million"``), ``""`` when it states none.
- :func:`normalise_scale` maps free text to one of ``"" thousand million billion percent``.
- :func:`parse_statute_answer` -> ``"Entailment"`` / ``"Contradiction"`` / an ``int`` of dollars / ``None``.
"""

from __future__ import annotations

import ast
import json
import math
import re

from knapsack_dspy.docqa.number_text import parse_number

__all__ = ["SCALES", "normalise_scale", "parse_answer", "parse_number_text", "parse_statute_answer",
           "strip_answer_decoration"]

SCALES = ("", "thousand", "million", "billion", "percent")
_SCALE_WORDS = {
    "thousand": "thousand", "thousands": "thousand", "k": "thousand", "000s": "thousand",
    "million": "million", "millions": "million", "m": "million", "mn": "million", "mm": "million",
    "billion": "billion", "billions": "billion", "b": "billion", "bn": "billion",
    "percent": "percent", "percentage": "percent", "percentages": "percent", "%": "percent", "pct": "percent",
}
_NO_SCALE = {"", "none", "null", "n/a", "na", "nil", "-", "no", "no scale", "unit", "units", "one", "ones",
             "dollars", "dollar", "$", "number", "count"}
_PREFIX = re.compile(r"^\s*(?:final\s+)?(?:answer|ans)\s*[:=]\s*", re.IGNORECASE)
_TRAILING_SCALE = re.compile(r"^(?P<number>.*?\d\)?)\s*(?P<scale>thousands?|millions?|billions?|percent(?:age)?|"
                             r"mn|bn|m|b|k)\.?$", re.IGNORECASE)


def normalise_scale(text) -> str:
    """Free-text scale -> one of :data:`SCALES` (unknown words -> ``""``)."""
    if text is None:
        return ""
    word = " ".join(str(text).strip().strip(".\"'`*").lower().split())
    word = re.sub(r"^(?:in\s+)?(?:the\s+)?", "", word)
    if word in _NO_SCALE:
        return ""
    if word in _SCALE_WORDS:
        return _SCALE_WORDS[word]
    for token in re.findall(r"[a-z%]+", word):  # "in millions of dollars", "(percent)"
        if token in _SCALE_WORDS and len(token) > 1:
            return _SCALE_WORDS[token]
        if token == "%":
            return "percent"
    return "percent" if "%" in word else ""


def strip_answer_decoration(text: str) -> str:
    """Drop markdown emphasis, an ``Answer:`` prefix, surrounding quotes/backticks and a final period."""
    out = str(text).strip()
    previous = None
    while out != previous:
        previous = out
        out = re.sub(r"^\*\*(.*)\*\*$", r"\1", out, flags=re.DOTALL).strip()
        out = _PREFIX.sub("", out).strip()
        if out.endswith(".") and not re.search(r"\d\.$", out):
            out = out[:-1].rstrip()
        if len(out) >= 2 and out[0] == out[-1] and out[0] in "\"'`":
            out = out[1:-1].strip()
    return out


def _number(value: float, text: str) -> int | float:
    if value.is_integer() and not re.search(r"\d\.\d", text) and abs(value) < 2**53:
        return int(value)
    return value


def parse_number_text(text) -> tuple[int | float, str] | None:
    """``"$1,234.5 million"`` -> ``(1234.5, "million")``; ``"12.5%"`` -> ``(12.5, "percent")``;
    ``None`` when the text is not a (single) number."""
    if isinstance(text, bool) or text is None:
        return None
    if isinstance(text, (int, float)):
        return (text, "") if math.isfinite(text) else None
    body = strip_answer_decoration(text)
    scale = ""
    match = _TRAILING_SCALE.match(body)
    if match:
        body, scale = match.group("number").strip(), normalise_scale(match.group("scale"))
    if body.endswith(("%", "%)")):
        scale = "percent"
    value = parse_number(body)
    if value is None:
        return None
    return _number(value, body), scale


def _as_list(text: str) -> list[str] | None:
    body = text.strip()
    if not (body.startswith("[") and body.endswith("]")):
        return None
    for loader in (json.loads, ast.literal_eval):
        try:
            value = loader(body)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            continue
        if isinstance(value, (list, tuple)):
            return [str(item).strip() for item in value]
    inner = body[1:-1].strip()  # [a, b] without quotes
    return [part.strip().strip("\"'") for part in inner.split(",") if part.strip()] if inner else []


def parse_answer(text) -> tuple[int | float | str | list[str] | None, str]:
    """An LM's answer text -> ``(value, scale_hint)`` (see module docstring); ``(None, "")`` when empty.

    Lists: a JSON or Python list literal. Its items stay strings (the spans as written); a one-item
    list becomes its item (parsed as a number when it is one).
    """
    if text is None:
        return None, ""
    if isinstance(text, (list, tuple)):
        items = [str(item).strip() for item in text]
        return (items if len(items) != 1 else parse_answer(items[0])[0]), ""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        return (text, "") if math.isfinite(text) else (None, "")
    body = strip_answer_decoration(str(text))
    if not body:
        return None, ""
    items = _as_list(body)
    if items is not None:
        if len(items) == 1:
            return parse_answer(items[0])
        return items, ""
    number = parse_number_text(body)
    if number is not None:
        return number
    return body, ""


_ENTAILMENT = re.compile(r"\b(entail(?:ment|ed|s)?|true|yes|correct)\b", re.IGNORECASE)
_CONTRADICTION = re.compile(r"\b(contradict(?:ion|ed|s)?|false|no|incorrect|not\s+entailed)\b", re.IGNORECASE)
_AMOUNT_NUMBER = r"(?P<number>\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?)"
_DOLLAR_AMOUNT = re.compile(r"(?P<sign>[-\u2212]\s*)?\$\s*(?P<neg>[-\u2212])?\s*" + _AMOUNT_NUMBER)
_WORD_AMOUNT = re.compile(r"(?P<sign>[-\u2212]\s*)?" + _AMOUNT_NUMBER + r"\s*(?:dollars?|usd)\b", re.IGNORECASE)
_PLAIN_NUMBER = re.compile(r"(?P<sign>[-\u2212])?(?P<number>\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?)")
STATUTE_KINDS = (None, "entailment", "numerical")


def _label(body: str) -> str | None:
    contradiction = _CONTRADICTION.search(body)
    entailment = _ENTAILMENT.search(body)
    if contradiction and (not entailment or contradiction.start() <= entailment.start()):
        return "Contradiction"
    return "Entailment" if entailment else None


def _dollars(body: str) -> int | None:
    matches = (list(_DOLLAR_AMOUNT.finditer(body)) or list(_WORD_AMOUNT.finditer(body))
               or list(_PLAIN_NUMBER.finditer(body))[-1:])
    for match in matches:
        value = parse_number(match.group("number"))
        if value is None:
            continue
        negative = bool(match.group("sign")) or bool(match.groupdict().get("neg"))
        return round(-value if negative else value)
    return None


def parse_statute_answer(text, kind: str | None = None) -> str | int | None:
    """SARA output -> ``"Entailment"`` / ``"Contradiction"`` / dollars as ``int`` / ``None``.

    ``kind``: ``"entailment"`` reads only a label, ``"numerical"`` only an amount, ``None`` tries a label
    first. Labels: the first of ``Entailment`` / ``entailed`` / ``true`` / ``yes`` or ``Contradiction`` /
    ``not entailed`` / ``false`` / ``no`` that occurs. Amounts: the first ``$`` amount (else the first
    ``<n> dollars``, else the last number), rounded to whole dollars (``"$15,037.40"`` -> 15037).
    """
    if kind not in STATUTE_KINDS:
        raise ValueError(f"kind must be one of {STATUTE_KINDS}, got {kind!r}")
    if text is None:
        return None
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        if kind == "entailment" or not math.isfinite(text):
            return None
        return round(text)
    body = strip_answer_decoration(str(text))
    if kind != "numerical":
        label = _label(body)
        if label is not None or kind == "entailment":
            return label
    return _dollars(body)
