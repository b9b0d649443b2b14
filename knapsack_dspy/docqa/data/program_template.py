"""SEER-style templates of FinQA programs.

``"divide(100, 100), divide(3.8, #0)"`` -> ``"divide(X_0,X_0),divide(X_1,#0)"``.

The format follows the ``program_template`` column of SEER's FinQA metadata CSVs: numbers and table row
names become ``X_<i>``, numbered by first appearance, equal arguments (as written) sharing an index;
constants (``const_100``) become ``constant``; step references (``#0``) stay; table operations drop their
``none`` argument; no spaces. (SEER numbers a purely numeric row name such as ``table_max(2015, none)``
as ``X_1``; here it is ``X_0`` like any other first argument - the only difference on its CSVs.)

Programs are parsed by the execution layer's FinQA DSL parser; TAT-QA derivation templates
(:mod:`knapsack_dspy.docqa.data.tatqa_derivation`) use the same format.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from knapsack_dspy.docqa.sandbox.finqa_dsl import TABLE_OPERATIONS, ProgramError, Step, parse_program

__all__ = ["ProgramError", "finqa_program_template", "program_template"]

_STEP_REF = re.compile(r"^#\d+$")


def program_template(steps: Sequence[Step]) -> str:
    """Template of parsed steps (objects with ``op`` and ``args``)."""
    index: dict[str, int] = {}

    def placeholder(arg: str) -> str:
        if _STEP_REF.match(arg):
            return arg
        if arg.startswith("const_"):
            return "constant"
        index.setdefault(arg, len(index))
        return f"X_{index[arg]}"

    parts = []
    for step in steps:
        args = step.args[:1] if step.op in TABLE_OPERATIONS else step.args
        parts.append(f"{step.op}({','.join(placeholder(a) for a in args)})")
    return ",".join(parts)


def finqa_program_template(program: str) -> str:
    """Template of a FinQA program string; raises ``ProgramError`` (a ``ValueError``) for a bad program."""
    return program_template(parse_program(program))
