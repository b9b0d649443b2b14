"""What ``POST /answer`` accepts: a JSON object with the question, the table rows and the paragraphs.

Types are strict (a number is not a string, ``true`` is not a number) and unknown fields are refused, so a
typo is a 422 naming it, not a silently ignored field. Sizes are bounded besides the body limit, so a body
just under it cannot hold a million tiny cells.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["MAX_CELLS", "MAX_PARAGRAPHS", "MAX_QUESTION_CHARS", "AnswerRequest"]

MAX_QUESTION_CHARS = 4_000
MAX_ROWS = 2_000
MAX_CELLS = 50_000
MAX_PARAGRAPHS = 1_000

Cell = str | int | float | None


class AnswerRequest(BaseModel):
    """``{"question": "...", "table": [["", "2019", "2018"], ["Revenue", "1,200", "1,100"]], "paragraphs": [...]}``"""

    model_config = ConfigDict(extra="forbid", strict=True)

    question: str = Field(min_length=1, max_length=MAX_QUESTION_CHARS)
    table: list[list[Cell]] = Field(default_factory=list, max_length=MAX_ROWS)
    paragraphs: list[str] = Field(default_factory=list, max_length=MAX_PARAGRAPHS)

    def cell_count(self) -> int:
        return sum(len(row) for row in self.table)
