"""What a results row says happened to its example, and which rows a resume does again.

Every row of an LM run records ``error_kind`` when something failed:

- ``"transient"``: the LM could not be asked -- rate limit, 5xx, timeout, dropped connection, a reply that
  was not JSON or had no choices (``llm.errors.lm_error_kind``). Asking again may work: a resume retries
  these rows automatically.
- ``"config"``: the LM could not be asked as configured -- credentials, quota, unknown model, a rejected
  request, a prompt longer than the context window. Retried only with ``--retry-errors`` (after a fix).
- ``"internal"``: the pipeline failed for a reason that is neither the LM's nor its answer's (a bug).
- ``"answer"``: the LM answered, but its answer could not be used (a program that fails, a reply in the
  wrong format); the row is answered and wrong.

Rows written before ``error_kind`` existed (schema version 1) get theirs from their shape when they are read
(``row_schema``): a failed LM call left no ``output`` and kept a ``traceback`` ("could not ask", kind unknown:
``"unrecorded"``); any other error is the answer's.
"""

from __future__ import annotations

from knapsack_dspy.bench.results.row_schema import (
    ANSWER,
    CONFIG,
    ERROR_KINDS,
    INTERNAL,
    TRANSIENT,
    UNRECORDED,
    ResultRow,
)

__all__ = [
    "ANSWER",
    "ANSWERED_KINDS",
    "CONFIG",
    "ERROR_KINDS",
    "INTERNAL",
    "NOT_ASKED_KINDS",
    "TRANSIENT",
    "UNRECORDED",
    "could_not_ask",
    "error_kind",
    "redo_on_resume",
]

NOT_ASKED_KINDS = (TRANSIENT, CONFIG)
ANSWERED_KINDS = (None, ANSWER)


def error_kind(row: ResultRow) -> str | None:
    """The row's ``error_kind``: one of ``ERROR_KINDS``, ``"unrecorded"`` (a version-1 row whose LM call
    failed), ``None`` without an error."""
    return row.error_kind


def could_not_ask(row: ResultRow) -> bool:
    """The LM never answered this row's example (transient or configuration failure, or an old row's failed
    call): it counts as wrong in the scores, but says nothing about the model."""
    return error_kind(row) in (*NOT_ASKED_KINDS, UNRECORDED)


def redo_on_resume(row: ResultRow, retry_errors: bool = False) -> bool:
    """Whether a resume answers this row's example again (the new row then replaces it): transient failures
    always; with ``retry_errors`` every row with an error."""
    kind = error_kind(row)
    return kind == TRANSIENT or (retry_errors and kind is not None)
