"""``WritePythonProgram`` / ``WritePythonLookupProgram`` / ``RepairPythonProgram``: program of thought in Python
(numbers copied into named variables, or read with ``table[...]`` look-ups)."""

from __future__ import annotations

import dspy

from knapsack_dspy.signatures.program_conventions import (
    PYTHON_CONVENTIONS,
    PYTHON_LOOKUP_CONVENTIONS,
    REPAIR_INSTRUCTIONS,
)

__all__ = ["RepairPythonProgram", "WritePythonLookupProgram", "WritePythonProgram"]


class WritePythonProgram(dspy.Signature):
    __doc__ = ("You are a financial analyst. Read the table and the text, then write a short Python program "
               "that computes the answer to the question.\n\n" + PYTHON_CONVENTIONS)

    table: str = dspy.InputField(desc="the table, one row per line, cells separated by ' | '")
    text: str = dspy.InputField(desc="paragraphs of the report")
    question: str = dspy.InputField()
    program: str = dspy.OutputField(desc="Python statements that set `ans`")


class WritePythonLookupProgram(WritePythonProgram):
    __doc__ = ("You are a financial analyst. Read the table and the text, then write a short Python program "
               "that computes the answer to the question.\n\n" + PYTHON_LOOKUP_CONVENTIONS)


class RepairPythonProgram(WritePythonProgram):
    __doc__ = (REPAIR_INSTRUCTIONS + "\n\n" + "The program is Python.\n\n" + PYTHON_CONVENTIONS)

    failed_program: str = dspy.InputField(desc="your previous program, which failed")
    error: str = dspy.InputField(desc="why it failed")
