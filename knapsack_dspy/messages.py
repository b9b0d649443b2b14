"""Error messages meant for one line: whitespace collapsed, length bounded.

A message quotes what it is about (a label, an answer, a field value), and what it quotes can be anything a
file or a model produced: a 10,000-character table label would make a 10 KB error line (which the
program-of-thought repair prompt would then carry back to the model). :func:`one_line` keeps the start and
the end of a long message (the end often says where: ``(line 3)``) and drops the middle.
"""

from __future__ import annotations

__all__ = ["MAX_MESSAGE_CHARS", "one_line"]

MAX_MESSAGE_CHARS = 400
_GAP = " [...] "


def one_line(text, limit: int = MAX_MESSAGE_CHARS) -> str:
    """``text`` on one line (whitespace runs collapsed) and at most ``limit`` characters: a longer text keeps
    its first two thirds and its last third around ``" [...] "``."""
    line = " ".join(str(text).split())
    if len(line) <= limit:
        return line
    tail = (limit - len(_GAP)) // 3
    head = limit - len(_GAP) - tail
    return line[:head] + _GAP + line[len(line) - tail :]
