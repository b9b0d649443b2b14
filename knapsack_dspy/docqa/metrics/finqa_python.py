"""What can honestly be said about a Python answer to a FinQA question, and why a wrong one is wrong (no LM).

FinQA's program accuracy is defined for its DSL only (``metrics.finqa``: symbolic equivalence with the gold DSL
program); a Python program has none. What a Python row says instead:

* **execution accuracy** -- its executed value against ``exe_ans`` by the official comparison (the bench's
  ``correct``, ``metrics.answer_matching.finqa_exact_match``);
* **operations used** -- :func:`python_operations` / :func:`dsl_operations`: the arithmetic a program performs
  (``add``, ``subtract``, ``multiply``, ``divide``, ``exp``, ``greater``, and the table aggregations), as a multiset;
  :func:`same_operations` says whether a Python program performs the gold DSL program's operations (a multiplication
  or division by 100 aside: the unit of a percentage, not the computation);
* **numbers read** -- :func:`numbers_read`: the numbers a program bound (its cells and copied numbers), and whether
  they cover the gold program's arguments.

:func:`failure_class` puts a wrong answer in one class (first that applies): ``invalid program`` (no value: the
program did not run, or no program could be read), ``right value judged wrong`` (the value is the gold one but
the official comparison says no: ``True`` for ``"yes"``, or equal within 0.5 % -- a rounding), ``scale or sign``
(the gold value times 100, 1,000 or 1,000,000, divided by them, or negated, within 0.5 %), ``wrong operation`` (the
program read every number the gold program reads, and computed something else) and ``wrong cell`` (a number the
gold program reads is missing: another cell, another year, a number from elsewhere). It reads the gold answer and
program: an analysis of recorded rows, never part of answering.

:func:`apply_fixes` applies the **mechanical fixes** (:data:`FIXES`) to an executed answer. They read the question,
the program and its value -- never the gold answer -- so a replay of recorded rows through them
(``experiments/finqa_python/finqa_python_failures.py --replay``) is what an answerer applying them would have scored:

* ``percent_as_ratio``: a question asking for a percentage whose program multiplies its result by 100 (the
  expression the answer comes from, followed through ``ans = name`` aliases: :func:`result_expression`) -> the
  result divided by 100 (FinQA's gold programs give a percentage as a ratio: 377 of the 421 percentage questions
  of the document pool; its official comparison does not accept 12.3 for 0.123);
* ``yes_no``: a boolean value (``ans = a > b``) -> ``"yes"`` / ``"no"``, as FinQA's ``greater`` answers.

Sign and unit conventions are not among them: the pool does not fix one (9 of its 24 "decrease" questions have a
negative answer), so they are counted (``scale or sign``), not fixed.
"""

from __future__ import annotations

import ast
import math
import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping

from knapsack_dspy.docqa.metrics.answer_matching import finqa_exact_match
from knapsack_dspy.docqa.sandbox import execute_program
from knapsack_dspy.docqa.sandbox.finqa_dsl import ProgramError, parse_program
from knapsack_dspy.docqa.sandbox.finqa_executor import official_number

__all__ = [
    "FAILURE_CLASSES",
    "FIXES",
    "apply_fixes",
    "dsl_numbers",
    "dsl_operations",
    "failure_class",
    "numbers_read",
    "python_operations",
    "result_expression",
    "same_operations",
]

INVALID, JUDGED_WRONG, SCALE_OR_SIGN, WRONG_OPERATION, WRONG_CELL = (
    "invalid program", "right value judged wrong", "scale or sign", "wrong operation", "wrong cell")
#: The classes of a wrong answer, in the order :func:`failure_class` tries them.
FAILURE_CLASSES = (INVALID, JUDGED_WRONG, SCALE_OR_SIGN, WRONG_OPERATION, WRONG_CELL)

_BINARY = {ast.Add: "add", ast.Sub: "subtract", ast.Mult: "multiply", ast.Div: "divide", ast.Pow: "exp",
           ast.FloorDiv: "divide"}
_AGGREGATES = {"sum": "table_sum", "max": "table_max", "min": "table_min", "mean": "table_average",
               "average": "table_average", "table_sum": "table_sum", "table_max": "table_max",
               "table_min": "table_min", "table_average": "table_average"}
