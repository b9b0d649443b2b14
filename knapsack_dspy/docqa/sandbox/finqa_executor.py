"""Run FinQA programs with the semantics of the official evaluation (``czyssrs/FinQA``,
``code/evaluate/evaluate.py``, ``eval_program``).

Behaviours matched on purpose (each has a test):

* The official structure check on the token form: every 4th token (0, 4, 8, ...) is an operation once its
  ``(`` is stripped, every token 3, 7, 11, ... is ``)``. The last token is dropped as the ``"EOF"`` marker
  (by :func:`run_official_tokens` whatever it is; :func:`execute_finqa_program` first appends a missing
  ``"EOF"``). The steps are then found the official way: tokens joined with ``|``, cut at ``)``, a trailing
  incomplete step ignored.
* Numbers are read as ``str_to_num`` does: commas removed, then Python ``float``; failing that, text with
  ``%`` is divided by 100 (``"5%"`` -> 0.05) and ``const_<x>`` is ``x`` (``const_m1`` -> -1).
* ``#n`` is the result of step ``n`` (the official code reads the digits after removing ``#``).
* ``greater`` gives ``"yes"`` / ``"no"``; ``exp(a, b)`` is ``a ** b``.
* ``table_max / table_min / table_sum / table_average(row, none)``: the table's rows keyed by their first
  cell (header included, a later duplicate wins); the row's other cells read as ``process_row`` does:
  ``$`` removed, everything from the first ``(`` on dropped, then ``str_to_num`` -- one unreadable cell
  (``"-"``, ``""``, ``"(123)"``) makes the step invalid. A ``#n`` row argument reuses the row of the previous
  table step (an official quirk).
* A step whose operation ends up unrecognised after the official splitting is skipped; the answer is the
  result of the last step computed, rounded to 5 decimals (``yes`` / ``no`` unrounded).

Deliberate differences, none of which can change execution accuracy: ``ok`` is false (with a reason)
instead of returning ``"n/a"`` / a non-finite or complex number; arithmetic on a ``yes``/``no`` result is
an error (the official code would concatenate strings for ``add``); at most
:data:`~knapsack_dspy.docqa.sandbox.finqa_dsl.MAX_STEPS` steps.
"""

from __future__ import annotations

import difflib
import math

from knapsack_dspy.docqa.sandbox.finqa_dsl import (
    ALL_OPERATIONS,
    EOF,
    MATH_OPERATIONS,
    MAX_STEPS,
    ProgramError,
    parse_program,
    steps_to_tokens,
)
from knapsack_dspy.docqa.sandbox.result import ExecutionResult

__all__ = ["execute_finqa_program", "official_cell_number", "official_number", "run_official_tokens"]

_YES_NO = ("yes", "no")


class _Invalid(Exception):
    """The program is invalid in the official sense; the message says why."""


def official_number(text: str) -> float | None:
    """A number argument / cell text read as the official ``str_to_num``; ``None`` where it gives ``"n/a"``
    (or raises, for a ``const_`` it cannot read)."""
    if not isinstance(text, str):
        return None
    text = text.replace(",", "")
    try:
        return float(text)
    except ValueError:
        pass
    if "%" in text:
        try:
            return float(text.replace("%", "")) / 100.0
        except ValueError:
            return None
    if "const" in text:
        text = text.replace("const_", "")
        try:
            return float("-1" if text == "m1" else text)
        except ValueError:
            return None
    return None


def official_cell_number(cell: str) -> float | None:
    """A table cell read as the official ``process_row``: ``$`` removed, text from the first ``(`` on
    dropped, then :func:`official_number` (``"$ 1,234"`` -> 1234.0, ``"12%"`` -> 0.12, ``"(12)"`` -> None)."""
    if not isinstance(cell, str):
        return None
    text = cell.replace("$", "").strip()
    text = text.split("(")[0].strip()
    return official_number(text)


def _short(text, limit: int = 40) -> str:
    text = str(text)
    return repr(text if len(text) <= limit else text[:limit] + "...")


def _reference(arg: str, results: dict, where: str):
    try:
        index = int(arg.replace("#", ""))
    except ValueError:
        raise _Invalid(f"{where}: {_short(arg)} is not a step reference") from None
    if index not in results:
        raise _Invalid(f"{where}: {arg} refers to a step that has no result (steps so far: {len(results)})")
    return index, results[index]


def _operand(arg: str, results: dict, where: str):
    if "#" in arg:
        _, value = _reference(arg, results, where)
        return value
    value = official_number(arg)
    if value is None:
        raise _Invalid(f"{where}: {_short(arg)} is not a number")
    return value


def _arithmetic(op: str, x, y, where: str):
    if op == "greater":
        try:
            return "yes" if x > y else "no"
        except TypeError:
            raise _Invalid(f"{where}: cannot compare {_short(x)} with {_short(y)}") from None
    for value in (x, y):
        if isinstance(value, str):
            raise _Invalid(f"{where}: cannot do arithmetic on the yes/no answer {value!r}")
    try:
        if op == "add":
            return x + y
        if op == "subtract":
            return x - y
        if op == "multiply":
            return x * y
        if op == "divide":
            return x / y
        return x**y  # exp
    except ZeroDivisionError:
        raise _Invalid(f"{where}: division by zero") from None
    except OverflowError:
        raise _Invalid(f"{where}: result too large") from None


def _table_rows(table, where: str) -> dict:
    if table is None:
        raise _Invalid(f"{where}: a table operation needs a table, but none was given")
    rows = {}
    try:
        for row in table:
            rows[row[0]] = row[1:]
    except (TypeError, IndexError, KeyError):
        raise _Invalid(f"{where}: the table is not a list of rows (each a non-empty list of cells)") from None
    return rows


