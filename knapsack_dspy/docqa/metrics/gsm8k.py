"""GSM8K's answer metric as DSPy's tutorials score it (``dspy.datasets.gsm8k.gsm8k_metric``), rewritten here.

An answer's number is read the way that metric reads it: the first line of the answer; its last
whitespace-separated token that holds a digit; that token cut at its first ``.`` (``72.0`` -> ``72``,
``3.75`` -> ``3``); the digits left (``$1,080`` -> ``1080``, ``18kg`` -> ``18``, ``-5`` -> ``5``: signs, currency
signs, thousands commas and units go); as an integer. The gold answer (the number after ``####``) is read the same
way, and the answer is right when both integers are equal.

One difference, on purpose: an answer with no digit at all is *wrong* here, whereas DSPy's metric reads it as 0
(so "I don't know" would match a gold answer of 0). The difference can only matter for gold answers of 0.
"""

from __future__ import annotations

__all__ = ["answer_integer", "score_gsm8k_answer"]


def answer_integer(answer) -> int | None:
    """The integer an answer states (module docstring); ``None`` when its first line holds no digit."""
    lines = str("" if answer is None else answer).strip().split("\n")
    tokens = [token for token in lines[0].split() if any(c.isdigit() for c in token)]
    if not tokens:
        return None
    digits = "".join(c for c in tokens[-1].split(".")[0] if c.isdigit())
    return int(digits) if digits else None


def score_gsm8k_answer(predicted, gold) -> bool:
    """Whether ``predicted`` states the gold answer's integer (module docstring)."""
    expected, got = answer_integer(gold), answer_integer(predicted)
    return expected is not None and got is not None and got == expected