_UNIT = {100.0}  # multiplying / dividing by these changes a percentage's unit, not the computation
_CLOSE = 0.005  # relative difference of a rounding (0.5 %)
_PERCENT_QUESTION = re.compile(r"percent|%", re.IGNORECASE)
_TIMES_100 = re.compile(r"\*\s*100(?:\.0*)?\s*$|^\(?\s*100(?:\.0*)?\s*\*")
_ASSIGNMENT = re.compile(r"([A-Za-z_]\w*)\s*=(?!=)\s*(.+)$")
_NAME = re.compile(r"[A-Za-z_]\w*")


# ---------------------------------------------------------------------------------------------------------------
# operations and numbers

def _is_unit(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and float(node.value) in _UNIT


def python_operations(code: str, *, units: bool = True) -> Counter:
    """The operations a Python program performs (``add``, ``subtract``, ``multiply``, ``divide``, ``exp``,
    ``greater`` for a comparison, ``table_*`` for ``sum`` / ``max`` / ``min`` / ``mean`` calls), as a multiset;
    ``units=False`` leaves out a multiplication or division by 100. A program that does not parse: empty."""
    try:
        tree = ast.parse(code or "")
    except (SyntaxError, ValueError):
        return Counter()
    found: Counter = Counter()
    for node in ast.walk(tree):
        if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
            name = _BINARY[type(node.op)]
            if not units and name in ("multiply", "divide") and (_is_unit(node.right) or
                                                                   (name == "multiply" and _is_unit(node.left))):
                continue
            found[name] += 1
        elif isinstance(node, ast.Compare):
            found["greater"] += len(node.ops)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _AGGREGATES:
            found[_AGGREGATES[node.func.id]] += 1
    return found


def dsl_operations(program: str, *, units: bool = True) -> Counter:
    """The operations of a FinQA DSL program, as a multiset (``units=False``: a multiplication or division by
    ``const_100`` left out). A program that does not parse: empty."""
    try:
        steps = parse_program(program or "")
    except ProgramError:
        return Counter()
    found: Counter = Counter()
    for step in steps:
        if not units and step.op in ("multiply", "divide") and "const_100" in step.args[:2] and (
                step.op == "multiply" or step.args[1] == "const_100"):
            continue
        found[step.op] += 1
    return found


def same_operations(python_code: str, gold_program: str) -> bool | None:
    """Whether a Python program performs the gold DSL program's operations (the unit of a percentage aside);
    ``None`` when either has no operation to compare (it does not parse, or it computes nothing)."""
    mine, gold = python_operations(python_code, units=False), dsl_operations(gold_program, units=False)
    if not mine or not gold:
        return None
    return mine == gold


def dsl_numbers(program: str) -> list[float]:
    """The numbers a FinQA DSL program reads (its arguments that are numbers, not constants nor step results; a
    percentage as the number written: ``5.3%`` -> 5.3)."""
    try:
        steps = parse_program(program or "")
    except ProgramError:
        return []
    out = []
    for step in steps:
        for arg in step.args:
            if arg.startswith(("#", "const_")):
                continue
            value = official_number(arg.rstrip("%")) if arg.endswith("%") else official_number(arg)
            if value is not None and math.isfinite(value):
                out.append(float(value))
    return out


def numbers_read(code: str, table=None) -> list[float] | None:
    """The numbers a Python program binds to variables when it runs on ``table`` (its cells and copied numbers;
    ``ans`` aside); ``None`` when it does not run."""
    result = execute_program(code or "", table or None, kind="python")
    if not result.ok:
        return None
    out = []
    for name, value in (result.variables or {}).items():
        if name in ("ans", "scale"):
            continue
        for item in value if isinstance(value, (list, tuple)) else [value]:
            if isinstance(item, (int, float)) and not isinstance(item, bool) and math.isfinite(item):
                out.append(float(item))
    return out


def _close(a: float, b: float, tolerance: float = _CLOSE) -> bool:
    return abs(a - b) <= tolerance * max(abs(b), 1e-9)


def _covered(needed: Iterable[float], have: Iterable[float]) -> bool:
    """Every needed number is among ``have`` (sign aside; a percentage may be read as its ratio)."""
    have = [abs(h) for h in have]
    return all(any(_close(abs(n), h, 1e-6) or _close(abs(n) / 100, h, 1e-6) for h in have) for n in needed)


def _number(value) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, str):
        try:
            number = float(value.strip().replace(",", ""))
        except ValueError:
            return None
        return number if math.isfinite(number) else None
    return None


