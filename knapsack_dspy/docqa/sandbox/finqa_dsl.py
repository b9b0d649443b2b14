"""FinQA's program language: parsing, the official token form, and formatting.

A program is a comma-separated list of steps ``op(arg1, arg2)``::

    subtract(5829, 5735), divide(#0, 5735)

Math operations (``add subtract multiply divide exp greater``) take numbers (``5735``, ``-1.5``, ``1,234``,
``23.6%``), constants (``const_100``, ``const_m1`` = -1) or earlier results (``#0`` = the result of step
0). Table operations (``table_max table_min table_sum table_average``) take a table row name and ``none``.

The official token form (what FinQA's models emit and ``czyssrs/FinQA`` ``code/evaluate/evaluate.py``
scores) spells each step as four tokens and ends with ``"EOF"``::

    ["subtract(", "5829", "5735", ")", "divide(", "#0", "5735", ")", "EOF"]

:func:`parse_program` is the strict, whitespace-tolerant parser used for programs written by people or
models: it raises :class:`ProgramError` naming the step and argument at fault. :func:`program_to_tokens`
is the official tokenizer (kept faithful, quirks included, because gold programs are tokenized with it
before scoring). Execution lives in :mod:`knapsack_dspy.docqa.sandbox.finqa_executor`.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from knapsack_dspy.errors import KnapsackDspyError

__all__ = [
    "ALL_OPERATIONS",
    "MATH_OPERATIONS",
    "MAX_PROGRAM_CHARS",
    "MAX_STEPS",
    "TABLE_OPERATIONS",
    "ProgramError",
    "Step",
    "format_program",
    "parse_program",
    "program_to_tokens",
    "split_top_level",
    "steps_to_tokens",
    "tokens_to_program",
]

MATH_OPERATIONS = ("add", "subtract", "multiply", "divide", "exp", "greater")
TABLE_OPERATIONS = ("table_max", "table_min", "table_sum", "table_average")
ALL_OPERATIONS = MATH_OPERATIONS + TABLE_OPERATIONS

#: Longest program text / most steps :func:`parse_program` accepts (FinQA gold programs have <= 10 steps).
MAX_PROGRAM_CHARS = 100_000
MAX_STEPS = 1_000

EOF = "EOF"

_REFERENCE = re.compile(r"#(\d+)")
_CONSTANT = re.compile(r"const_(?:m1|\d+(?:\.\d+)?)")
_NUMBER = re.compile(r"[+-]?(?:\d[\d,]*(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?%?")
_OPERATION_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class ProgramError(KnapsackDspyError, ValueError):
    """A FinQA program that is not well formed; the message names the step / token at fault."""


class Step(NamedTuple):
    """One step of a FinQA program: ``Step("divide", ("#0", "5735"))``."""

    op: str
    args: tuple[str, ...]


def _preview(text: str, limit: int = 60) -> str:
    text = str(text)
    return repr(text if len(text) <= limit else text[:limit] + "...")


def _check_argument(op: str, arg: str, index: int, position: int) -> None:
    where = f"step {index} ({op}), argument {position}"
    if not arg:
        raise ProgramError(f"{where} is empty")
    ref = _REFERENCE.fullmatch(arg)
    if ref:
        # (a reference longer than any step number is not converted: int() refuses 4,301 digits and more)
        if len(ref.group(1)) > len(str(MAX_STEPS)) or int(ref.group(1)) >= index:
            raise ProgramError(f"{where}: {arg} does not refer to an earlier step (steps so far: #0..#{index - 1})"
                               if index else f"{where}: {arg} refers to a step, but this is the first step")
        return
    if op in TABLE_OPERATIONS:
        return  # a row name (or, in the second position, usually "none")
    if arg.startswith("#"):
        raise ProgramError(f"{where}: {_preview(arg)} is not a step reference like #0")
    if _CONSTANT.fullmatch(arg) or _NUMBER.fullmatch(arg):
        return
    if arg.startswith("const_"):
        raise ProgramError(f"{where}: unknown constant {_preview(arg)} (constants look like const_100, const_m1)")
    raise ProgramError(f"{where}: {_preview(arg)} is not a number, a const_ constant or a #n reference")


def _check_step(op: str, args: list[str], index: int) -> Step:
    if op not in ALL_OPERATIONS:
        raise ProgramError(f"step {index}: unknown operation {_preview(op)} (known: {', '.join(ALL_OPERATIONS)})")
    if len(args) != 2:
        raise ProgramError(f"step {index} ({op}) takes 2 arguments, got {len(args)}")
    for position, arg in enumerate(args, start=1):
        _check_argument(op, arg, index, position)
    return Step(op, tuple(args))


def split_top_level(text: str) -> list[str]:
    """Split ``text`` at commas outside parentheses."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return parts


