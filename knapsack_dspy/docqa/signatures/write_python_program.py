"""``WritePythonProgram`` / ``WritePythonLookupProgram``: program of thought in Python (numbers copied into named
variables, or read with ``table[...]`` look-ups); ``WriteFinqaPythonProgram`` / ``WriteFinqaPythonLookupProgram``:
the same for FinQA questions, with FinQA's answer rules (a percentage as a ratio, yes / no). A repair continues the
writer's conversation (``modules/solvers/repair_turn.py``): it has no signature of its own."""

from __future__ import annotations

import dspy

from knapsack_dspy.docqa.signatures.program_conventions import (
    FINQA_PYTHON_CONVENTIONS,
    FINQA_PYTHON_LOOKUP_CONVENTIONS,
    PYTHON_CONVENTIONS,
    PYTHON_LOOKUP_CONVENTIONS,
)

__all__ = ["WriteFinqaPythonLookupProgram", "WriteFinqaPythonProgram", "WritePythonLookupProgram",
           "WritePythonProgram"]


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



class WriteFinqaPythonProgram(WritePythonProgram):
    __doc__ = ("You are a financial analyst. Read the table and the text, then write a short Python program "
               "that computes the answer to the question.\n\n" + FINQA_PYTHON_CONVENTIONS)


class WriteFinqaPythonLookupProgram(WritePythonProgram):
    __doc__ = ("You are a financial analyst. Read the table and the text, then write a short Python program "
               "that computes the answer to the question.\n\n" + FINQA_PYTHON_LOOKUP_CONVENTIONS)
