"""Gold SEER-style Python programs synthesised from a pool record, verified strictly.

Few-shot demos for the Python program-of-thought solver need a gold *program*; TAT-QA gives an
arithmetic ``derivation`` (``"(44.1-56.7)/56.7"``) and FinQA a DSL program instead. This module writes
the program a SEER prompt shows (Tonglet et al., 2023) and keeps it only when running it through the
sandbox (:func:`knapsack_dspy.docqa.sandbox.execute_program`) reproduces the gold answer **for the right reason**
(:mod:`knapsack_dspy.docqa.data.gold_program_checks`: structural rules and a perturbation of the cells read):

- **arithmetic** (TAT-QA): every number of the derivation is bound to ``table_query_<i> =
  table["row", "col"]`` when a table cell holds it (labels as the table's layout shows them; of several cells,
  the one whose labels the question names most), else to ``text_variable_<i> = <number>``; then ``ans = <the
  derivation's expression over those names>``. The roles of the numbers
  (:mod:`knapsack_dspy.docqa.data.derivation_roles`) decide what is one quantity: equal terms of one sum are two
  (two cells), the base of ``(a - b) / b`` is one; an average's divisor, a count, ``* 100`` and ``* 1000`` are
  constants. A record answered from the text only reads no cell. Percent answers are written in percent units
  (``* 100`` is appended when the derivation is a ratio). No ``scale`` line: the answer's scale is decided from
  the document (``knapsack_dspy.docqa.data.answer_scale``).
- **span** -> ``ans = "<span>"``; **multi-span** -> ``ans = ["<span>", ...]``; **count** ->
  ``ans = len([<the counted items>])`` (items from the derivation ``"a##b"``).
- **FinQA** (a DSL ``program``) -> ``step_<k> = <a> <op> <b>`` per step, the last one ``ans = ...``.

When no candidate is verified, the program falls back to the literal answer (``ans = -22.22``);
:attr:`GoldProgram.verified` tells which happened, ``reason`` why, ``rejected`` what the strict checks found.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from itertools import pairwise

from knapsack_dspy.docqa.data.derivation_roles import (
    derivation_roles,
    finqa_constants,
    in_answer_unit,
    parse_folded,
    positions_in_order,
)
from knapsack_dspy.docqa.data.gold_program_checks import finding_kind, strict_findings
from knapsack_dspy.docqa.data.tatqa_derivation import DerivationLiteral
from knapsack_dspy.docqa.number_text import parse_number
from knapsack_dspy.docqa.sandbox import execute_program
from knapsack_dspy.docqa.sandbox.cell_numbers import parse_cell
from knapsack_dspy.docqa.sandbox.finqa_dsl import ProgramError, parse_program
from knapsack_dspy.docqa.sandbox.finqa_executor import official_number
from knapsack_dspy.docqa.sandbox.table_view import TableView

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
    ``rejected``: the strict checks' findings on candidates that gave the gold answer by coincidence.
    """

    code: str
    verified: bool
    source: str
    reason: str = ""
    rejected: tuple[str, ...] = ()


# ----------------------------------------------------------------------------------------------------
# formatting helpers

def _py_string(text: str) -> str:
    """A Python string literal in double quotes (JSON escaping is valid Python)."""
    return json.dumps(str(text), ensure_ascii=False)


def _py_number(value: float) -> str:
    if float(value).is_integer() and abs(value) < 1e15:
        return str(int(value))
    return repr(float(value))


