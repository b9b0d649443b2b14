"""The error raised for unusable scoring input (gold or prediction files, in-memory records)."""

from __future__ import annotations

from knapsack_dspy.errors import KnapsackDspyError
from knapsack_dspy.messages import one_line

__all__ = ["ScoringInputError"]


class ScoringInputError(KnapsackDspyError, ValueError):
    """Bad scoring input. ``str(error)`` is one line naming where: ``<file>: <record>: field '<f>': <problem>``.

    Attributes (``None`` when not applicable): ``source`` (file path), ``where`` (record description such as
    ``"context 3, question 2 (uid 'ab12')"``), ``field`` and ``problem``.
    """

    def __init__(self, problem: str, *, source: str | None = None, where: str | None = None,
                 field: str | None = None):
        self.problem = problem
        self.source = source
        self.where = where
        self.field = field
        parts = [p for p in (source, where) if p]
        if field:
            parts.append(f"field {field!r}")
        parts.append(problem)
        super().__init__(one_line(": ".join(parts)))
