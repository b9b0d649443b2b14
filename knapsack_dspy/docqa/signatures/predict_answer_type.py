"""``PredictAnswerType``: what kind of answer a question asks for (SEER's answer-type attribute)."""

from __future__ import annotations

from typing import Literal

import dspy

__all__ = ["PredictAnswerType"]


class PredictAnswerType(dspy.Signature):
    """You are a financial analyst. Read the start of the document and the question. Does the question
    ask to extract one span of the document (span), several spans (multi-span), to count items (count),
    or to calculate a number (arithmetic)?"""

    question: str = dspy.InputField()
    table: str = dspy.InputField(desc="the table's header rows, cells separated by ' | '")
    text: str = dspy.InputField(desc="the beginning of the document's paragraphs")
    answer_type: Literal["span", "multi-span", "count", "arithmetic"] = dspy.OutputField()
