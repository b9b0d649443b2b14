"""``ExtractAnswer``: answer by copying from the table or the text (span and multi-span questions)."""

from __future__ import annotations

import dspy

__all__ = ["ExtractAnswer"]


class ExtractAnswer(dspy.Signature):
    """You are a financial analyst. Read the table and the text, then answer the question by copying the answer
    from them.

    Copy the answer exactly as the table or the text writes it: a name, a phrase, a sentence, or a value with its
    signs ("$9.6 million", "22.9%", "(1,234)"). If the question asks for several items, answer with a JSON list
    of them, each copied exactly, e.g. ["2019", "2018"]. For a "which year" question, give the year as the
    table's column heading writes it."""

    table: str = dspy.InputField(desc="the table, one row per line, cells separated by ' | '")
    text: str = dspy.InputField(desc="paragraphs of the report")
    question: str = dspy.InputField()
    answer: str = dspy.OutputField(desc="the exact words from the table or text, or a JSON list of them")