# ---------------------------------------------------------------------------------------------------------------
# failure classes

def failure_class(answer, gold, *, program: str = "", gold_program: str = "", table=None) -> str | None:
    """The class of a wrong answer (see the module docstring); ``None`` when the answer is right by the official
    comparison. ``answer``: the executed value (``None``: the program gave none); ``gold``: ``exe_ans``;
    ``program``: the Python program; ``gold_program``: the gold DSL program; ``table``: the question's table."""
    if answer is None or (isinstance(answer, str) and not answer.strip()):
        return INVALID
    if finqa_exact_match(answer, gold):
        return None
    if isinstance(gold, str) and gold in ("yes", "no"):
        if isinstance(answer, bool) or _number(answer) in (0.0, 1.0):
            truth = bool(answer) if isinstance(answer, bool) else _number(answer) == 1.0
            return JUDGED_WRONG if ("yes" if truth else "no") == gold else WRONG_OPERATION
        return WRONG_OPERATION
    value, target = _number(answer), _number(gold)
    if value is None or target is None:
        return INVALID if value is None else WRONG_OPERATION
    if _close(value, target):
        return JUDGED_WRONG
    for factor in (100.0, 1000.0, 1e6):
        if _close(value, target * factor) or _close(value * factor, target):
            return SCALE_OR_SIGN
    if _close(-value, target) or any(_close(-value, target * f) or _close(-value * f, target)
                                     for f in (100.0, 1000.0, 1e6)):
        return SCALE_OR_SIGN
    needed = dsl_numbers(gold_program)
    used = numbers_read(program, table)
    if needed and used is not None and _covered(needed, used):
        return WRONG_OPERATION
    return WRONG_CELL


# ---------------------------------------------------------------------------------------------------------------
# mechanical fixes (never the gold answer)

def _percent_as_ratio(question: str, program: str, answer):
    """A percentage computed as a percent (its last line multiplies by 100) -> the ratio FinQA answers."""
    value = _number(answer)
    if value is None or isinstance(answer, str) or not _PERCENT_QUESTION.search(question or ""):
        return None
    if not _TIMES_100.search(result_expression(program)):
        return None
    return value / 100


def result_expression(program: str) -> str:
    """The expression a program's answer comes from: the last assignment to ``ans`` (else the program's last
    assignment: the sandbox answers with it), followed through plain aliases (``ans = step_2`` -> what ``step_2``
    was set to); ``""`` when the program assigns nothing."""
    assignments = []
    for line in (program or "").splitlines():
        match = _ASSIGNMENT.match(line.split("#", 1)[0].strip())
        if match:
            assignments.append((match.group(1), match.group(2).strip()))
    if not assignments:
        return ""
    answers = [k for k, (name, _) in enumerate(assignments) if name == "ans"]
    at = answers[-1] if answers else len(assignments) - 1
    expression = assignments[at][1]
    while _NAME.fullmatch(expression):
        earlier = [k for k in range(at) if assignments[k][0] == expression]
        if not earlier:
            break
        at = earlier[-1]
        expression = assignments[at][1]
    return expression


def _yes_no(question: str, program: str, answer):
    """A comparison's boolean -> "yes" / "no"."""
    if isinstance(answer, bool):
        return "yes" if answer else "no"
    return None


#: name -> fix(question, program, answer) -> the fixed answer, or None when it does not apply. Frozen: a change
#: here is a new set of fixes, to be named by its commit before it is replayed.
FIXES: dict[str, Callable] = {"percent_as_ratio": _percent_as_ratio, "yes_no": _yes_no}


def apply_fixes(question: str, program: str, answer, fixes: Mapping[str, Callable] | None = None):
    """``(answer, [names of the fixes applied])``: each fix of ``fixes`` (default :data:`FIXES`) applied in turn to
    the executed ``answer``; a ``None`` answer (no value) is left alone."""
    applied = []
    if answer is None:
        return answer, applied
    for name, fix in (FIXES if fixes is None else fixes).items():
        fixed = fix(question, program, answer)
        if fixed is not None:
            answer = fixed
            applied.append(name)
    return answer, applied
