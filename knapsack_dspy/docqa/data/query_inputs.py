"""The inputs of one question put to a compiled program (``kdspy ask``, ``kdspy serve``), checked in one place.

A question is a non-empty string; the table a list of rows, each a list of cells (strings, numbers or null);
the paragraphs a list of strings. No text may hold a lone surrogate (``\\ud800``-``\\udfff``: half of a UTF-16
pair, which JSON can carry but no LM can be sent). Every problem is one line naming the field.
"""

from __future__ import annotations

from knapsack_dspy.errors import KnapsackDspyError

__all__ = ["QueryInputError", "check_query_inputs"]


class QueryInputError(KnapsackDspyError, ValueError):
    """The question, table or paragraphs are not what a program can be asked; one line naming the field."""


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def check_query_inputs(question, table, paragraphs) -> dict:
    """``{"question", "table", "paragraphs"}`` when they can be asked (``table`` / ``paragraphs`` None: empty);
    :class:`QueryInputError` otherwise."""
    table = [] if table is None else table
    paragraphs = [] if paragraphs is None else paragraphs
    if not isinstance(question, str) or not question.strip():
        raise QueryInputError("the question must be a non-empty string")
    if not isinstance(table, list) or any(not isinstance(row, list) for row in table):
        raise QueryInputError("the table must be a list of rows (lists of cells)")
    if any(not (cell is None or isinstance(cell, (str, int, float))) or isinstance(cell, bool)
           for row in table for cell in row):
        raise QueryInputError("table cells must be strings, numbers or null")
    if not isinstance(paragraphs, list) or any(not isinstance(p, str) for p in paragraphs):
        raise QueryInputError("paragraphs must be a list of strings")
    texts = [question, *paragraphs, *(cell for row in table for cell in row if isinstance(cell, str))]
    if not all(_encodable(text) for text in texts):
        raise QueryInputError("the question, table or text holds a lone surrogate (\\ud800-\\udfff), which is not "
                              "a character; no LM can be sent it")
    return {"question": question, "table": table, "paragraphs": paragraphs}
