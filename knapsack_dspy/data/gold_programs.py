"""Gold SEER-style Python programs synthesised from a pool record, verified by executing them.

Few-shot demos for the Python program-of-thought solver need a gold *program*; TAT-QA gives an
arithmetic ``derivation`` (``"(44.1-56.7)/56.7"``) and FinQA a DSL program instead. This module writes
the program a SEER prompt shows (Tonglet et al., 2023) and keeps it only when running it through the
sandbox (:func:`knapsack_dspy.execution.execute_program`) reproduces the gold answer:

- **arithmetic** (TAT-QA): every number of the derivation is bound to ``table_query_<i> =
  table["row", "col"]`` when a table cell holds it (and the labels resolve to that cell exactly as the
  sandbox resolves them), else to ``text_variable_<i> = <number>``; then ``ans = <the derivation's
  expression over those names>`` and ``scale = "<gold scale>"``. Percent answers are written in percent
  units (``* 100`` is appended when the derivation is a ratio). Equal numbers share one name.
- **span** -> ``ans = "<span>"``; **multi-span** -> ``ans = ["<span>", ...]``; **count** ->
  ``ans = len([<the counted items>])`` (items from the derivation ``"a##b"``) or ``ans = <n>``.
- **FinQA** (a DSL ``program``) -> ``step_<k> = <a> <op> <b>`` per step, the last one ``ans = ...``.

When no candidate reproduces the answer, the program falls back to the literal answer
(``ans = -22.22``); :attr:`GoldProgram.verified` tells which happened and ``reason`` why.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from knapsack_dspy.data.tatqa_derivation import SCALE_FACTORS, DerivationLiteral, parse_expression
from knapsack_dspy.execution import execute_program
from knapsack_dspy.execution.cell_numbers import parse_cell
from knapsack_dspy.execution.finqa_dsl import ProgramError, parse_program
from knapsack_dspy.execution.finqa_executor import official_number
from knapsack_dspy.execution.table_view import TableView
from knapsack_dspy.numbers import parse_number

__all__ = ["GoldProgram", "answers_match", "finqa_dsl_candidates", "finqa_python_candidates", "literal_program",
           "synthesise_finqa_program", "synthesise_python_program", "tatqa_python_candidates",
           "verification_report"]

Executor = Callable[..., object]


@dataclass(frozen=True)
class GoldProgram:
    """A gold program for a demo.

    ``verified``: a synthesised program (not the literal fallback) reproduced the gold answer.
    ``source``: ``"derivation" | "span" | "multi-span" | "count" | "finqa" | "literal"``.
    ``reason``: why synthesis fell back to the literal answer (``""`` when verified).
    """

    code: str
    verified: bool
    source: str
    reason: str = ""


# ----------------------------------------------------------------------------------------------------
# formatting helpers

def _py_string(text: str) -> str:
    """A Python string literal in double quotes (JSON escaping is valid Python)."""
    return json.dumps(str(text), ensure_ascii=False)


def _py_number(value: float) -> str:
    if float(value).is_integer() and abs(value) < 1e15:
        return str(int(value))
    return repr(float(value))


def _scale_line(scale: str) -> str:
    return f"scale = {_py_string(scale or '')}"


def literal_program(answer, scale: str = "") -> str:
    """``ans = <answer>`` and ``scale = "<scale>"``: a number, a string or a list of strings."""
    if isinstance(answer, bool):
        answer = str(answer)
    if isinstance(answer, (int, float)):
        value = _py_number(answer)
    elif isinstance(answer, (list, tuple)):
        value = "[" + ", ".join(_py_string(item) for item in answer) + "]"
    else:
        value = _py_string("" if answer is None else answer)
    return f"ans = {value}\n{_scale_line(scale)}"


# ----------------------------------------------------------------------------------------------------
# answer comparison

def answers_match(predicted, gold, gold_value=None) -> bool:
    """Whether an executed answer reproduces the gold one.

    Numbers: equal after rounding to 2 decimals, or within 0.005 + 1e-6 relative (gold answers are
    rounded; TAT-QA's evaluation rounds predictions to 2 decimals too). Strings: equal after
    whitespace normalisation. Lists: the same items in the same order.
    """
    if isinstance(gold, (list, tuple)):
        if not isinstance(predicted, (list, tuple)) or len(predicted) != len(gold):
            return False
        return all(answers_match(p, g) for p, g in zip(predicted, gold, strict=True))
    if isinstance(predicted, (list, tuple)):
        return False
    number = gold_value if gold_value is not None else None
    if number is None and not isinstance(gold, str):
        number = parse_number(gold)
    if number is not None and not isinstance(predicted, str):
        value = parse_number(predicted)
        if value is None:
            return False
        return round(value, 2) == round(float(number), 2) or abs(value - number) <= 0.005 + 1e-6 * abs(number)
    if isinstance(gold, str) and isinstance(predicted, str):
        return " ".join(gold.split()) == " ".join(predicted.split())
    if isinstance(gold, str):
        gold_number = parse_number(gold)
        value = parse_number(predicted)
        return gold_number is not None and value is not None and abs(value - gold_number) <= 1e-9
    return False


# ----------------------------------------------------------------------------------------------------
# TAT-QA derivations

def _parse_derivation(text: str) -> tuple[ast.expr, dict[str, DerivationLiteral]]:
    """Derivation -> (expression over literal names, name -> literal), each negated literal (an accounting
    negative ``(5,946)`` or a unary minus) folded into one negative literal, so that a table cell ``(5,946)``
    binds to it. ``ValueError`` if not arithmetic."""
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


def _in_answer_unit(literal: DerivationLiteral, answer_scale: str) -> float:
    """The number in the answer's unit (percent units for "12%"): "60.3 million" is 60300 when the answer is in
    thousands."""
    if not literal.scale_word:
        return literal.number
    return literal.number * literal.scale_factor / SCALE_FACTORS.get(answer_scale, 1.0)


def _rename(node: ast.expr, names: Mapping[str, str]) -> ast.expr:
    """The expression with each literal name replaced by its Python reference (a variable or a number)."""
    if isinstance(node, ast.Name):
        return ast.parse(names[node.id], mode="eval").body
    if isinstance(node, ast.BinOp):
        return ast.BinOp(left=_rename(node.left, names), op=node.op, right=_rename(node.right, names))
    if isinstance(node, ast.UnaryOp):
        return ast.UnaryOp(op=node.op, operand=_rename(node.operand, names))
    return node


def _cell_locations(table: Sequence[Sequence[str]]):
    """number -> [(row label, column label)] for the cells a program can read with ``table[row, col]``: the
    labels the model is shown (``knapsack_dspy.table_layout``), each resolving to exactly that cell."""
    try:
        view = TableView([list(row) for row in table])
    except TypeError:
        return {}
    found: dict[float, list[tuple[str, str]]] = {}
    for row_label, col_label, cell in view.labelled_cells():
        value = parse_cell(cell)
        if not isinstance(value, float) or not row_label.strip() or not col_label.strip():
            continue
        found.setdefault(value, []).append((row_label, col_label))
    return found


_STOPWORDS = frozenset({"a", "an", "and", "as", "at", "by", "for", "from", "in", "is", "of", "on", "or", "the",
                        "to", "total", "what", "which", "was", "were"})


def _row_words(text: str) -> set[str]:
    """Content words of a label or a question (lower case, no stop words, no numbers)."""
    return {w for w in re.findall(r"[a-z]+", str(text).lower()) if w not in _STOPWORDS and len(w) > 2}


def _best_location(locations, question: str) -> tuple[str, str]:
    """Prefer the cell whose row / column labels share most words with the question."""
    words = set(re.findall(r"\w+", question.lower()))

    def overlap(location):
        row, col = location
        return len(words & set(re.findall(r"\w+", f"{row} {col}".lower())))

    return max(locations, key=lambda loc: (overlap(loc), -locations.index(loc)))


def _bind_number(number: float, cells, question: str, lines_query: list[str], lines_text: list[str]) -> str:
    """A new variable holding ``number``: a look-up of the table cell that holds it (the one whose labels the
    question names most) or, without one, the number written out. Appends its line; returns its name."""
    if cells:
        row, col = _best_location(cells, question)
        variable = f"table_query_{len(lines_query)}"
        lines_query.append(f"{variable} = table[{_py_string(row)}, {_py_string(col)}]")
    else:
        variable = f"text_variable_{len(lines_text)}"
        lines_text.append(f"{variable} = {_py_number(number)}")
    return variable


def tatqa_python_candidates(example: Mapping) -> list[tuple[str, str]]:
    """Candidate programs ``[(code, source)]`` for a TAT-QA record, most natural first (not yet run)."""
    answer_type = example.get("answer_type") or ""
    answer = example.get("answer")
    scale = example.get("scale") or ""
    derivation = (example.get("derivation") or "").strip()
    if answer_type == "span":
        return [(literal_program(answer if isinstance(answer, str) else str(answer), scale), "span")]
    if answer_type == "multi-span":
        spans = list(answer) if isinstance(answer, (list, tuple)) else [str(answer)]
        return [(literal_program(spans, scale), "multi-span")]
    if answer_type == "count":
        items = [item.strip() for item in derivation.split("##") if item.strip()] if derivation else []
        code = "ans = len([" + ", ".join(_py_string(item) for item in items) + "])\n" + _scale_line(scale)
        return [(code, "count")] if items else []
    if answer_type != "arithmetic" or not derivation:
        return []
    return [(code, "derivation") for code in _arithmetic_programs(example, derivation, scale)]


_INLINE_CONSTANTS = frozenset(float(n) for n in (*range(1, 13), 100, 1000))


def _names_in_order(node: ast.expr) -> list[str]:
    """Literal names left to right as written."""
    if isinstance(node, ast.Name):
        return [node.id]
    if isinstance(node, ast.BinOp):
        return _names_in_order(node.left) + _names_in_order(node.right)
    if isinstance(node, ast.UnaryOp):
        return _names_in_order(node.operand)
    return []


def _arithmetic_programs(example: Mapping, derivation: str, scale: str) -> list[str]:
    try:
        expression, literals = _parse_derivation(derivation)
    except ValueError:
        return []
    used = _names_in_order(expression)
    table = example.get("table") or []
    locations = _cell_locations(table) if table else {}
    question = str(example.get("question") or "")
    question_words = _row_words(question)

    programs = []
    for percent_as_ratio in (False, True):
        if percent_as_ratio and not any(literals[n].percent for n in used):
            continue
        lines_query, lines_text, names, by_key = [], [], {}, {}
        for name in dict.fromkeys(used):  # first-appearance order, no repeats
            literal = literals[name]
            number = _in_answer_unit(literal, scale)
            key = (number, literal.percent)
            if key in by_key:
                names[name] = by_key[key]
                continue
            cells = locations.get(number)
            if not literal.percent and literal.written.isdigit() and number in _INLINE_CONSTANTS:
                # "/ 2" of an average or "* 100" stays a literal, unless a cell of a row the question
                # names holds it ("3 - 2" offices)
                cells = [cell for cell in cells or [] if _row_words(cell[0]) & question_words]
                if not cells:
                    names[name] = by_key[key] = _py_number(number)
                    continue
            variable = _bind_number(number, cells, question, lines_query, lines_text)
            reference = f"({variable} / 100)" if (percent_as_ratio and literal.percent) else variable
            names[name] = by_key[key] = reference

        body = _rename(expression, names)
        variants = [body]
        if scale == "percent":
            variants.append(ast.BinOp(left=body, op=ast.Mult(), right=ast.Constant(100)))
        for variant in variants:
            lines = lines_query + lines_text + [f"ans = {ast.unparse(variant)}", _scale_line(scale)]
            programs.append("\n".join(lines))
    return programs


# ----------------------------------------------------------------------------------------------------
# FinQA DSL -> Python

_FINQA_OPERATORS = {"add": "+", "subtract": "-", "multiply": "*", "divide": "/", "exp": "**"}


def finqa_python_candidates(example: Mapping) -> list[tuple[str, str]]:
    """The FinQA DSL program as SEER-style Python (``[]`` when it cannot be written)."""
    program = (example.get("program") or "").strip()
    if not program:
        return []
    try:
        steps = parse_program(program)
    except ProgramError:
        return []
    table = example.get("table") or []
    locations = _cell_locations(table) if table else {}
    question = str(example.get("question") or "")
    lines_query, lines_text, lines_steps, by_text = [], [], [], {}

    def operand(arg: str) -> str | None:
        if arg.startswith("#"):
            return f"step_{int(arg[1:])}"
        if arg.startswith("const_"):
            value = official_number(arg)
            return None if value is None else _py_number(value)
        if arg in by_text:
            return by_text[arg]
        value = official_number(arg)
        if value is None:
            return None
        cells = locations.get(value) if not arg.endswith("%") else None
        name = _bind_number(value, cells, question, lines_query, lines_text)
        by_text[arg] = name
        return name

    for index, step in enumerate(steps):
        target = "ans" if index == len(steps) - 1 else f"step_{index}"
        if step.op in _FINQA_OPERATORS or step.op == "greater":
            left, right = operand(step.args[0]), operand(step.args[1])
            if left is None or right is None:
                return []
            if step.op == "greater":
                lines_steps.append(f'{target} = "yes" if {left} > {right} else "no"')
            else:
                lines_steps.append(f"{target} = {left} {_FINQA_OPERATORS[step.op]} {right}")
        else:  # table_max / table_min / table_sum / table_average over a row
            lines_steps.append(f"{target} = {step.op}({_py_string(step.args[0])})")
    return [("\n".join(lines_query + lines_text + lines_steps), "finqa")]


# ----------------------------------------------------------------------------------------------------
# TAT-QA derivation -> FinQA DSL

def _dsl_number(literal: DerivationLiteral, scale: str) -> str:
    number = _in_answer_unit(literal, scale)
    text = _py_number(number)
    return text + "%" if literal.percent else text


def finqa_dsl_candidates(example: Mapping) -> list[str]:
    """A TAT-QA arithmetic derivation as FinQA DSL programs (plain, and ``* 100`` for percent answers)."""
    derivation = (example.get("derivation") or "").strip()
    if (example.get("answer_type") or "") != "arithmetic" or not derivation:
        return []
    try:
        expression, literals = _parse_derivation(derivation)
    except ValueError:
        return []
    scale = example.get("scale") or ""
    steps: list[str] = []
    names = {ast.Add: "add", ast.Sub: "subtract", ast.Mult: "multiply", ast.Div: "divide"}

    def emit(node) -> str:
        if isinstance(node, ast.Name):
            return _dsl_number(literals[node.id], scale)
        if isinstance(node, ast.UnaryOp):
            inner = emit(node.operand)
            if isinstance(node.op, ast.UAdd):
                return inner
            steps.append(f"multiply({inner}, const_m1)")
            return f"#{len(steps) - 1}"
        left, right = emit(node.left), emit(node.right)
        steps.append(f"{names[type(node.op)]}({left}, {right})")
        return f"#{len(steps) - 1}"

    result = emit(expression)
    if not steps:  # a lone number
        steps.append(f"add({result}, const_0)")
    programs = [", ".join(steps)]
    if scale == "percent":
        programs.append(", ".join([*steps, f"multiply(#{len(steps) - 1}, const_100)"]))
    return programs


def synthesise_finqa_program(example: Mapping, execute: Executor | None = None) -> str | None:
    """The record's FinQA DSL program: its gold ``program`` as is, else a TAT-QA arithmetic derivation
    converted and verified by execution; ``None`` when neither exists (spans cannot be written in the DSL)."""
    program = (example.get("program") or "").strip()
    if program:
        return program
    execute = execute or execute_program
    table = [list(row) for row in (example.get("table") or [])] or None
    for candidate in finqa_dsl_candidates(example):
        result = execute(candidate, table, kind="finqa")
        if result.ok and answers_match(result.answer, example.get("answer_value"), example.get("answer_value")):
            return candidate
    return None


# ----------------------------------------------------------------------------------------------------

def synthesise_python_program(example: Mapping, execute: Executor | None = None) -> GoldProgram:
    """The verified gold Python program of a pool record, or its literal-answer fallback.

    ``example``: uniform fields (``answer``, ``answer_value``, ``answer_type``, ``scale``, ``derivation``,
    ``program``, ``table``). ``execute``: ``execute_program`` (default) or a stand-in with its signature.
    """
    execute = execute or execute_program
    answer = example.get("answer")
    answer_value = example.get("answer_value")
    scale = example.get("scale") or ""
    dataset = example.get("dataset") or ""
    is_finqa = dataset.startswith("finqa") or (not dataset and (example.get("program") or "").strip()
                                      and not (example.get("derivation") or "").strip())
    if is_finqa:
        candidates = finqa_python_candidates(example)
    else:
        candidates = tatqa_python_candidates(example)
    gold = answer
    if (example.get("answer_type") or "") in ("arithmetic", "count"):
        gold = answer_value if answer_value is not None else answer
    table = [list(row) for row in (example.get("table") or [])] or None
    reason = "no program could be written from the record" if not candidates else ""
    for code, source in candidates:
        result = execute(code, table, kind="python")
        if not result.ok:
            reason = f"the synthesised program failed: {result.error}"
            continue
        if answers_match(result.answer, gold, answer_value) and (result.scale or "") == scale:
            return GoldProgram(code, True, source)
        reason = f"the synthesised program gives {result.answer!r}, not {gold!r}"
    fallback = answer_value if (example.get("answer_type") or "") in ("arithmetic", "count") and \
        answer_value is not None else answer
    return GoldProgram(literal_program(fallback, scale), False, "literal", reason)


def verification_report(examples, execute: Executor | None = None) -> dict:
    """How many pool records get a verified synthesised program, overall and per answer type.

    Returns ``{"total", "verified", "share", "table_lookups", "text_variables", "by_answer_type":
    {type: {"total", "verified"}}, "by_source": {source: n}, "failures": [(id, reason), ...]}``;
    ``table_lookups`` / ``text_variables`` count verified arithmetic programs using each binding.
    """
    execute = execute or execute_program
    report = {"total": 0, "verified": 0, "table_lookups": 0, "text_variables": 0, "by_answer_type": {},
              "by_source": {}, "failures": []}
    for example in examples:
        gold = synthesise_python_program(example, execute)
        answer_type = example.get("answer_type") or "unknown"
        row = report["by_answer_type"].setdefault(answer_type, {"total": 0, "verified": 0})
        row["total"] += 1
        report["total"] += 1
        report["by_source"][gold.source] = report["by_source"].get(gold.source, 0) + 1
        if gold.verified:
            row["verified"] += 1
            report["verified"] += 1
            if gold.source in ("derivation", "finqa"):
                report["table_lookups"] += "table_query_" in gold.code
                report["text_variables"] += "text_variable_" in gold.code
        else:
            report["failures"].append((example.get("id"), gold.reason))
    report["share"] = report["verified"] / report["total"] if report["total"] else 0.0
    return report