def literal_program(answer) -> str:
    """``ans = <answer>``: a number, a string or a list of strings."""
    if isinstance(answer, bool):
        answer = str(answer)
    if isinstance(answer, (int, float)):
        value = _py_number(answer)
    elif isinstance(answer, (list, tuple)):
        value = "[" + ", ".join(_py_string(item) for item in answer) + "]"
    else:
        value = _py_string("" if answer is None else answer)
    return f"ans = {value}"


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
# binding numbers to table cells and text variables

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
    labels the model is shown (``knapsack_dspy.docqa.table_layout``), in table order."""
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


def _named_words(text: str) -> set[str]:
    """Content words and numbers (years) of a label or a question."""
    return _row_words(text) | set(re.findall(r"\d+", str(text)))


def _names(question: str, label: str) -> bool:
    """Whether the question names the label: a content word or number in common, or two adjacent words of the
    label written as one in the question ("FairValue" for "Fair Value")."""
    if _named_words(label) & _named_words(question):
        return True
    words = re.findall(r"[a-z]+", label.lower())
    joined = re.sub(r"[^a-z]", "", question.lower())
    return any(len(a + b) > 5 and a + b in joined for a, b in pairwise(words))


def _overlap(location: tuple[str, str], words: set[str]) -> int:
    row, col = location
    return len(words & set(re.findall(r"\w+", f"{row} {col}".lower())))


class _Binder:
    """Writes the look-up and text-variable lines of one program.

    A number becomes ``table_query_<i> = table["row", "col"]`` when a cell holds it -- the cell whose labels
    share most words with the question, table order breaking ties -- else ``text_variable_<i> = <number>``.
    ``table=None`` (a record answered from the text only) binds no cell. A second quantity with the same value
    (two terms of one sum) gets a cell not read yet that the question names, or a text variable of its own."""

    def __init__(self, table, question: str):
        self.locations = _cell_locations(table) if table else {}
        self.question = question
        self.words = set(re.findall(r"\w+", question.lower()))
        self.query_lines: list[str] = []
        self.text_lines: list[str] = []
        self.read: set[tuple[str, str]] = set()

    def cells(self, number: float) -> list[tuple[str, str]]:
        return [cell for cell in self.locations.get(number, []) if cell not in self.read]

    def bind(self, number: float, cells: list[tuple[str, str]] | None = None, *, again: bool = False) -> str:
        """A new variable holding ``number`` (``cells``: the candidate cells, default every unread cell holding
        it; ``again``: it is another quantity with a value already bound, so only cells the question names)."""
        cells = self.cells(number) if cells is None else cells
        if again:
            cells = [cell for cell in cells if _names(self.question, f"{cell[0]} {cell[1]}")]
        if cells:
            row, col = max(cells, key=lambda loc: (_overlap(loc, self.words), -cells.index(loc)))
            self.read.add((row, col))
            variable = f"table_query_{len(self.query_lines)}"
            self.query_lines.append(f"{variable} = table[{_py_string(row)}, {_py_string(col)}]")
        else:
            variable = f"text_variable_{len(self.text_lines)}"
            self.text_lines.append(f"{variable} = {_py_number(number)}")
        return variable

    def lines(self) -> list[str]:
        return self.query_lines + self.text_lines


# ----------------------------------------------------------------------------------------------------
# TAT-QA derivations

def tatqa_python_candidates(example: Mapping) -> list[tuple[str, str]]:
    """Candidate programs ``[(code, source)]`` for a TAT-QA record, most natural first (not yet run)."""
    answer_type = example.get("answer_type") or ""
    answer = example.get("answer")
    derivation = (example.get("derivation") or "").strip()
    if answer_type == "span":
        return [(literal_program(answer if isinstance(answer, str) else str(answer)), "span")]
    if answer_type == "multi-span":
        spans = list(answer) if isinstance(answer, (list, tuple)) else [str(answer)]
        return [(literal_program(spans), "multi-span")]
    if answer_type == "count":
        items = [item.strip() for item in derivation.split("##") if item.strip()] if derivation else []
        code = "ans = len([" + ", ".join(_py_string(item) for item in items) + "])"
        return [(code, "count")] if items else []
    if answer_type != "arithmetic" or not derivation:
        return []
    return [(code, "derivation") for code in _arithmetic_programs(example, derivation)]


_INLINE_CONSTANTS = frozenset(float(n) for n in (*range(1, 13), 100, 1000))


def _arithmetic_programs(example: Mapping, derivation: str) -> list[str]:
    try:
        expression, literals = parse_folded(derivation)
    except ValueError:
        return []
    scale = example.get("scale") or ""
    question = str(example.get("question") or "")
    roles = derivation_roles(expression, literals, question)
    # a record answered from the text only reads no cell: a cell holding the same number is a coincidence
    table = example.get("table") if (example.get("modality") or "") != "text" else None
    question_words = _row_words(question)
    used = positions_in_order(expression)

    programs = []
    for percent_as_ratio in (False, True):
        if percent_as_ratio and not any(literals[p].percent for p in used):
            continue
        binder = _Binder(table, question)
        names: dict[str, str] = {}
        by_key: dict[tuple[float, bool], list[str]] = {}  # the references already bound to one value
        for position in used:
            literal = literals[position]
            number = in_answer_unit(literal, scale)
            if position in roles.constants:  # an average's divisor, "* 100", a count: the arithmetic's own
                names[position] = _py_number(number)
                continue
            key = (number, literal.percent)
            taken = {names[q] for q in roles.siblings.get(position, ()) if q in names}
            reuse = next((ref for ref in by_key.get(key, []) if ref not in taken), None)
            if reuse is not None:  # the same value in another role: the same quantity
                names[position] = reuse
                continue
            cells = None
            if not literal.percent and literal.written.isdigit() and number in _INLINE_CONSTANTS:
                # a small integer ("3 - 2" offices) is a cell only when the question names its row
                cells = [cell for cell in binder.cells(number) if _row_words(cell[0]) & question_words]
                if not cells:
                    names[position] = _py_number(number)
                    continue
            variable = binder.bind(number, cells, again=key in by_key)
            reference = f"({variable} / 100)" if (percent_as_ratio and literal.percent) else variable
            names[position] = reference
            by_key.setdefault(key, []).append(reference)

        body = _rename(expression, names)
        variants = [body]
        if scale == "percent":
            variants.append(ast.BinOp(left=body, op=ast.Mult(), right=ast.Constant(100)))
        for variant in variants:
            programs.append("\n".join([*binder.lines(), f"ans = {ast.unparse(variant)}"]))
    return programs


# ----------------------------------------------------------------------------------------------------
# FinQA DSL -> Python

_FINQA_OPERATORS = {"add": "+", "subtract": "-", "multiply": "*", "divide": "/", "exp": "**"}


def finqa_python_candidates(example: Mapping) -> list[tuple[str, str]]:
    """The FinQA DSL program as SEER-style Python (``[]`` when it cannot be written). Number arguments read the
    table cell that holds them (the one the question names most), except percentages, the ``100`` / ``1000`` of
    a multiplication or division and a small count divided by; the second of two equal arguments of one step is
    another quantity (another cell the question names, or a text variable)."""
    program = (example.get("program") or "").strip()
    if not program:
        return []
    try:
        steps = parse_program(program)
    except ProgramError:
        return []
    binder = _Binder(example.get("table") or [], str(example.get("question") or ""))
    lines_steps, by_text = [], {}
    constants = finqa_constants(steps, official_number)

    def operand(index: int, step, position: int, taken: str | None) -> str | None:
        arg = step.args[position]
        if arg.startswith("#"):
            return f"step_{int(arg[1:])}"
        value = official_number(arg)
        if value is None:
            return None
        if arg.startswith("const_") or (index, position) in constants:
            return _py_number(value)
        if arg in by_text and by_text[arg] != taken:
            return by_text[arg]
        name = binder.bind(value, [] if arg.endswith("%") else None, again=arg in by_text)
        by_text.setdefault(arg, name)
        return name

    for index, step in enumerate(steps):
        target = "ans" if index == len(steps) - 1 else f"step_{index}"
        if step.op in _FINQA_OPERATORS or step.op == "greater":
            left = operand(index, step, 0, None)
            right = operand(index, step, 1, left)
            if left is None or right is None:
                return []
            if step.op == "greater":
                lines_steps.append(f'{target} = "yes" if {left} > {right} else "no"')
            else:
                lines_steps.append(f"{target} = {left} {_FINQA_OPERATORS[step.op]} {right}")
        else:  # table_max / table_min / table_sum / table_average over a row
            lines_steps.append(f"{target} = {step.op}({_py_string(step.args[0])})")
    return [("\n".join(binder.lines() + lines_steps), "finqa")]


# ----------------------------------------------------------------------------------------------------
# TAT-QA derivation -> FinQA DSL

def _dsl_number(literal: DerivationLiteral, scale: str) -> str:
    number = in_answer_unit(literal, scale)
    text = _py_number(number)
    return text + "%" if literal.percent else text


def finqa_dsl_candidates(example: Mapping) -> list[str]:
    """A TAT-QA arithmetic derivation as FinQA DSL programs (plain, and ``* 100`` for percent answers)."""
    derivation = (example.get("derivation") or "").strip()
    if (example.get("answer_type") or "") != "arithmetic" or not derivation:
        return []
    try:
        expression, literals = parse_folded(derivation)
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

def synthesise_python_program(example: Mapping, execute: Executor | None = None, *, strict: bool = True) -> GoldProgram:
    """The strictly verified gold Python program of a pool record, or its literal-answer fallback.

    ``example``: uniform fields (``answer``, ``answer_value``, ``answer_type``, ``scale``, ``derivation``,
    ``program``, ``table``, ``modality``, ``question``). ``execute``: ``execute_program`` (default) or a stand-in
    with its signature. A candidate is kept when running it gives the gold answer and, with ``strict``, it breaks
    no rule of :func:`knapsack_dspy.docqa.data.gold_program_checks.strict_findings`; a rejected candidate's findings are
    kept in ``GoldProgram.rejected``.
    """
    execute = execute or execute_program
    answer = example.get("answer")
    answer_value = example.get("answer_value")
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
    rejected: list[str] = []
    for code, source in candidates:
        result = execute(code, table, kind="python")
        if not result.ok:
            reason = f"the synthesised program failed: {result.error}"
            continue
        if not answers_match(result.answer, gold, answer_value):
            reason = f"the synthesised program gives {result.answer!r}, not {gold!r}"
            continue
        findings = strict_findings(code, example, execute=execute) if strict and source in ("derivation",
                                                                                             "finqa") else []
        if findings:
            rejected += findings
            reason = f"the synthesised program reaches the answer by coincidence ({findings[0]})"
            continue
        return GoldProgram(code, True, source, rejected=tuple(rejected))
    fallback = answer_value if (example.get("answer_type") or "") in ("arithmetic", "count") and \
        answer_value is not None else answer
    return GoldProgram(literal_program(fallback), False, "literal", reason, tuple(rejected))


def verification_report(examples, execute: Executor | None = None, *, strict: bool = True) -> dict:
    """How many pool records get a verified synthesised program, overall and per answer type.

    Returns ``{"total", "verified", "share", "table_lookups", "text_variables", "by_answer_type":
    {type: {"total", "verified"}}, "by_source": {source: n}, "failures": [(id, reason), ...],
    "coincidental": {"records", "fell_back", "by_kind": {kind: n}, "ids": [...]}}``; ``table_lookups`` /
    ``text_variables`` count verified arithmetic programs using each binding; ``coincidental`` counts the records
    with a candidate that gave the gold answer but was rejected by the strict checks (``fell_back``: of them,
    those left with the literal program; ``by_kind``: records per kind of finding).
    """
    execute = execute or execute_program
    report = {"total": 0, "verified": 0, "table_lookups": 0, "text_variables": 0, "by_answer_type": {},
              "by_source": {}, "failures": [],
              "coincidental": {"records": 0, "fell_back": 0, "by_kind": {}, "ids": []}}
    for example in examples:
        gold = synthesise_python_program(example, execute, strict=strict)
        answer_type = example.get("answer_type") or "unknown"
        row = report["by_answer_type"].setdefault(answer_type, {"total": 0, "verified": 0})
        row["total"] += 1
        report["total"] += 1
        report["by_source"][gold.source] = report["by_source"].get(gold.source, 0) + 1
        if gold.rejected:
            coincidental = report["coincidental"]
            coincidental["records"] += 1
            coincidental["fell_back"] += not gold.verified
            coincidental["ids"].append(example.get("id"))
            for kind in sorted({finding_kind(f) for f in gold.rejected}):
                coincidental["by_kind"][kind] = coincidental["by_kind"].get(kind, 0) + 1
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
