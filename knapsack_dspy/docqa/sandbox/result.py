"""The outcome of running a program: :class:`ExecutionResult`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from knapsack_dspy.messages import one_line

__all__ = ["ExecutionResult"]


@dataclass(frozen=True)
class ExecutionResult:
    """What a program computed, or why it could not.

    ``ok``: the program ran and produced an answer. ``answer``: the answer (a number, ``"yes"``/``"no"``,
    a string or a list; ``None`` when ``ok`` is false). ``scale``: ``""``, ``"thousand"``, ``"million"``,
    ``"billion"`` or ``"percent"`` (Python programs may set it; FinQA programs never do). ``error``: one
    line saying what went wrong, at most ``messages.MAX_MESSAGE_CHARS`` characters (``None`` when ``ok``).
    ``variables``: the variables the program assigned (Python) or the result of each step, ``{"#0": ...,
    "#1": ...}`` (FinQA), as far as execution got.
    """

    ok: bool
    answer: Any = None
    scale: str = ""
    error: str | None = None
    variables: dict = field(default_factory=dict)

    @classmethod
    def success(cls, answer: Any, *, scale: str = "", variables: dict | None = None) -> ExecutionResult:
        return cls(ok=True, answer=answer, scale=scale, error=None, variables=dict(variables or {}))

    @classmethod
    def failure(cls, error: str, *, variables: dict | None = None) -> ExecutionResult:
        line = one_line(error) or "execution failed"
        return cls(ok=False, answer=None, scale="", error=line, variables=dict(variables or {}))
