"""How many leading rows of a table are column headers (for the sandbox's table look-ups and for retrieval).

On the bottom floor, standard library only: ``knapsack_dspy.execution`` reads it without importing
``knapsack_dspy.retrieval`` (whose package imports numpy); ``knapsack_dspy.retrieval.table_rows`` re-exports
it for the retrievers.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["MAX_HEADER_ROWS", "header_row_count"]

MAX_HEADER_ROWS = 4


def header_row_count(rows: Sequence[Sequence[str]]) -> int:
    """How many leading rows are column headers.

    The first row always is. Following rows whose first cell is blank are too (TAT-QA tables put years,
    units such as "€m" or "(In thousands)" in extra header rows that have no row label), up to
    ``MAX_HEADER_ROWS`` and never the whole table.
    """
    if not rows:
        return 0
    count = 1
    while (
        count < len(rows) - 1 and count < MAX_HEADER_ROWS and rows[count] and not str(rows[count][0]).strip()
    ):
        count += 1
    return count
