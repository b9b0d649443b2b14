"""Render queries and pool records in a solver's signature fields.

A query and a demo must show the document the same way, or the few-shot examples teach a format the
query does not have. Every solver therefore builds its predictor inputs with the same functions:

- :func:`document_inputs` -> ``{"table": ..., "text": ..., "question": ...}`` for the table+text
  signatures (``AnswerFromTableText``, ``WritePythonProgram``, ``WriteFinqaProgram``);
- :func:`statute_inputs` -> ``{"statute": ..., "facts": ..., "question": ...}`` for ``AnswerStatuteQuestion``.

and the gold outputs of a pool record with :func:`gold_answer_text`, :func:`gold_scale_text`,
:func:`gold_reasoning` and :func:`gold_statute_answer`. Rendering is pure and deterministic (no LM).

Sources are a ``dspy.Example`` or any mapping with ``question`` and either ``table`` (rows of cells,
rendered by ``knapsack_dspy.docqa.data.rendering.render_table``, or an already rendered string) and
``paragraphs`` (a list, rendered by ``render_paragraphs``) or ``text`` (an already rendered string).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

import dspy

from knapsack_dspy.docqa.data.gold_programs import (
    synthesise_finqa_program,
    synthesise_python_program,
)
from knapsack_dspy.docqa.data.program_style import as_literal_program
from knapsack_dspy.docqa.data.rendering import render_paragraphs, render_table
from knapsack_dspy.docqa.table_layout import render_layout, table_layout
from knapsack_dspy.modules.selectable_context import Pieces

__all__ = [
    "PARAGRAPH_MODES",
    "answer_demo",
    "as_mapping",
    "document_inputs",
    "gold_answer_text",
    "gold_paragraphs",
    "gold_reasoning",
    "gold_scale_text",
    "gold_statute_answer",
    "program_demo",
    "render_table_field",
    "render_text_field",
    "statute_demo",
    "statute_inputs",
    "statute_reasoning",
]

#: Which paragraphs a demo shows: all of its document's, or only the gold evidence (SEER's choice).
PARAGRAPH_MODES = ("all", "gold")


def as_mapping(source) -> Mapping:
    """A ``dspy.Example`` / ``dspy.Prediction`` / mapping as a read-only mapping of its fields."""
    if isinstance(source, Mapping):
        return source
    if hasattr(source, "toDict"):
        return source.toDict()
    if hasattr(source, "items"):
        return dict(source.items())
    raise TypeError(f"expected a dspy.Example or a mapping of fields, got {type(source).__name__}")


def _where(fields: Mapping) -> str:
    ident = fields.get("id")
    return f" (record {ident!r})" if ident else ""


def render_table_field(table, where: str = "", layout: bool = True) -> str:
    """Rows -> prompt text; a string is taken as already rendered; ``None`` -> ``""``. ``layout=True``: as
    :func:`knapsack_dspy.docqa.table_layout.render_layout` shows it (one label per column and row, units on their own
    line -- the labels the sandbox's look-ups accept); ``False``: every source row as written (``render_table``:
    the FinQA DSL names rows as the official data writes them)."""
    if table is None:
        return ""
    if isinstance(table, str):
        return table
    if not isinstance(table, Sequence):
        raise TypeError(f"table{where}: expected rows of cells or a rendered string, got {type(table).__name__}")
    if layout:
        return render_layout(table_layout(table))
    return render_table(table)


def render_text_field(paragraphs=None, text=None, where: str = "") -> str:
    """``text`` when given (already rendered), else ``render_paragraphs(paragraphs)``; ``""`` for neither."""
    if text is not None:
        if not isinstance(text, str):
            raise TypeError(f"text{where}: expected a string, got {type(text).__name__}")
        return text
    if paragraphs is None:
        return ""
    if isinstance(paragraphs, str):
        return paragraphs
    return render_paragraphs(list(paragraphs))


def gold_paragraphs(fields: Mapping) -> list[str]:
    """The paragraphs named by ``gold_evidence`` (``"text_<i>"``), in document order."""
    paragraphs = list(fields.get("paragraphs") or [])
    wanted = set()
    for item in fields.get("gold_evidence") or []:
        if isinstance(item, str) and item.startswith("text_") and item[5:].isdigit():
            wanted.add(int(item[5:]))
    return [p for i, p in enumerate(paragraphs) if i in wanted]


def document_inputs(source, paragraphs: str = "all", layout: bool = True) -> dict[str, str]:
    """``{"table", "text", "question"}`` as the table+text signatures take them.

    ``paragraphs="gold"`` keeps only the gold evidence paragraphs (for demos; a pre-rendered ``text``
    is used as it is). ``layout``: render the table as its layout (see :func:`render_table_field`).
    """
    if paragraphs not in PARAGRAPH_MODES:
        raise ValueError(f"paragraphs must be one of {PARAGRAPH_MODES}, got {paragraphs!r}")
    fields = as_mapping(source)
    where = _where(fields)
    question = fields.get("question")
    if not isinstance(question, str) or not question.strip():
        raise ValueError(f"question{where}: expected a non-empty string, got {question!r}")
    chosen = fields.get("paragraphs")
    if paragraphs == "gold" and fields.get("text") is None:
        chosen = gold_paragraphs(fields)
    return {"table": render_table_field(fields.get("table"), where, layout),
            "text": render_text_field(chosen, fields.get("text"), where),
            "question": question}


def statute_inputs(source) -> dict[str, Any]:
    """``{"statute", "facts", "question"}`` for ``AnswerStatuteQuestion``.

    ``statute``: a string or a list of section texts (joined by blank lines); missing -> ``""``; a
    ``knapsack_dspy.Pieces`` (``StatuteQA(evidence_selection="knapsack")``: the statute's subsections a selecting
    predictor cuts per call) as it is.
    ``facts``: ``facts``, else ``text``, else the rendered ``paragraphs`` (SARA keeps the facts there).
    """
    fields = as_mapping(source)
    where = _where(fields)
    question = fields.get("question")
    if not isinstance(question, str) or not question.strip():
        raise ValueError(f"question{where}: expected a non-empty string, got {question!r}")
    statute = fields.get("statute")
    if statute is None:
        statute = ""
    elif not isinstance(statute, (str, Pieces)):
        if not isinstance(statute, Sequence) or not all(isinstance(s, str) for s in statute):
            raise TypeError(f"statute{where}: expected a string or a list of strings, got {type(statute).__name__}")
        statute = "\n\n".join(statute)
    facts = fields.get("facts")
    if facts is None:
        facts = render_text_field(fields.get("paragraphs"), fields.get("text"), where)
    elif not isinstance(facts, str):
        raise TypeError(f"facts{where}: expected a string, got {type(facts).__name__}")
    return {"statute": statute, "facts": facts, "question": question}


# ----------------------------------------------------------------------------------------------------
# gold outputs

def _number_text(value: float) -> str:
    value = float(value)
    if value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return repr(round(value, 10))


def gold_answer_text(source) -> str:
    """The gold answer as the direct-answer signatures ask for it: digits for numbers, the span as written,
    a JSON list for several spans."""
    fields = as_mapping(source)
    answer, value = fields.get("answer"), fields.get("answer_value")
    answer_type = fields.get("answer_type") or ""
    if isinstance(answer, (list, tuple)):
        return json.dumps([str(a) for a in answer], ensure_ascii=False) if len(answer) != 1 else str(answer[0])
    if answer_type in ("arithmetic", "count") and isinstance(value, (int, float)) and math.isfinite(value):
        return _number_text(value)
    if isinstance(answer, bool):
        return str(answer)
    if isinstance(answer, float):
        return _number_text(answer)
    if answer is None:
        raise ValueError(f"answer{_where(fields)}: the record has no gold answer")
    return str(answer)


def gold_scale_text(source) -> str:
    """The gold scale as the signatures ask for it (``"none"`` for no scale)."""
    return as_mapping(source).get("scale") or "none"


def gold_reasoning(source) -> str | None:
    """A short reasoning for chain-of-thought demos, from the record's derivation / program (``None``
    when the record has nothing to reason from)."""
    fields = as_mapping(source)
    answer_type = fields.get("answer_type") or ""
    derivation = (fields.get("derivation") or "").strip()
    program = (fields.get("program") or "").strip()
    scale = fields.get("scale") or ""
    try:
        answer = gold_answer_text(fields)
    except ValueError:
        return None
    unit = "%" if scale == "percent" else (f" {scale}" if scale else "")
    if answer_type == "arithmetic" and derivation:
        return f"The answer is calculated as {derivation} = {answer}{unit}."
    if answer_type == "count" and derivation:
        items = [item.strip() for item in derivation.split("##") if item.strip()]
        return f"Counting the items: {'; '.join(items)}. That makes {answer}."
    if derivation:
        return f"Comparing {derivation}, the answer is {answer}."
    if program:
        return f"The answer is computed by the program {program}, which gives {answer}{unit}."
    modality = fields.get("modality") or ""
    where = {"table": "the table", "text": "the text", "hybrid": "the table and the text"}.get(modality)
    if where and answer_type in ("span", "multi-span"):
        return f"The answer is stated in {where}: {answer}."
    return None


def statute_reasoning(source) -> str | None:
    """A chain-of-thought demo's reasoning for a SARA entailment case, from the record alone (no LM): the rules
    its statement cites (``cited_rules``: ``<id> <heading>: "<text>"``, as ``StatuteQA`` adds them to a demo) and
    whether, applied to the facts, they bear the statement out (its gold label). Without it a labelled case shows
    DSPy's "Not supplied for this particular example" as its reasoning, which a small model copies. ``None`` for
    numerical cases and for statements that cite no rule the statutes hold."""
    fields = as_mapping(source)
    rules = [str(rule) for rule in fields.get("cited_rules") or () if rule]
    label = fields.get("answer")
    if not rules or label not in ("Entailment", "Contradiction"):
        return None
    quoted = "; ".join(f"section {rule}" for rule in rules)
    rule, gives, does_not_give = ("the rule", "gives", "does not give") if len(rules) == 1 else (
        "the rules", "give", "do not give")
    verdict = (f"{rule} {gives} what the statement says, so the statement is entailed" if label == "Entailment"
               else f"{rule} {does_not_give} what the statement says, so the statement is contradicted")
    return f"The statement applies {quoted}\nApplied to the facts, {verdict}."


def gold_statute_answer(source) -> str:
    """A SARA record's gold answer as ``AnswerStatuteQuestion`` asks for it: the label or ``$<dollars>``."""
    fields = as_mapping(source)
    answer, value = fields.get("answer"), fields.get("answer_value")
    if isinstance(answer, str) and answer in ("Entailment", "Contradiction"):
        return answer
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        return f"${round(value)}"
    if isinstance(answer, str) and answer.strip():
        return answer.strip()
    raise ValueError(f"answer{_where(fields)}: the record has no gold answer")


