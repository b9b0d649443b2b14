"""Program similarity for case-based reasoning (the CBR-for-FinQA notion of a "gold case").

The similarity of two programs is a weighted sum of two normalised edit-distance similarities::

    sim(a, b) = w_op * seq_sim(operators(a), operators(b)) + w_arg * seq_sim(arguments(a), arguments(b))
    seq_sim(x, y) = 1 - levenshtein(x, y) / max(len(x), len(y))        (1.0 when both are empty)

with ``w_op = 0.8`` and ``w_arg = 0.2`` by default (weights are normalised to sum to 1), so it lies in
[0, 1] and is symmetric. A candidate exemplar is a *gold case* for a query when the similarity of its
program to the query's gold program is at least 0.9 (:func:`is_gold_case`).

Programs may be FinQA programs (``"subtract(5829, 5735), divide(#0, 5735)"``, parsed with
:func:`knapsack_dspy.docqa.sandbox.finqa_dsl.parse_program`), the official token form, TAT-QA arithmetic
derivations (``"(44.1-56.7)/56.7"``, via :func:`~knapsack_dspy.docqa.metrics.derivation_steps.derivation_to_steps`),
or lists of steps. Arguments are normalised before comparison (:func:`normalize_argument`):
``"5,829"`` / ``"5829.0"`` / ``"$5829"`` -> ``"5829"``; ``const_100`` -> ``"100"``; ``const_m1`` -> ``"-1"``;
``"23.6%"`` keeps its ``%``; ``#k`` references stay as they are (they name positions, which programs of the
same shape share); table row names are lower-cased with whitespace collapsed.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache

from knapsack_dspy.docqa.metrics.derivation_steps import canonical_number, derivation_to_steps
from knapsack_dspy.docqa.sandbox.finqa_dsl import Step, parse_program

__all__ = [
    "DEFAULT_ARGUMENT_WEIGHT",
    "DEFAULT_OPERATOR_WEIGHT",
    "GOLD_CASE_THRESHOLD",
    "argument_sequence",
    "edit_distance",
    "is_gold_case",
    "normalize_argument",
    "operator_accuracy",
    "operator_sequence",
    "program_similarity",
    "sequence_similarity",
    "to_steps",
]

DEFAULT_OPERATOR_WEIGHT = 0.8
DEFAULT_ARGUMENT_WEIGHT = 0.2
GOLD_CASE_THRESHOLD = 0.9

_FINQA_PROGRAM = re.compile(r"^\s*[A-Za-z_][A-Za-z0-9_]*\s*\(")
_NUMBER = re.compile(r"^[+-]?\$?\s*(?:\d[\d,]*(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?%?$")
_REFERENCE = re.compile(r"^#\d+$")


def normalize_argument(arg: str) -> str:
    """Canonical form of one program argument (see the module docstring)."""
    text = " ".join(str(arg).split())
    if _REFERENCE.match(text):
        return text
    lowered = text.lower()
    if lowered.startswith("const_"):
        body = lowered[len("const_"):]
        if body.startswith("m"):
            body = "-" + body[1:]
        try:
            return canonical_number(float(body))
        except ValueError:
            return lowered
    if _NUMBER.match(text):
        percent = text.endswith("%")
        body = text.rstrip("%").replace("$", "").replace(",", "").replace(" ", "")
        try:
            return canonical_number(float(body)) + ("%" if percent else "")
        except ValueError:
            return lowered
    return lowered


@lru_cache(maxsize=65536)
def _steps_of_text(text: str) -> tuple[Step, ...]:
    if _FINQA_PROGRAM.match(text):
        return tuple(parse_program(text))
    return tuple(derivation_to_steps(text))


def to_steps(program) -> list[Step]:
    """Steps of a FinQA program (text or official tokens), a TAT-QA derivation, or a list of steps /
    ``(op, args)`` pairs. ``ValueError`` (``ProgramError`` for FinQA) when it cannot be parsed."""
    if isinstance(program, str):
        return list(_steps_of_text(program.strip()))
    if isinstance(program, (list, tuple)):
        if all(isinstance(item, str) for item in program):
            return parse_program(list(program))
        steps = []
        for i, item in enumerate(program):
            if isinstance(item, Step):
                steps.append(item)
            elif isinstance(item, (list, tuple)) and len(item) == 2 and isinstance(item[0], str):
                steps.append(Step(item[0], tuple(str(a) for a in item[1])))
            elif hasattr(item, "op") and hasattr(item, "args"):
                steps.append(Step(str(item.op), tuple(str(a) for a in item.args)))
            else:
                raise ValueError(f"step {i}: expected a Step or (op, args), got {type(item).__name__}")
        return steps
    raise ValueError(f"a program is a string, a token list or a list of steps, got {type(program).__name__}")


def operator_sequence(program) -> list[str]:
    """Operators of a program, in order."""
    return [step.op for step in to_steps(program)]


def argument_sequence(program) -> list[str]:
    """Normalised arguments of a program, step after step."""
    return [normalize_argument(arg) for step in to_steps(program) for arg in step.args]


def edit_distance(a: Sequence, b: Sequence) -> int:
    """Levenshtein distance between two sequences (insertions, deletions, substitutions of elements)."""
    if len(a) < len(b):
        a, b = b, a
    if not b:
        return len(a)
    if a == b:
        return 0
    previous = list(range(len(b) + 1))
    for i, x in enumerate(a, start=1):
        current = [i]
        for j, y in enumerate(b, start=1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (x != y)))
        previous = current
    return previous[-1]


def sequence_similarity(a: Sequence, b: Sequence) -> float:
    """``1 - edit_distance / max(len)``, in [0, 1]; 1.0 for two empty sequences."""
    longest = max(len(a), len(b))
    return 1.0 if longest == 0 else 1.0 - edit_distance(a, b) / longest


@lru_cache(maxsize=65536)
def _sequences_of_text(text: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    steps = _steps_of_text(text)
    return tuple(s.op for s in steps), tuple(normalize_argument(x) for s in steps for x in s.args)


def _sequences(program) -> tuple[tuple[str, ...], tuple[str, ...]]:
    if isinstance(program, str):
        return _sequences_of_text(program.strip())
    steps = to_steps(program)
    return tuple(s.op for s in steps), tuple(normalize_argument(x) for s in steps for x in s.args)


def program_similarity(program_a, program_b, operator_weight: float = DEFAULT_OPERATOR_WEIGHT,
                       argument_weight: float = DEFAULT_ARGUMENT_WEIGHT) -> float:
    """Weighted operator / argument edit-distance similarity of two programs, in [0, 1].

    Accepts FinQA programs, TAT-QA derivations or step lists (mixed is fine). Raises ``ValueError`` when
    either program cannot be parsed or the weights are negative / both zero.
    """
    if operator_weight < 0 or argument_weight < 0 or operator_weight + argument_weight <= 0:
        raise ValueError(f"weights must be >= 0 and not both 0, got {operator_weight}, {argument_weight}")
    ops_a, args_a = _sequences(program_a)
    ops_b, args_b = _sequences(program_b)
    ops = sequence_similarity(ops_a, ops_b)
    args = sequence_similarity(args_a, args_b)
    total = operator_weight + argument_weight
    return (operator_weight * ops + argument_weight * args) / total


def is_gold_case(candidate_program, query_gold_program, threshold: float = GOLD_CASE_THRESHOLD) -> bool:
    """Whether a candidate's program is a gold case for the query: similarity >= ``threshold``."""
    return program_similarity(candidate_program, query_gold_program) >= threshold


def operator_accuracy(pred_program, gold_program) -> bool:
    """Whether the predicted program uses the gold operators in the same order (arguments ignored).

    An unparseable prediction is simply wrong (``False``); an unparseable gold program raises ``ValueError``.
    """
    gold_ops = operator_sequence(gold_program)
    try:
        pred_ops = operator_sequence(pred_program)
    except ValueError:
        return False
    return pred_ops == gold_ops
