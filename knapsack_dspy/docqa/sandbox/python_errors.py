"""The one error type of the Python sandbox: :class:`ProgramFailure` (kind, message, line)."""

from __future__ import annotations

__all__ = ["ProgramFailure"]


class ProgramFailure(Exception):
    """Why a sandboxed program was rejected or stopped.

    ``kind`` reads like a Python exception name (``NameError``, ``ZeroDivisionError``, ``NotAllowed``,
    ``LimitExceeded``, ``TimeoutError``, ...); ``line`` is the program line, when known.
    """

    def __init__(self, kind: str, message: str, line: int | None = None):
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.line = line

    def describe(self) -> str:
        """One line: ``"NameError: name 'x' is not defined (line 3)"``."""
        text = " ".join(f"{self.kind}: {self.message}".split())
        return f"{text} (line {self.line})" if self.line else text
