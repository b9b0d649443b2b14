"""Safe execution of generated programs: the FinQA DSL (official semantics) and a restricted Python subset.

    from knapsack_dspy.docqa.sandbox import execute_program, execute_python, execute_finqa_program, parse_program

Nothing heavy is imported here (only the standard library).
"""

from knapsack_dspy.docqa.sandbox.dispatch import PROGRAM_KINDS, execute_program
from knapsack_dspy.docqa.sandbox.finqa_dsl import (
    ProgramError,
    Step,
    format_program,
    parse_program,
    program_to_tokens,
    steps_to_tokens,
    tokens_to_program,
)
from knapsack_dspy.docqa.sandbox.finqa_executor import execute_finqa_program, run_official_tokens
from knapsack_dspy.docqa.sandbox.python_executor import Limits, execute_python
from knapsack_dspy.docqa.sandbox.result import ExecutionResult

__all__ = [
    "PROGRAM_KINDS",
    "ExecutionResult",
    "Limits",
    "ProgramError",
    "Step",
    "execute_finqa_program",
    "execute_program",
    "execute_python",
    "format_program",
    "parse_program",
    "program_to_tokens",
    "run_official_tokens",
    "steps_to_tokens",
    "tokens_to_program",
]
