"""``PredictModality``: which part of a document a question needs (SEER's modality attribute)."""

from __future__ import annotations

from typing import Literal

import dspy

__all__ = ["PredictModality"]


class PredictModality(dspy.Signature):
    """You are a financial analyst. Read the start of the document and the question. Do you need data
    from the table, from the text paragraphs, or from both (hybrid) to answer the question?"""

    question: str = dspy.InputField()
    table: str = dspy.InputField(desc="the table's header rows, cells separated by ' | '")
    text: str = dspy.InputField(desc="the beginning of the document's paragraphs")
    modality: Literal["table", "text", "hybrid"] = dspy.OutputField()
