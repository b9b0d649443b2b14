"""Compare an executed answer with a gold answer: the official FinQA way, SEER's way, and our own lenient way.

* :func:`finqa_exact_match` -- official FinQA (``evaluate.py``): the prediction rounded to 5 decimals
  ``==`` the gold ``exe_ans``; ``"yes"`` / ``"no"`` compared as strings.
* :func:`seer_finqa_match` -- SEER's FinQA check (``jtonglet/SEER`` ``evaluation.py``, commit ``3529c0b``:
  ``get_answer`` + ``evaluate_answer``, counted as its ``evaluate_script`` / ``compute_accuracy_finqa`` count
  it), exactly: the gold ``"yes"`` / ``"no"`` becomes 1 / 0; an output whose type is exactly ``str`` is
  right when it equals the gold or is contained in it (so never against a number or a yes/no gold, where
  ``in`` raises); any other output is right when ``abs(output - gold) <= 0.001``, or (``percentage``) when
  ``output / 100`` or ``output * 100`` is -- whatever the output's type: numpy scalars, ``bool``, a complex
  number with a zero imaginary part all count, evaluated by the same Python operators; an operation that
  raises (``None``, a list, a too-large int) is wrong. Checked against SEER's own functions on generated
  inputs (``tests/docqa/test_metrics_seer_match.py``).
* :func:`kdspy_lenient_match` -- **our own** lenient rule (not SEER's, and not used by any official
  metric): numbers read from text after stripping ``$ £ € , ' ` %``, ``\u00a0`` and the words ``million``,
  ``billion``, ``thousand``, ``year(s)``; ``(123)`` is -123; ``yes`` / ``true`` = 1, ``no`` / ``false`` = 0;
  two numbers match within 0.001, directly or after ``/100`` / ``*100``, or when equal after rounding to 2
  decimals (numbers below 1 in absolute value compared as percentages, so that small ratios are not all
  ``0.0``); lists match element by element in any order; other text matches only when equal after case
  folding and whitespace / trailing-period clean-up. (It once also accepted a prediction *contained in* the
  gold text, so ``"-"`` matched -0.5 and ``"0"`` matched 0.02899; that fallback is gone.)
"""

from __future__ import annotations

import math
import numbers
import re

__all__ = ["finqa_exact_match", "kdspy_lenient_match", "normalize_answer_number", "seer_finqa_match"]

_STRIP_WORDS = re.compile(r"\b(?:million|billion|thousand|years?)\b", re.IGNORECASE)
_STRIP_CHARS = str.maketrans("", "", "$£€,'`%\u00a0 ")
_YES_NO = {"yes": 1.0, "no": 0.0, "true": 1.0, "false": 0.0}


def _plain_number(value) -> float | None:
    """A real number (``bool``, ``int``, ``float``, numpy scalars ...) as a finite float, else ``None``."""
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, numbers.Real):
        try:
            value = float(value)
        except OverflowError:
            return None
        return value if math.isfinite(value) else None
    return None


def normalize_answer_number(value) -> float | None:
    """A number read from an answer the lenient way (``"$1,234.5 million"`` -> 1234.5, ``"(12)"`` -> -12.0,
    ``"12.5%"`` -> 12.5, ``"yes"`` -> 1.0, ``True`` -> 1.0); ``None`` if it is not a number."""
    number = _plain_number(value)
    if number is not None or not isinstance(value, str):
        return number
    text = value.strip().lower().replace("\u2212", "-")
    if text in _YES_NO:
        return _YES_NO[text]
    text = _STRIP_WORDS.sub("", text).translate(_STRIP_CHARS)
    negative = text.startswith("(") and text.endswith(")")
    if negative:
        text = text[1:-1]
    try:
        number = float(text)
    except ValueError:
        return None
    if not math.isfinite(number):
        return None
    return -number if negative else number


