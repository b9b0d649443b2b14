"""The functions a sandboxed Python program may call, and the ``const_*`` names.

Python built-ins (restricted): ``min max sum abs round len float int str``; statistics: ``mean`` /
``average``; the FinQA DSL operations as functions: ``add subtract multiply divide exp greater``
(``greater`` gives ``"yes"`` / ``"no"``) and ``table_max table_min table_sum table_average`` (a row label,
an optional ignored second argument such as ``"none"``, or a list of numbers). ``const_100`` is 100,
``const_m1`` is -1 (FinQA's constants).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from knapsack_dspy.docqa.sandbox.python_errors import ProgramFailure
from knapsack_dspy.docqa.sandbox.python_limits import Limits, binary_operation, check_value, is_number
from knapsack_dspy.docqa.sandbox.table_view import TableLookupError, TableView

__all__ = ["FUNCTIONS", "CallContext", "constant_value"]

_CONSTANT = re.compile(r"const_(m1|\d+)")
_MAX_CONSTANT_DIGITS = 101  # more digits exceed every magnitude limit (and past 4,300 int() refuses them)


def constant_value(name: str) -> int | None:
    """``const_100`` -> 100, ``const_m1`` -> -1; ``None`` if ``name`` is not a constant. A constant of more
    than 101 digits is a ``LimitExceeded`` :class:`ProgramFailure`."""
    match = _CONSTANT.fullmatch(name)
    if not match:
        return None
    digits = match.group(1)
    if digits == "m1":
        return -1
    if len(digits) > _MAX_CONSTANT_DIGITS:
        raise ProgramFailure("LimitExceeded", f"constant const_{digits[:12]}... has {len(digits)} digits "
                                              f"(at most {_MAX_CONSTANT_DIGITS})")
    return int(digits)


@dataclass
class CallContext:
    """What functions may use: the table (or ``None``) and the limits."""

    table: TableView | None
    limits: Limits


def _fail(name: str, message: str, kind: str = "TypeError") -> ProgramFailure:
    return ProgramFailure(kind, f"{name}(): {message}")


def _arity(name: str, args: list, low: int, high: int) -> None:
    if not low <= len(args) <= high:
        expected = str(low) if low == high else f"{low} to {high}"
        raise _fail(name, f"takes {expected} argument{'s' if high != 1 else ''}, got {len(args)}")


def _number(name: str, value):
    if not is_number(value):
        raise _fail(name, f"expected a number, got {type(value).__name__} {str(value)[:30]!r}")
    return value


def _numbers(name: str, args: list) -> list:
    """A single list/tuple argument, or the arguments themselves, as numbers."""
    items = list(args[0]) if len(args) == 1 and isinstance(args[0], (list, tuple)) else list(args)
    return [_number(name, item) for item in items]


def _items(name: str, args: list) -> list:
    if not args:
        raise _fail(name, "expected at least one argument")
    items = list(args[0]) if len(args) == 1 and isinstance(args[0], (list, tuple)) else list(args)
    if not items:
        raise _fail(name, "of an empty list", kind="ValueError")
    return items


def _min(ctx: CallContext, args: list):
    try:
        return min(_items("min", args))
    except TypeError:
        raise _fail("min", "cannot compare these values") from None


def _max(ctx: CallContext, args: list):
    try:
        return max(_items("max", args))
    except TypeError:
        raise _fail("max", "cannot compare these values") from None


def _sum(ctx: CallContext, args: list):
    _arity("sum", args, 1, 2)
    if not isinstance(args[0], (list, tuple)):
        raise _fail("sum", f"expected a list, got {type(args[0]).__name__}")
    total = _number("sum", args[1]) if len(args) == 2 else 0
    for item in args[0]:
        total = binary_operation("+", total, _number("sum", item), ctx.limits)
    return total


def _mean(name: str):
    def mean(ctx: CallContext, args: list):
        values = _numbers(name, args)
        if not values:
            raise _fail(name, "of an empty list", kind="ValueError")
        total = 0
        for value in values:
            total = binary_operation("+", total, value, ctx.limits)
        return binary_operation("/", total, len(values), ctx.limits)
    return mean


def _abs(ctx: CallContext, args: list):
    _arity("abs", args, 1, 1)
    return abs(_number("abs", args[0]))


def _round(ctx: CallContext, args: list):
    _arity("round", args, 1, 2)
    value = _number("round", args[0])
    if len(args) == 1 or args[1] is None:
        return check_value(round(value), ctx.limits)
    digits = args[1]
    if not isinstance(digits, int) or isinstance(digits, bool):
        raise _fail("round", "the number of digits must be an integer")
    if abs(digits) > ctx.limits.max_round_digits:
        raise _fail("round", f"the number of digits must be within ±{ctx.limits.max_round_digits}",
                    kind="LimitExceeded")
    return check_value(round(value, digits), ctx.limits)


def _len(ctx: CallContext, args: list):
    _arity("len", args, 1, 1)
    if not isinstance(args[0], (str, list, tuple)):
        raise _fail("len", f"a {type(args[0]).__name__} has no length")
    return len(args[0])


def _float(ctx: CallContext, args: list):
    _arity("float", args, 0, 1)
    if not args:
        return 0.0
    value = args[0]
    if isinstance(value, str):
        text = value.strip().replace(",", "").replace("$", "")
        percent = text.endswith("%")
        try:
            number = float(text[:-1] if percent else text)
        except ValueError:
            raise _fail("float", f"cannot read a number from {value[:30]!r}", kind="ValueError") from None
        return check_value(number, ctx.limits)
    return check_value(float(_number("float", value)), ctx.limits)


def _int(ctx: CallContext, args: list):
    _arity("int", args, 0, 1)
    if not args:
        return 0
    value = args[0]
    if isinstance(value, str):
        text = value.strip().replace(",", "")
        if len(text) > 120:
            raise _fail("int", "the text is too long to be a number", kind="LimitExceeded")
        try:
            return check_value(int(text), ctx.limits)
        except ValueError:
            raise _fail("int", f"cannot read an integer from {value[:30]!r}", kind="ValueError") from None
    return check_value(int(_number("int", value)), ctx.limits)


def _str(ctx: CallContext, args: list):
    _arity("str", args, 0, 1)
    if not args:
        return ""
    value = args[0]
    if not (isinstance(value, str) or value is None or is_number(value)):
        raise _fail("str", f"only numbers and text can be converted, got {type(value).__name__}")
    return check_value(str(value), ctx.limits)


def _dsl_arithmetic(name: str, symbol: str):
    def operation(ctx: CallContext, args: list):
        _arity(name, args, 2, 2)
        return binary_operation(symbol, _number(name, args[0]), _number(name, args[1]), ctx.limits)
    return operation


def _greater(ctx: CallContext, args: list):
    _arity("greater", args, 2, 2)
    return "yes" if _number("greater", args[0]) > _number("greater", args[1]) else "no"


def _table_row(name: str, ctx: CallContext, args: list) -> list:
    _arity(name, args, 1, 2)
    target = args[0]
    if isinstance(target, (list, tuple)):
        return _numbers(name, [target])
    if ctx.table is None:
        raise ProgramFailure("NameError", f"{name}(): no table was given")
    try:
        return ctx.table.row_values(target)
    except TableLookupError as exc:
        raise ProgramFailure("KeyError", f"{name}(): {exc}") from None


def _table_aggregate(name: str):
    def aggregate(ctx: CallContext, args: list):
        values = _table_row(name, ctx, args)
        if not values and name != "table_sum":
            raise _fail(name, "the row has no values", kind="ValueError")
        if name == "table_max":
            return max(values)
        if name == "table_min":
            return min(values)
        total = 0
        for value in values:
            total = binary_operation("+", total, value, ctx.limits)
        return total if name == "table_sum" else binary_operation("/", total, len(values), ctx.limits)
    return aggregate


FUNCTIONS: dict[str, Callable[[CallContext, list], object]] = {
    "min": _min,
    "max": _max,
    "sum": _sum,
    "abs": _abs,
    "round": _round,
    "len": _len,
    "float": _float,
    "int": _int,
    "str": _str,
    "mean": _mean("mean"),
    "average": _mean("average"),
    "add": _dsl_arithmetic("add", "+"),
    "subtract": _dsl_arithmetic("subtract", "-"),
    "multiply": _dsl_arithmetic("multiply", "*"),
    "divide": _dsl_arithmetic("divide", "/"),
    "exp": _dsl_arithmetic("exp", "**"),
    "greater": _greater,
    "table_max": _table_aggregate("table_max"),
    "table_min": _table_aggregate("table_min"),
    "table_sum": _table_aggregate("table_sum"),
    "table_average": _table_aggregate("table_average"),
}
