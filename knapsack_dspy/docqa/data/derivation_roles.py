"""What each number of a TAT-QA derivation is: a quantity of the document, or a constant of the arithmetic.

A derivation (``"(4+4)/2"``) names its numbers by value only. A gold program must say which quantity each
number is (a table cell, a number of the text) or that it is a constant, and equal values do not settle it:
the two 4s of an average of two years are two cells that happen to hold the same number, while the 567 of
``(890 - 567) / 567`` is one quantity used twice. :func:`derivation_roles` reads the roles from the
expression's shape (``knapsack_dspy.docqa.data.tatqa_derivation.parse_expression`` positions, one per number as
written):

- **siblings**: the terms of one sum (``a + b - c``, parentheses that only regroup a sum on its left included;
  a parenthesised sum on the right of ``+`` / ``-`` is a term of its own) and the two operands of one ``*`` /
  ``/`` are different quantities, whatever their values;
- **constants**: an integer that divides a sum of as many terms (``(a + b + c) / 3``: an average's divisor),
  a small integer dividing anything in a question about an average or a mean (the count of what is averaged),
  ``100`` multiplying or dividing (a percentage), ``1000`` multiplying or dividing (a unit change) -- unless the
  derivation uses the same value as a quantity elsewhere (``(1200 - 1000) / 1000``). These are the arithmetic's
  own numbers, never cells.

Any other repeated value plays different roles and is one quantity. :func:`align_positions` maps each
position to the part of a program's ``ans`` expression that stands for it (a program written from the
derivation by ``knapsack_dspy.docqa.data.gold_programs``, possibly with ``* 100`` appended or a percent written as
``(x / 100)``), so that rules about positions can be checked on any such program.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from knapsack_dspy.docqa.data.tatqa_derivation import SCALE_FACTORS, DerivationLiteral, parse_expression

__all__ = ["CONSTANT_ROLES", "DerivationRoles", "align_positions", "derivation_roles", "finqa_constants",
           "in_answer_unit", "parse_folded", "positions_in_order"]

CONSTANT_ROLES = ("average divisor", "count", "percent factor", "unit factor")
SMALL_COUNT = 12  # the largest count of averaged items read as a constant ("/ 12" months)
_ARITHMETIC = ("add", "subtract", "multiply", "divide", "exp", "greater")
_AVERAGE_QUESTION = re.compile(r"\baverage\b|\bmean\b|\baveraged\b", re.IGNORECASE)


@dataclass(frozen=True)
class DerivationRoles:
    """``siblings[p]``: the positions that are other terms of ``p``'s sum or the other operand of its product /
    quotient; ``constants[p]``: the constant role of ``p`` (one of :data:`CONSTANT_ROLES`), absent when ``p`` is a
    quantity."""

    siblings: Mapping[str, frozenset[str]]
    constants: Mapping[str, str]

    def are_siblings(self, a: str, b: str) -> bool:
        return b in self.siblings.get(a, frozenset())


def parse_folded(text: str) -> tuple[ast.expr, dict[str, DerivationLiteral]]:
    """A derivation as (expression over positions, position -> literal), each negated number (an accounting
    negative ``(5,946)`` or a unary minus on a number) folded into one negative literal, so that a table cell
    ``(5,946)`` can stand for it. ``ValueError`` if it is not arithmetic."""
    parsed = parse_expression(text)
    literals = dict(parsed.literals)
    return _fold_negated_literals(parsed.body, literals), literals


def _fold_negated_literals(node: ast.expr, literals: dict[str, DerivationLiteral]) -> ast.expr:
    """``-(_v0)`` -> a new literal holding the negative number."""
    if isinstance(node, ast.BinOp):
        return ast.BinOp(left=_fold_negated_literals(node.left, literals), op=node.op,
                         right=_fold_negated_literals(node.right, literals))
    if isinstance(node, ast.UnaryOp):
        operand = _fold_negated_literals(node.operand, literals)
        if isinstance(node.op, ast.USub) and isinstance(operand, ast.Name):
            name = f"_n{len(literals)}"
            literals[name] = literals[operand.id].negated()
            return ast.Name(id=name, ctx=ast.Load())
        return ast.UnaryOp(op=node.op, operand=operand)
    return node


def in_answer_unit(literal: DerivationLiteral, answer_scale: str) -> float:
    """A derivation number in the answer's unit (percent units for "12%"): "60.3 million" is 60300 when the answer
    is in thousands."""
    if not literal.scale_word:
        return literal.number
    return literal.number * literal.scale_factor / SCALE_FACTORS.get(answer_scale, 1.0)


def positions_in_order(node: ast.expr) -> list[str]:
    """The derivation's positions (literal names) left to right as written."""
    if isinstance(node, ast.Name):
        return [node.id]
    if isinstance(node, ast.BinOp):
        return positions_in_order(node.left) + positions_in_order(node.right)
    if isinstance(node, ast.UnaryOp):
        return positions_in_order(node.operand)
    return []


def _is_sum(node: ast.expr) -> bool:
    return isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub))


def _terms(node: ast.expr) -> list[ast.expr]:
    """The terms of a sum: ``a + b - c`` and ``(a + b) - c`` are [a, b, c]; ``a - (b + c)`` is [a, (b + c)]."""
    if _is_sum(node):
        return [*_terms(node.left), node.right]
    return [node]


