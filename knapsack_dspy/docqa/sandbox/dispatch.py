"""One entry point for both program kinds: :func:`execute_program`."""

from __future__ import annotations

from knapsack_dspy.docqa.sandbox.finqa_executor import execute_finqa_program
from knapsack_dspy.docqa.sandbox.python_executor import execute_python
from knapsack_dspy.docqa.sandbox.result import ExecutionResult

__all__ = ["PROGRAM_KINDS", "execute_program"]

PROGRAM_KINDS = ("python", "finqa")


def execute_program(code, table: list[list[str]] | None = None, kind: str = "python",
                    time_limit: float = 1.0) -> ExecutionResult:
    """Run ``code`` as a sandboxed Python program (``kind="python"``) or a FinQA DSL program
    (``kind="finqa"``, a string or the official token list). Raises ``ValueError`` only for an unknown
    ``kind``; every problem with the program itself is an ``ExecutionResult`` with ``ok=False``."""
    if kind == "python":
        return execute_python(code, table, time_limit=time_limit)
    if kind == "finqa":
        return execute_finqa_program(code, table)
    raise ValueError(f"unknown program kind {kind!r}; expected one of {', '.join(PROGRAM_KINDS)}")
