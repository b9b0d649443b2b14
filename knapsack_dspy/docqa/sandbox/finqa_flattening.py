"""Flattening a FinQA program written with nested or many-argument calls into the DSL's two-argument steps.

The FinQA DSL is a flat list of two-argument steps, but models (the embedded 1.5B among them, most often
zero-shot) write what they know from other languages::

    divide(table_sum(eurasia sbu, none), table_sum(total revenue, none))
    add(45, 45, 45, 45, 44), divide(#0, 5)
    table_max(remaining terms)

:func:`flatten_program` rewrites such a program into the steps it stands for, without changing what it
computes:

- a call nested as an argument becomes a step of its own, placed before the step that uses it, and the
  argument becomes a reference to it (``table_sum(eurasia sbu, none), table_sum(total revenue, none),
  divide(#0, #1)``); ``#n`` references to the written steps are renumbered;
- ``add`` / ``multiply`` with more than two arguments become a chain, left to right (``add(45, 45)``,
  ``add(#0, 45)``, ...); ``sum(a, b, ...)`` (two arguments or more) is such an ``add``;
- a table operation with one argument gets ``none`` as its second, the only value the DSL puts there.

Nothing else is guessed: other operation names (``average``, a one-argument ``sum``), infix arithmetic (``a - b``), a
reference to a step that does not precede it, a subtraction / division with three arguments, or a number written
with a thousands separator (``add(1,590, 1,400)``: its commas would split it into arguments) leave the program as
written, so the strict parser's message names what is wrong. A program that already parses is returned
unchanged; a final ``EOF`` is dropped as the parser drops it.
"""

from __future__ import annotations

import re

from knapsack_dspy.docqa.sandbox.finqa_dsl import (
    MATH_OPERATIONS,
    TABLE_OPERATIONS,
    ProgramError,
    Step,
    format_program,
    parse_program,
    split_top_level,
)

__all__ = ["CHAINED_OPERATIONS", "flatten_program"]

#: Math operations whose many-argument form is a left-to-right chain of two-argument steps.
CHAINED_OPERATIONS = ("add", "multiply")
_CALL = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_]*)\s*\(")
_REFERENCE = re.compile(r"#(\d+)")
_THOUSANDS = re.compile(r"\d,\d{3}(?!\d)")  # 1,590: a number, not two arguments
_MAX_DEPTH = 20


class _CannotFlatten(Exception):
    pass


def _as_call(text: str) -> tuple[str, str] | None:
    """``("divide", "a, b")`` when ``text`` is exactly one call ``divide(a, b)``; None when it is not a call."""
    match = _CALL.match(text)
    if not match or not text.endswith(")"):
        return None
    depth = 0
    for i in range(match.end() - 1, len(text)):
        if text[i] == "(":
            depth += 1
        elif text[i] == ")":
            depth -= 1
            if depth == 0:
                # the parenthesis that opened the call must close at the end: "f(a) - g(b)" is not one call
                return (match.group(1), text[match.end():i]) if i == len(text) - 1 else None
    return None


class _Flattener:
    def __init__(self) -> None:
        self.steps: list[Step] = []
        self.written: dict[int, int] = {}  # the written step's number -> its new number

    def step(self, op: str, args: tuple[str, ...]) -> str:
        self.steps.append(Step(op, args))
        return f"#{len(self.steps) - 1}"

    def argument(self, text: str, depth: int) -> str:
        reference = _REFERENCE.fullmatch(text)
        if reference:
            number = int(reference.group(1)) if len(reference.group(1)) < 6 else -1
            if number not in self.written:
                raise _CannotFlatten  # a step that does not precede this one
            return f"#{self.written[number]}"
        if _as_call(text) is not None:
            return self.call(text, depth + 1)
        return text

    def call(self, text: str, depth: int) -> str:
        parsed = _as_call(text)
        if parsed is None or depth > _MAX_DEPTH:
            raise _CannotFlatten
        op, inner = parsed
        if op in TABLE_OPERATIONS:
            if "(" not in inner and "," not in inner and inner.strip():
                if inner.strip().startswith("#"):
                    raise _CannotFlatten  # a step's result where a row name goes
                return self.step(op, (inner.strip(), "none"))
            # the strict parser reads table rows (row names may hold parentheses and commas)
            try:
                (step,) = parse_program(f"{op}({inner})")
            except (ProgramError, ValueError):
                raise _CannotFlatten from None
            return self.step(step.op, step.args)
        if (op not in MATH_OPERATIONS and op != "sum") or _THOUSANDS.search(inner):
            raise _CannotFlatten
        args = [self.argument(part.strip(), depth) for part in split_top_level(inner)]
        if op == "sum":
            if len(args) < 2:
                raise _CannotFlatten
            op = "add"
        if any(not arg for arg in args):
            raise _CannotFlatten
        if len(args) == 2:
            return self.step(op, tuple(args))
        if len(args) < 2 or op not in CHAINED_OPERATIONS:
            raise _CannotFlatten
        result = self.step(op, (args[0], args[1]))
        for arg in args[2:]:
            result = self.step(op, (result, arg))
        return result


def flatten_program(text: str) -> str:
    """``text`` as flat FinQA steps when it is written with nested calls, many-argument ``add`` / ``multiply``
    or one-argument table operations (the module docstring); otherwise ``text`` unchanged -- a program that
    parses already, and one this rewrite cannot make parse. Never raises."""
    if not isinstance(text, str):
        return text
    try:
        parse_program(text)
        return text
    except ProgramError:
        pass
    flattener = _Flattener()
    body = text.strip()
    if body.endswith("EOF"):
        body = body[:-3].rstrip().rstrip(",").rstrip()
    try:
        for number, written in enumerate(split_top_level(body)):
            flattener.call(written.strip(), 0)
            flattener.written[number] = len(flattener.steps) - 1
        flat = format_program(flattener.steps)
        parse_program(flat)
    except (_CannotFlatten, ProgramError, RecursionError):
        return text
    return flat