def _leaf(node: ast.expr) -> str | None:
    """The position a term is, when it is one number (possibly negated)."""
    while isinstance(node, ast.UnaryOp):
        node = node.operand
    return node.id if isinstance(node, ast.Name) else None


def _is_integer(literal: DerivationLiteral) -> bool:
    return not literal.percent and not literal.scale_word and literal.written.lstrip("-").isdigit()


def derivation_roles(expression: ast.expr, literals: Mapping[str, DerivationLiteral],
                     question: str = "") -> DerivationRoles:
    """The roles of a derivation's positions (see the module docstring)."""
    siblings: dict[str, set[str]] = {}
    constants: dict[str, str] = {}
    averaged = bool(_AVERAGE_QUESTION.search(question or ""))

    def relate(names: list[str]) -> None:
        for name in names:
            siblings.setdefault(name, set()).update(n for n in names if n != name)

    def visit(node: ast.expr, in_sum: bool = False) -> None:
        if isinstance(node, ast.UnaryOp):
            visit(node.operand)
        if not isinstance(node, ast.BinOp):
            return
        if _is_sum(node):
            if not in_sum:  # the root of a sum: its terms are siblings
                relate([leaf for leaf in map(_leaf, _terms(node)) if leaf])
            visit(node.left, in_sum=True)
            visit(node.right)
            return
        left, right = _leaf(node.left), _leaf(node.right)
        if left and right:
            relate([left, right])
        for side, other in ((right, node.left), (left, node.right)):
            if side is None or not _is_integer(literals[side]):
                continue
            number = literals[side].number
            divisor = side == right and isinstance(node.op, ast.Div)
            if number in (100.0, 1000.0) and (divisor or isinstance(node.op, ast.Mult)):
                constants[side] = "percent factor" if number == 100.0 else "unit factor"
            elif divisor and _is_sum(other) and number == len(_terms(other)):
                constants[side] = "average divisor"
            elif divisor and averaged and 1 <= number <= SMALL_COUNT:
                constants[side] = "count"
        visit(node.left)
        visit(node.right)

    visit(expression)
    # a factor whose value the derivation also uses as a quantity is that quantity: (1200 - 1000) / 1000
    quantities = {literals[p].number for p in positions_in_order(expression) if p not in constants}
    constants = {p: role for p, role in constants.items()
                 if role not in ("percent factor", "unit factor") or literals[p].number not in quantities}
    return DerivationRoles({k: frozenset(v) for k, v in siblings.items()}, constants)


def _finqa_factor(op: str, position: int, value: float | None) -> bool:
    if value is None:
        return False
    if op in ("multiply", "divide") and value in (100.0, 1000.0) and (op == "multiply" or position == 1):
        return True
    return op == "divide" and position == 1 and float(value).is_integer() and 1 <= value <= SMALL_COUNT


def finqa_constants(steps: Sequence, number: Callable[[str], float | None]) -> set[tuple[int, int]]:
    """(step, argument position) of the number arguments of a FinQA program that are the arithmetic's own
    constants: ``100`` / ``1000`` multiplying or dividing, a small count dividing -- unless the program uses the
    same argument as a quantity elsewhere (``subtract(1200, 1000), divide(#0, 1000)``). ``number`` reads an
    argument (the official ``str_to_num``)."""
    candidates, quantities = set(), set()
    for index, step in enumerate(steps):
        if step.op not in _ARITHMETIC:
            continue
        for position, arg in enumerate(step.args):
            if arg.startswith(("#", "const_")):
                continue
            if _finqa_factor(step.op, position, number(arg)):
                candidates.add((index, position))
            else:
                quantities.add(arg)
    return {(i, p) for i, p in candidates if steps[i].args[p] not in quantities}


def _strip_times_100(node: ast.expr) -> ast.expr | None:
    if (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult) and isinstance(node.right, ast.Constant)
            and node.right.value == 100):
        return node.left
    return None


def _operand(node: ast.expr) -> ast.expr:
    """A program's stand-in for one number without a percent-as-ratio ``(x / 100)`` wrapper."""
    if (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div) and isinstance(node.right, ast.Constant)
            and node.right.value == 100 and isinstance(node.left, (ast.Name, ast.Constant))):
        return node.left
    return node


def align_positions(derivation: ast.expr, program: ast.expr) -> dict[str, ast.expr] | None:
    """Position -> the program's expression for it (a ``Name``, a ``Constant``, a negated constant), when the
    program's expression is the derivation's (up to a final ``* 100`` and percents written ``(x / 100)``);
    ``None`` when the shapes differ."""

    def walk(d: ast.expr, p: ast.expr, out: dict) -> bool:
        if isinstance(d, ast.Name):
            out[d.id] = _operand(p)
            return True
        if isinstance(d, ast.BinOp):
            return (isinstance(p, ast.BinOp) and type(p.op) is type(d.op)
                    and walk(d.left, p.left, out) and walk(d.right, p.right, out))
        if isinstance(d, ast.UnaryOp):
            return isinstance(p, ast.UnaryOp) and type(p.op) is type(d.op) and walk(d.operand, p.operand, out)
        return False

    found: dict[str, ast.expr] = {}
    if walk(derivation, program, found):
        return found
    inner = _strip_times_100(program)
    found = {}
    if inner is not None and walk(derivation, inner, found):
        return found
    return None