def _parse_text(text: str) -> list[Step]:
    if len(text) > MAX_PROGRAM_CHARS:
        raise ProgramError(f"program is too long ({len(text)} characters; at most {MAX_PROGRAM_CHARS})")
    text = text.strip()
    if text.endswith(EOF) and (text == EOF or not (text[-4].isalnum() or text[-4] == "_")):
        text = text[: -len(EOF)].rstrip().rstrip(",").rstrip()
    if not text:
        raise ProgramError("empty program")
    steps: list[Step] = []
    pos, n = 0, len(text)
    while pos < n:
        index = len(steps)
        if index >= MAX_STEPS:
            raise ProgramError(f"program has more than {MAX_STEPS} steps")
        name = _OPERATION_NAME.match(text, pos)
        if not name:
            raise ProgramError(f"step {index}: expected an operation name at character {pos}, "
                               f"found {_preview(text[pos:pos + 20])}")
        op = name.group(0)
        pos = name.end()
        while pos < n and text[pos].isspace():
            pos += 1
        if pos >= n or text[pos] != "(":
            raise ProgramError(f"step {index} ({op}): expected '(' after the operation name")
        depth, close = 0, -1
        for j in range(pos, n):
            if text[j] == "(":
                depth += 1
            elif text[j] == ")":
                depth -= 1
                if depth == 0:
                    close = j
                    break
        if close < 0:
            raise ProgramError(f"step {index} ({op}): '(' is never closed")
        inner = text[pos + 1:close]
        args = [part.strip() for part in split_top_level(inner)]
        if op in TABLE_OPERATIONS and len(args) > 2:
            # a row name that itself contains commas: everything before the last comma
            cut = inner.rfind(",")
            args = [inner[:cut].strip(), inner[cut + 1:].strip()]
        steps.append(_check_step(op, args, index))
        pos = close + 1
        while pos < n and text[pos].isspace():
            pos += 1
        if pos < n:
            if text[pos] != ",":
                raise ProgramError(f"after step {index} ({op}): expected ',' before the next step, "
                                   f"found {_preview(text[pos:pos + 20])}")
            pos += 1
            while pos < n and text[pos].isspace():
                pos += 1
            if pos >= n:
                raise ProgramError(f"program ends with ',' after step {index}")
    return steps


def _parse_tokens(tokens: list) -> list[Step]:
    tokens = list(tokens)
    if any(not isinstance(token, str) for token in tokens):
        bad = next(token for token in tokens if not isinstance(token, str))
        raise ProgramError(f"program tokens must be strings, got {type(bad).__name__} {_preview(bad)}")
    if tokens and tokens[-1] == EOF:
        tokens = tokens[:-1]
    if not tokens:
        raise ProgramError("empty program")
    if EOF in tokens:
        raise ProgramError(f"'EOF' before the end of the program (token {tokens.index(EOF)})")
    if len(tokens) > 4 * MAX_STEPS:
        raise ProgramError(f"program has more than {MAX_STEPS} steps")
    if len(tokens) % 4:
        raise ProgramError(f"{len(tokens)} tokens do not make whole steps (each step is 4 tokens: "
                           "'op(', arg1, arg2, ')')")
    steps = []
    for index in range(len(tokens) // 4):
        head, arg1, arg2, tail = tokens[4 * index: 4 * index + 4]
        if not head.endswith("("):
            raise ProgramError(f"step {index}: token {4 * index} should be an operation like 'add(', "
                               f"got {_preview(head)}")
        if tail != ")":
            raise ProgramError(f"step {index}: token {4 * index + 3} should be ')', got {_preview(tail)}")
        steps.append(_check_step(head[:-1].strip(), [arg1.strip(), arg2.strip()], index))
    return steps


def parse_program(program: str | list[str] | tuple[str, ...]) -> list[Step]:
    """Parse a FinQA program, written out (``"subtract(5829, 5735), divide(#0, 5735)"``) or in the official
    token form (``["subtract(", "5829", "5735", ")", ..., "EOF"]``, the final ``"EOF"`` optional).

    Whitespace around names, parentheses and commas is ignored. Checks: known operation, exactly two
    arguments, math arguments are numbers / ``const_`` constants / ``#n`` references, ``#n`` refers to an
    earlier step. Table row names may contain parentheses and (written-out form) commas. Raises
    :class:`ProgramError` with a message naming the step and argument.
    """
    if isinstance(program, str):
        return _parse_text(program)
    if isinstance(program, (list, tuple)):
        return _parse_tokens(program)
    raise ProgramError(f"a program is a string or a list of tokens, got {type(program).__name__}")


def format_program(steps: list[Step]) -> str:
    """``[Step("add", ("1", "2")), ...]`` -> ``"add(1, 2), ..."`` (the FinQA data set's spelling)."""
    return ", ".join(f"{step.op}({', '.join(step.args)})" for step in steps)


def steps_to_tokens(steps: list[Step]) -> list[str]:
    """The official token form of parsed steps, ending in ``"EOF"``."""
    tokens: list[str] = []
    for step in steps:
        tokens.extend([f"{step.op}(", *step.args, ")"])
    tokens.append(EOF)
    return tokens


def program_to_tokens(program: str) -> list[str]:
    """Tokenize a written-out program exactly as the official FinQA scripts do (``program_tokenization``).

    The text is cut at ``", "``; within each piece every ``(`` ends a token (which keeps the ``(``) and
    every ``)`` is a token of its own; ``"EOF"`` is appended. No validation: malformed text gives tokens
    that the official executor then rejects (e.g. ``"add(1,2)"`` -> ``["add(", "1,2", ")", "EOF"]``), and a
    row name with parentheses is split the official way. Use :func:`parse_program` +
    :func:`steps_to_tokens` for a validated, canonical token form.
    """
    if not isinstance(program, str):
        raise ProgramError(f"program_to_tokens expects a string, got {type(program).__name__}")
    tokens: list[str] = []
    for piece in program.split(", "):
        pending = ""
        for ch in piece:
            if ch == ")":
                if pending:
                    tokens.append(pending)
                tokens.append(ch)
                pending = ""
            elif ch == "(":
                tokens.append(pending + ch)
                pending = ""
            else:
                pending += ch
        if pending:
            tokens.append(pending)
    tokens.append(EOF)
    return tokens


def tokens_to_program(tokens: list[str]) -> str:
    """Official token form -> written-out program (validated; raises :class:`ProgramError`)."""
    return format_program(_parse_tokens(tokens))
