"""Resource bounds of the Python sandbox and arithmetic that respects them.

Every value a program builds is checked: numbers stay finite and within ``max_magnitude``; strings and
lists (counting nested items and string characters) stay within ``max_items``. Operations that could
build something huge (``**``, sequence repetition, concatenation) are checked *before* they run.
"""

from __future__ import annotations

import math
import operator
from dataclasses import dataclass

from knapsack_dspy.docqa.sandbox.python_errors import ProgramFailure

__all__ = ["Limits", "binary_operation", "check_value", "is_number", "size_of"]


@dataclass(frozen=True)
class Limits:
    """Bounds for one execution (the defaults are generous for QA programs)."""

    max_code_chars: int = 20_000   # program text
    max_nodes: int = 5_000         # syntax-tree nodes
    max_depth: int = 60            # syntax-tree nesting
    max_magnitude: float = 1e100   # |number|
    max_items: int = 10_000        # characters of a string / items of a list, nested items included
    max_round_digits: int = 100    # |ndigits| of round()


def is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, complex)


MAX_NESTING = 20  # lists within lists


def size_of(value, stop: float = float("inf")) -> int:
    """Characters + items, nested ones included (iterative; raises past :data:`MAX_NESTING` levels); the
    count stops early once it exceeds ``stop``."""
    total, stack = 0, [(value, 0)]
    while stack and total <= stop:
        item, depth = stack.pop()
        if isinstance(item, str):
            total += len(item)
        elif isinstance(item, (list, tuple)):
            if depth > MAX_NESTING:
                raise ProgramFailure("LimitExceeded", f"lists nested more than {MAX_NESTING} levels deep")
            total += len(item)
            stack.extend((child, depth + 1) for child in item if isinstance(child, (str, list, tuple)))
    return total


def check_value(value, limits: Limits):
    """Return ``value`` if it is within the limits, else raise :class:`ProgramFailure`."""
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int):
        if abs(value) > limits.max_magnitude:
            raise ProgramFailure("LimitExceeded", f"number too large (|x| > {limits.max_magnitude:g})")
        return value
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            raise ProgramFailure("ValueError", "result is not a finite number (NaN or infinity)")
        if abs(value) > limits.max_magnitude:
            raise ProgramFailure("LimitExceeded", f"number too large (|x| > {limits.max_magnitude:g})")
        return value
    if isinstance(value, complex):
        raise ProgramFailure("ValueError", "result is a complex number")
    if isinstance(value, (str, list, tuple)):
        if size_of(value, limits.max_items) > limits.max_items:
            raise ProgramFailure("LimitExceeded", f"string or list too long (more than {limits.max_items} items)")
        return value
    return value


def _type_name(value) -> str:
    return "number" if is_number(value) and not isinstance(value, bool) else type(value).__name__


def _guard_power(base, exponent, limits: Limits) -> None:
    if not (is_number(base) and is_number(exponent)):
        return
    magnitude = abs(base)
    if exponent > 0 and magnitude > 1 and exponent * math.log10(magnitude) > math.log10(limits.max_magnitude) + 1:
        raise ProgramFailure("LimitExceeded", f"power too large (|x| > {limits.max_magnitude:g})")


def _guard_sequences(symbol: str, left, right, limits: Limits) -> None:
    sequence = (str, list, tuple)
    if symbol == "*":
        for seq, count in ((left, right), (right, left)):
            if (isinstance(seq, sequence) and isinstance(count, int) and count > 0
                    and size_of(seq, limits.max_items) * count > limits.max_items):
                raise ProgramFailure("LimitExceeded", f"string or list too long (more than {limits.max_items} items)")
    elif symbol == "+" and isinstance(left, sequence) and isinstance(right, sequence):
        if size_of(left, limits.max_items) + size_of(right, limits.max_items) > limits.max_items:
            raise ProgramFailure("LimitExceeded", f"string or list too long (more than {limits.max_items} items)")
    elif symbol == "%" and isinstance(left, str):
        raise ProgramFailure("NotAllowed", "string formatting with % is not allowed")


_OPERATIONS = {
    "+": operator.add,
    "-": operator.sub,
    "*": operator.mul,
    "/": operator.truediv,
    "//": operator.floordiv,
    "%": operator.mod,
    "**": operator.pow,
}


def binary_operation(symbol: str, left, right, limits: Limits):
    """``left <symbol> right`` for ``+ - * / // % **`` with every bound checked (raises ProgramFailure)."""
    _guard_sequences(symbol, left, right, limits)
    if symbol == "**":
        _guard_power(left, right, limits)
    try:
        result = _OPERATIONS[symbol](left, right)
    except ZeroDivisionError:
        raise ProgramFailure("ZeroDivisionError", "division by zero") from None
    except OverflowError:
        raise ProgramFailure("LimitExceeded", "number too large") from None
    except TypeError:
        raise ProgramFailure("TypeError", f"unsupported operand types for {symbol}: "
                                          f"{_type_name(left)} and {_type_name(right)}") from None
    return check_value(result, limits)
