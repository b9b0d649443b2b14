"""TAT-QA arithmetic derivations as FinQA-style steps, so that program similarity works on both data sets.

``"(44.1-56.7)/56.7"`` -> ``[Step("subtract", ("44.1", "56.7")), Step("divide", ("#0", "56.7"))]``.

The derivation is parsed by the data layer's parser
(:func:`knapsack_dspy.docqa.data.tatqa_derivation.parse_expression`).
Steps come out in evaluation order (post-order, left operand first), each binary ``+ - * /`` becoming ``add
subtract multiply divide`` with ``#k`` naming the result of step ``k``. A minus sign on a literal is part of
the number (``"-27,603"``), and so is a lone parenthesised number, an accounting negative (``"-114 - (71)"``
-> ``subtract(-114, -71)``); a minus on a sub-expression is ``multiply(#k, -1)`` (FinQA's ``const_m1``).
``a + b + c`` becomes two ``add`` steps, as in FinQA programs.

Literal arguments are canonical numbers (thousands separators dropped, ``"5,829.0"`` -> ``"5829"``), keeping
a ``%`` (``"1.5%"``); a scale word after a literal (``"1.5 million"``) multiplies it. A derivation that is
one number yields no steps. Anything else (``"2019##2018"``, words, ``**``) raises ``ValueError``.
"""

from __future__ import annotations

import ast

from knapsack_dspy.docqa.data.tatqa_derivation import parse_expression
from knapsack_dspy.docqa.sandbox.finqa_dsl import Step

__all__ = ["canonical_number", "derivation_to_steps"]

_OPERATORS = {ast.Add: "add", ast.Sub: "subtract", ast.Mult: "multiply", ast.Div: "divide"}


def canonical_number(value: float) -> str:
    """``5829.0`` -> ``"5829"``, ``0.5`` -> ``"0.5"``, ``-1.0`` -> ``"-1"``; 12 significant digits at most."""
    if value == 0:
        return "0"
    if float(value).is_integer() and abs(value) < 1e15:
        return str(int(value))
    text = f"{value:.12g}"
    return text


def _negated(text: str) -> str:
    return text[1:] if text.startswith("-") else ("-" + text if text != "0" else text)


def derivation_to_steps(derivation: str) -> list[Step]:
    """FinQA-style steps of a TAT-QA arithmetic derivation (see the module docstring); ``ValueError`` if it is
    not arithmetic over numbers."""
    if not isinstance(derivation, str):
        raise TypeError(f"a derivation is a string, got {type(derivation).__name__}")
    parsed = parse_expression(derivation)
    literals = {name: canonical_number(number.number * number.scale_factor) + ("%" if number.percent else "")
                for name, number in parsed.literals.items()}
    steps: list[Step] = []

    def visit(node: ast.AST) -> str:
        if isinstance(node, ast.Name):
            return literals[node.id]
        if isinstance(node, ast.UnaryOp):
            inner_is_literal = isinstance(node.operand, ast.Name)
            value = visit(node.operand)
            if isinstance(node.op, ast.UAdd):
                return value
            if inner_is_literal or (isinstance(node.operand, ast.UnaryOp) and not value.startswith("#")):
                return _negated(value)
            steps.append(Step("multiply", (value, "-1")))
            return f"#{len(steps) - 1}"
        left = visit(node.left)
        right = visit(node.right)
        steps.append(Step(_OPERATORS[type(node.op)], (left, right)))
        return f"#{len(steps) - 1}"

    visit(parsed.body)
    return steps
