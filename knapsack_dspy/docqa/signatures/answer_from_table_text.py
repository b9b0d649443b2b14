"""``AnswerFromTableText``: answer a question directly from a table and text (no program)."""

from __future__ import annotations

import dspy

__all__ = ["AnswerFromTableText"]


class AnswerFromTableText(dspy.Signature):
    """You are a financial analyst. Read the table and the text, then answer the question.

    Give only the answer in `answer`: a number for calculations and counts (digits only, e.g. -12.5 or 3;
    no currency signs, no thousands separators, no unit words), the exact words from the table or text
    for a span, and a JSON list of strings for several spans (e.g. ["2019", "2018"]).
    Give the unit of a numeric answer in `scale`: one of thousand, million, billion, percent, or none.
    A percentage answer is written in percent units (12.5 for 12.5%) with scale percent."""

    table: str = dspy.InputField(desc="the table, one row per line, cells separated by ' | '")
    text: str = dspy.InputField(desc="paragraphs of the report")
    question: str = dspy.InputField()
    answer: str = dspy.OutputField(desc="the answer only: a number, a span, or a JSON list of spans")
    scale: str = dspy.OutputField(desc="thousand, million, billion, percent, or none")
