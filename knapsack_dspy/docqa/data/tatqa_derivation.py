"""TAT-QA arithmetic derivations (``"(4,411+4,044)/2"``): the one parser, and the operators / template / value.

Derivations are free-form arithmetic written by annotators. :func:`parse_expression` normalises one and
parses it with ``ast`` (expression mode; only numbers, ``+ - * /``, parentheses and unary signs are
accepted) into an expression over its numbers as written (:class:`DerivationLiteral`). Every reader of
derivations in the package works from that parse: :func:`parse_derivation` here (FinQA operators, SEER
template, value), ``knapsack_dspy.docqa.metrics.derivation_steps`` (FinQA-style steps for program similarity) and
``knapsack_dspy.docqa.data.gold_programs`` (gold Python / DSL programs for demos).

- number literals: thousands commas and currency signs (``$ € £ ¥``) dropped; ``12%`` is a percent; a
  literal followed by ``thousand`` / ``million`` / ``billion`` (or the plural) carries that scale word; a
  lone parenthesised number ``(5,946)`` is an accounting negative (as SEER reads it), parsed as ``-5,946``;
- ``[ ]`` are brackets like ``( )``; ``x`` / ``×`` between operands mean ``*``, ``÷`` means ``/``; the minus
  sign ``−`` and the en dash ``–`` are ``-``; a thousands group follows at most three digits (``1234,567`` is no
  number); only numbers, operators, parentheses and spaces are accepted (``#``, words, ``>``: not arithmetic).

:func:`parse_derivation` gives the operators as FinQA names (``add subtract multiply divide``) in evaluation
order (post-order, left operand first). A unary minus on a literal is part of the number; on a
sub-expression it is a ``multiply`` by the constant -1 (FinQA writes it ``multiply(#k, const_m1)``). The
template uses the FinQA/SEER format of :mod:`knapsack_dspy.docqa.data.program_template`:
``add(X_0,X_1),divide(#0,X_2)``; equal literals (as written, after dropping commas and currency signs)
share an ``X_<i>``. The value applies percents (``12%`` is 0.12) and scale words.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace

__all__ = ["MAX_LENGTH", "SCALE_FACTORS", "ArithmeticDerivation", "DerivationLiteral", "ParsedExpression",
           "parse_derivation", "parse_expression"]

SCALE_FACTORS = {"thousand": 1e3, "million": 1e6, "billion": 1e9}
_BINARY = {ast.Add: "add", ast.Sub: "subtract", ast.Mult: "multiply", ast.Div: "divide"}
# A thousands group only after at most three digits ("1234,567" is not a number); "x" means times between
# operands ("3 x 4", "5 x -6"); lengths beyond any annotator's are refused before parsing.
_LITERAL = re.compile(r"(?P<number>\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?|\.\d+)\s*(?P<percent>%)?"
                      r"(?:\s*(?P<scale>thousands?|millions?|billions?)\b)?", re.IGNORECASE)
_TIMES = re.compile(r"(?<=\S)\s*[xX]\s*(?=[\s(_])")
MAX_LENGTH = 10_000
_ALLOWED = re.compile(r"(?:\s|[-+*/()]|_v\d+)*")
_LONE_PARENTHESISED = re.compile(r"\(\s*(?P<name>_v\d+)\s*\)")
_NODES = (ast.BinOp, ast.UnaryOp, ast.Name, ast.Load, *_BINARY, ast.USub, ast.UAdd)


@dataclass(frozen=True)
class DerivationLiteral:
    """One number of a derivation as written.

    ``written``: the digits as written (``"4,411"``, ``"4.00"``); ``number``: their value, in percent units
    for ``"12%"`` (12.0), before any scale word; ``percent``: written with ``%``; ``scale_word``: the
    ``thousand`` / ``million`` / ``billion`` written after it (lower case, as written: maybe plural)."""

    written: str
    number: float
    percent: bool = False
    scale_word: str = ""

    @property
    def scale_factor(self) -> float:
        return SCALE_FACTORS[self.scale_word.rstrip("s")] if self.scale_word else 1.0

    @property
    def value(self) -> float:
        """What the literal is worth: ``12%`` is 0.12, ``1.5 million`` is 1,500,000."""
        return (self.number / 100.0 if self.percent else self.number) * self.scale_factor

    @property
    def key(self) -> str:
        """The literal as written without commas (``"5946"``, ``"12%"``, ``"60.3 million"``): equal keys are
        the same number of the derivation."""
        return (self.written.replace(",", "") + ("%" if self.percent else "")
                + (" " + self.scale_word if self.scale_word else ""))

    def negated(self) -> DerivationLiteral:
        return replace(self, written="-" + self.written, number=-self.number)


@dataclass(frozen=True)
class ParsedExpression:
    """A derivation's expression: ``body`` is an ``ast`` expression of ``BinOp`` (``+ - * /``), ``UnaryOp``
    (``+ -``) and ``Name`` nodes, each name a key of ``literals``."""

    body: ast.expr
    literals: Mapping[str, DerivationLiteral]


def parse_expression(text: str) -> ParsedExpression:
    """Parse a derivation (see the module docstring); ``ValueError`` when it is not arithmetic over numbers."""
    if not isinstance(text, str) or not text.strip():
        raise ValueError("empty derivation")
    if len(text) > MAX_LENGTH:
        raise ValueError(f"derivation is too long ({len(text)} characters)")
    literals: dict[str, DerivationLiteral] = {}
    body = re.sub(r"[$€£¥]", "", text.replace("\u2212", "-").replace("\u2013", "-"))
    body = body.replace("[", "(").replace("]", ")").replace("×", "*").replace("÷", "/")

    def name_literal(match: re.Match) -> str:
        name = f"_v{len(literals)}"
        literals[name] = DerivationLiteral(match.group("number"), float(match.group("number").replace(",", "")),
                                           bool(match.group("percent")), (match.group("scale") or "").lower())
        return f" {name} "

    body = _LITERAL.sub(name_literal, body)
    body = _TIMES.sub(" * ", body)
    if not literals:
        raise ValueError(f"no numbers in derivation {text!r}")
    if not _ALLOWED.fullmatch(body):  # e.g. "#" (a Python comment), words, ">" comparisons
        raise ValueError(f"not an arithmetic expression: {text!r}")
    body = _LONE_PARENTHESISED.sub(lambda m: f"(-{m.group('name')})", body)  # "(5,946)": -5,946
    try:
        tree = ast.parse(body.strip(), mode="eval")
    except SyntaxError:
        raise ValueError(f"not an arithmetic expression: {text!r}") from None
    for node in ast.walk(tree.body):
        if not isinstance(node, _NODES) or (isinstance(node, ast.Name) and node.id not in literals):
            raise ValueError(f"not an arithmetic expression: {text!r}")
    return ParsedExpression(tree.body, literals)


@dataclass(frozen=True)
class ArithmeticDerivation:
    operators: tuple[str, ...]
    template: str
    value: float | None  # None when the expression divides by zero

    @property
    def num_steps(self) -> int:
        return len(self.operators)


def parse_derivation(text: str) -> ArithmeticDerivation:
    """Operators, template and value of an arithmetic derivation; ``ValueError`` when it is not one
    (e.g. ``"2019##2018"``)."""
    parsed = parse_expression(text)
    operators: list[str] = []
    parts: list[str] = []
    index: dict[str, int] = {}

    def literal(name: str, sign: float) -> tuple[str, float]:
        number = parsed.literals[name]
        key = ("-" if sign < 0 else "") + number.key
        index.setdefault(key, len(index))
        return f"X_{index[key]}", sign * number.value

    def visit(node, sign: float = 1.0) -> tuple[str, float | None]:
        """Returns (template operand, value); appends steps for operators."""
        if isinstance(node, ast.Name):
            return literal(node.id, sign)
        if isinstance(node, ast.UnaryOp):
            inner_sign = -sign if isinstance(node.op, ast.USub) else sign
            if isinstance(node.operand, (ast.Name, ast.UnaryOp)):
                return visit(node.operand, inner_sign)
            operand, value = visit(node.operand)
            if inner_sign > 0:
                return operand, value
            operators.append("multiply")
            parts.append(f"multiply({operand},constant)")
            return f"#{len(parts) - 1}", (None if value is None else -value)
        left, lv = visit(node.left)
        right, rv = visit(node.right)
        op = _BINARY[type(node.op)]
        operators.append(op)
        parts.append(f"{op}({left},{right})")
        value = None
        if lv is not None and rv is not None:
            if op == "add":
                value = lv + rv
            elif op == "subtract":
                value = lv - rv
            elif op == "multiply":
                value = lv * rv
            elif rv != 0:
                value = lv / rv
        return f"#{len(parts) - 1}", value

    operand, value = visit(parsed.body)
    template = ",".join(parts) if parts else operand
    return ArithmeticDerivation(tuple(operators), template, value)