# ----------------------------------------------------------------------------------------------------
# demos per solver signature

def _example(fields: dict):
    return dspy.Example(**fields)


def answer_demo(source, *, reasoning: bool = False, paragraphs: str = "all"):
    """Demo for ``AnswerFromTableText``: document inputs, gold ``answer`` and ``scale`` (and ``reasoning``
    from the derivation when ``reasoning`` and the record has one)."""
    fields = as_mapping(source)
    demo = document_inputs(fields, paragraphs)
    demo.update(answer=gold_answer_text(fields), scale=gold_scale_text(fields))
    if reasoning:
        text = gold_reasoning(fields)
        if text:
            demo["reasoning"] = text
    return _example(demo)


def program_demo(source, *, language: str = "python", reasoning: bool = False, paragraphs: str = "all",
                 program_style: str = "literal", execute=None):
    """Demo for ``WritePythonProgram`` (a verified synthesised gold program, else the literal answer; with
    ``program_style="literal"`` its table look-ups written as the numbers they read, see
    ``knapsack_dspy.docqa.data.program_style``) or ``WriteFinqaProgram`` (the gold DSL program, or the converted
    TAT-QA derivation)."""
    fields = as_mapping(source)
    demo = document_inputs(fields, paragraphs, layout=language != "finqa")
    if fields.get("answer") in (None, "", []) and fields.get("answer_value") is None:
        raise ValueError(f"answer{_where(fields)}: the record has no gold answer to show in a demo")
    if language == "python":
        code = synthesise_python_program(fields, execute).code
        demo["program"] = as_literal_program(code, fields.get("table") or []) if program_style == "literal" else code
    elif language == "finqa":
        program = synthesise_finqa_program(fields, execute)
        if program is None:
            raise ValueError(f"record {fields.get('id')!r}: a FinQA DSL demo needs a FinQA program or a TAT-QA "
                             f"arithmetic derivation (this is a {fields.get('answer_type') or 'unlabelled'!s} "
                             "question); use language='python' for span and count questions")
        demo["program"] = program
    else:
        raise ValueError(f"language must be 'python' or 'finqa', got {language!r}")
    if reasoning:
        text = gold_reasoning(fields)
        if text:
            demo["reasoning"] = text
    return _example(demo)


def statute_demo(source, *, reasoning: bool = False, include_statute: bool = False):
    """Demo for ``AnswerStatuteQuestion``: facts, question and the gold label / amount. The statute is
    left out unless ``include_statute`` (sections are long; the query's prompt carries them)."""
    fields = as_mapping(source)
    demo = statute_inputs(fields)
    if not include_statute or not demo["statute"]:
        del demo["statute"]
    demo["answer"] = gold_statute_answer(fields)
    if reasoning:
        text = gold_reasoning(fields) or statute_reasoning(fields)
        if text:
            demo["reasoning"] = text
    return _example(demo)
