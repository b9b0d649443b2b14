"""``WriteFinqaProgram``: program-of-thought in the FinQA DSL (a repair continues its conversation)."""

from __future__ import annotations

import dspy

from knapsack_dspy.docqa.signatures.program_conventions import FINQA_DSL_CONVENTIONS

__all__ = ["WriteFinqaProgram"]


class WriteFinqaProgram(dspy.Signature):
    __doc__ = ("You are a financial analyst. Read the table and the text, then write a program in the FinQA "
               "language that computes the answer to the question.\n\n" + FINQA_DSL_CONVENTIONS)

    table: str = dspy.InputField(desc="the table, one row per line, cells separated by ' | '")
    text: str = dspy.InputField(desc="paragraphs of the report")
    question: str = dspy.InputField()
    program: str = dspy.OutputField(desc="FinQA program, e.g. subtract(5829, 5735), divide(#0, 5735)")