def _row_numbers(name: str, cells, where: str) -> list[float]:
    numbers = []
    for position, cell in enumerate(cells, start=1):
        value = official_cell_number(cell)
        if value is None:
            raise _Invalid(f"{where}: row {_short(name)}, column {position}: cell {_short(cell)} is not a number")
        numbers.append(value)
    return numbers


def _table_operation(op: str, numbers: list[float], where: str) -> float:
    if not numbers and op != "table_sum":  # the official code: max([]) / 0-division errors; sum([]) is 0
        raise _Invalid(f"{where}: the row has no cells to compute {op} over")
    if op == "table_max":
        return max(numbers)
    if op == "table_min":
        return min(numbers)
    if op == "table_sum":
        return sum(numbers)
    return sum(numbers) / len(numbers)


def _official_steps(body: list[str]) -> list[str]:
    for position, token in enumerate(body):
        if not isinstance(token, str):
            raise _Invalid(f"token {position}: tokens must be strings, got {type(token).__name__}")
        if position % 4 == 0 and token.strip("(") not in ALL_OPERATIONS:
            raise _Invalid(f"token {position}: expected an operation ({', '.join(ALL_OPERATIONS)}), "
                           f"got {_short(token)}")
        if position % 4 == 3 and token != ")":
            raise _Invalid(f"token {position}: expected ')', got {_short(token)}")
    return "|".join(body).split(")")[:-1]


def _run(tokens: list, table) -> tuple[object, dict]:
    if len(tokens) > 4 * MAX_STEPS + 1:
        raise _Invalid(f"program has more than {MAX_STEPS} steps")
    raw_steps = _official_steps(list(tokens[:-1]))
    results: dict[int, object] = {}
    answer = None
    row = None  # the official code keeps the last table row; a "#n" row argument reuses it
    for index, raw in enumerate(raw_steps):
        pieces = raw.strip().split("(")
        if len(pieces) != 2:
            problem = "has more than one '('" if len(pieces) > 2 else "has no '('"
            raise _Invalid(f"step {index} {problem}")
        op = pieces[0].strip("|").strip()
        args = pieces[1].strip("|").strip().split("|")
        where = f"step {index} ({op})"
        if len(args) < 2:
            raise _Invalid(f"{where} needs two arguments")
        first, second = args[0].strip(), args[1].strip()
        if op in MATH_OPERATIONS:
            x = _operand(first, results, where)
            y = _operand(second, results, where)
            answer = results[index] = _arithmetic(op, x, y, where)
        elif "table" in op:
            rows = _table_rows(table, where)
            if "#" in first:
                _reference(first, results, where)
                if row is None:
                    raise _Invalid(f"{where}: a #n row argument needs an earlier table step")
            else:
                if first not in rows:
                    names = [str(name) for name in rows]
                    near = difflib.get_close_matches(first, names, n=3, cutoff=0.5)
                    hint = f"; near: {', '.join(map(repr, near))}" if near else ""
                    raise _Invalid(f"{where}: no table row named {_short(first)}{hint}")
                row = _row_numbers(first, rows[first], where)
            answer = results[index] = _table_operation(op, row, where)
        # any other operation text: skipped, as in the official code
    return answer, results


def run_official_tokens(tokens: list[str], table: list[list[str]] | None = None) -> ExecutionResult:
    """Execute an official token sequence exactly as the official ``eval_program`` does (the last token is
    dropped as ``"EOF"`` without looking at it). ``ok`` is false where the official code reports the
    program invalid or returns ``"n/a"``, and also for a non-finite or complex result."""
    if not isinstance(tokens, (list, tuple)):
        return ExecutionResult.failure(f"ProgramError: expected a list of tokens, got {type(tokens).__name__}")
    results: dict = {}
    try:
        answer, results = _run(tokens, table)
        if answer is None:
            raise _Invalid("the program has no complete step")
        if answer not in _YES_NO:
            if isinstance(answer, complex):
                raise _Invalid(f"the result {answer} is not a real number")
            answer = round(answer, 5)
            if not math.isfinite(answer):
                raise _Invalid(f"the result {answer} is not a finite number")
    except _Invalid as exc:
        return ExecutionResult.failure(f"ProgramError: {exc}", variables=_named(results))
    except Exception as exc:  # noqa: BLE001 -- the official code treats any exception as an invalid program
        return ExecutionResult.failure(f"{type(exc).__name__}: {exc}", variables=_named(results))
    return ExecutionResult.success(answer, variables=_named(results))


def _named(results: dict) -> dict:
    return {f"#{index}": value for index, value in results.items()}


def execute_finqa_program(program: str | list[str], table: list[list[str]] | None = None) -> ExecutionResult:
    """Execute a FinQA program on ``table`` (rows of cell strings, first row the header) with the official
    semantics; never raises.

    A written-out program is parsed with :func:`~knapsack_dspy.docqa.sandbox.finqa_dsl.parse_program` (a
    malformed one gives ``ok=False`` with the parser's message), then run in its canonical token form. A
    token list runs as the official evaluation runs it; a missing final ``"EOF"`` is added. The answer is
    a float rounded to 5 decimals, or ``"yes"`` / ``"no"``; ``variables`` holds each step's result.
    """
    if isinstance(program, str):
        try:
            tokens = steps_to_tokens(parse_program(program))
        except ProgramError as exc:
            return ExecutionResult.failure(f"ProgramError: {exc}")
    elif isinstance(program, (list, tuple)):
        tokens = list(program)
        if not tokens or tokens[-1] != EOF:
            tokens.append(EOF)
    else:
        return ExecutionResult.failure(
            f"ProgramError: a program is a string or a list of tokens, got {type(program).__name__}")
    return run_official_tokens(tokens, table)