def finqa_exact_match(pred, gold) -> bool:
    """Official FinQA comparison: ``round(pred, 5) == gold`` for numbers, string equality for yes/no.

    ``pred`` may be a number or a string holding one (``"0.01639"``); ``gold`` is the record's ``exe_ans``.
    """
    if isinstance(gold, str) and gold in ("yes", "no"):
        return isinstance(pred, str) and pred.strip() == gold
    if isinstance(pred, bool) or isinstance(gold, bool):
        return False
    if isinstance(pred, str):
        try:
            pred = float(pred.strip().replace(",", ""))
        except ValueError:
            return False
    if not isinstance(pred, (int, float)) or not math.isfinite(pred):
        return False
    if isinstance(gold, str):
        try:
            gold = float(gold)
        except ValueError:
            return False
    return round(pred, 5) == gold


def _text(value) -> str:
    return " ".join(str(value).casefold().split()).strip(" .")


def seer_finqa_match(pred, gold, *, tolerance: float = 0.001, percentage: bool = True) -> bool:
    """SEER's FinQA answer check, exactly (see the module docstring): SEER's ``evaluate_answer(pred,
    get_answer(...))`` is ``True``; an exception there counts as wrong, as in SEER's ``evaluate_script``."""
    try:
        if gold == "yes":
            gold = 1
        if gold == "no":
            gold = 0
        if type(pred) is str:  # SEER tests the exact type: a str subclass takes the numeric branch
            return bool(pred == gold) or bool(pred in gold)
        if abs(pred - gold) <= tolerance:
            return True
        return bool(percentage and (abs((pred / 100) - gold) <= tolerance
                                    or abs((pred * 100) - gold) <= tolerance))
    except Exception:  # noqa: BLE001 -- SEER's evaluation counts any failure of the check as wrong
        return False


def _within(pred: float, gold: float, tolerance: float, percentage: bool) -> bool:
    candidates = (pred, pred / 100, pred * 100) if percentage else (pred,)
    return any(abs(candidate - gold) <= tolerance for candidate in candidates)


def _rounded_equal(pred: float, gold: float, decimals: int, percentage: bool) -> bool:
    candidates = (pred, pred / 100, pred * 100) if percentage else (pred,)
    for candidate in candidates:
        if abs(gold) < 1:
            if round(candidate * 100, decimals) == round(gold * 100, decimals):
                return True
        elif round(candidate, decimals) == round(gold, decimals):
            return True
    return False


def kdspy_lenient_match(pred, gold, *, tolerance: float = 0.001, percentage: bool = True,
                        decimals: int | None = 2) -> bool:
    """Our own lenient comparison (see the module docstring; not SEER's). ``decimals=None`` turns the rounding
    rule off (then numbers match only within ``tolerance``, possibly after x100 / /100)."""
    if isinstance(pred, (list, tuple)) or isinstance(gold, (list, tuple)):
        preds = list(pred) if isinstance(pred, (list, tuple)) else [pred]
        golds = list(gold) if isinstance(gold, (list, tuple)) else [gold]
        if len(preds) != len(golds):
            return False
        remaining = list(golds)
        for item in preds:
            hit = next((i for i, g in enumerate(remaining)
                        if kdspy_lenient_match(item, g, tolerance=tolerance, percentage=percentage,
                                               decimals=decimals)), None)
            if hit is None:
                return False
            remaining.pop(hit)
        return True
    pred_number = normalize_answer_number(pred)
    gold_number = normalize_answer_number(gold)
    if pred_number is not None and gold_number is not None:
        if _within(pred_number, gold_number, tolerance, percentage):
            return True
        return decimals is not None and _rounded_equal(pred_number, gold_number, decimals, percentage)
    if pred is None or gold is None or pred_number is not None or gold_number is not None:
        return False  # a number never matches a text
    pred_text, gold_text = _text(pred), _text(gold)
    return bool(pred_text) and pred_text == gold_text
