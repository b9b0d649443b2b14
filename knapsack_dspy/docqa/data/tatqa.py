"""TAT-QA records (official schema) -> uniform example fields, one per question.

A record is a context: ``table`` (``uid``, ``table`` rows), ``paragraphs`` (``uid``, ``order``, ``text``)
and ``questions`` (``uid``, ``order``, ``question``, ``answer``, ``derivation``, ``answer_type``,
``answer_from``, ``rel_paragraphs``, ``req_comparison``, ``scale``). ``rel_paragraphs`` holds paragraph
``order`` values (1-based, written as strings); they become 0-based positions ``"text_<i>"`` in the
paragraphs sorted by ``order``.

Questions without any gold field (as in the official test file) load with empty gold values.
"""

from __future__ import annotations

from collections.abc import Mapping

from knapsack_dspy.docqa.data.errors import DataError
from knapsack_dspy.docqa.data.example_fields import SCALES, blank_fields
from knapsack_dspy.docqa.data.record_fields import (
    get_field,
    get_id,
    get_str,
    get_table,
    leftovers,
    require_mapping,
    type_name,
)
from knapsack_dspy.docqa.data.tatqa_derivation import parse_derivation
from knapsack_dspy.docqa.number_text import parse_number

__all__ = ["ANSWER_TYPES", "MODALITY_OF_ANSWER_FROM", "parse_tatqa_record", "read_gold_answer", "record_size"]

ANSWER_TYPES = ("span", "multi-span", "arithmetic", "count")
MODALITY_OF_ANSWER_FROM = {"table": "table", "text": "text", "table-text": "hybrid"}
GOLD_KEYS = ("answer", "answer_type", "answer_from", "scale", "derivation", "rel_paragraphs")
_QUESTION_KEYS = frozenset({"uid", "question", *GOLD_KEYS})


def record_size(record) -> int:
    """Questions in a context (what skipping the whole record loses); 1 when unknowable."""
    if isinstance(record, Mapping) and isinstance(record.get("questions"), list):
        return max(len(record["questions"]), 1)
    return 1


def _paragraphs(context: Mapping) -> tuple[list[str], dict[int, int]]:
    """Paragraph texts sorted by ``order`` and the map order -> 0-based position."""
    raw = get_field(context, "paragraphs", "paragraphs", default=[])
    if not isinstance(raw, list):
        raise DataError(f"expected a list of paragraphs, got {type_name(raw)}", field="paragraphs")
    items = []
    for i, paragraph in enumerate(raw):
        path = f"paragraphs[{i}]"
        require_mapping(paragraph, path)
        text = get_str(paragraph, "text", f"{path}.text", allow_empty=True)
        order = get_field(paragraph, "order", f"{path}.order")
        if isinstance(order, str) and order.strip().isdigit():
            order = int(order)
        if isinstance(order, bool) or not isinstance(order, int):
            raise DataError(f"expected an integer order, got {order!r}", field=f"{path}.order")
        items.append((order, i, text))
    items.sort()
    positions: dict[int, int] = {}
    for position, (order, i, _) in enumerate(items):
        if order in positions:
            raise DataError(f"duplicate paragraph order {order}", field=f"paragraphs[{i}].order")
        positions[order] = position
    return [text for _, _, text in items], positions


def read_gold_answer(question: Mapping, answer_type: str, path: str):
    """(answer, answer_value) of a question's gold ``answer``, normalised per answer type; ``DataError``
    naming ``<path>.answer`` when it does not fit the type. (The TAT-QA scorer checks gold files with it.)"""
    answer = question.get("answer")
    if answer_type == "span":
        if isinstance(answer, list):
            if len(answer) != 1 or not isinstance(answer[0], (str, int, float)):
                raise DataError(f"a span answer must be one string, got {answer!r}", field=f"{path}.answer")
            answer = answer[0] if isinstance(answer[0], str) else str(answer[0])
        if not isinstance(answer, str):
            raise DataError(f"expected a string span, got {type_name(answer)}", field=f"{path}.answer")
        return answer, parse_number(answer)
    if answer_type == "multi-span":
        if not isinstance(answer, list) or not answer:
            raise DataError(f"expected a non-empty list of spans, got {type_name(answer)}",
                            field=f"{path}.answer")
        spans = []
        for i, span in enumerate(answer):
            if isinstance(span, (int, float)) and not isinstance(span, bool):
                span = str(span)
            if not isinstance(span, str):
                raise DataError(f"span {i}: expected a string, got {type_name(span)}", field=f"{path}.answer")
            spans.append(span)
        return spans, None
    # arithmetic: a number as in the file; count: the file writes a string ("3"), kept (and made) a string
    if isinstance(answer, list) and len(answer) == 1:
        answer = answer[0]
    value = parse_number(answer)
    if value is None:
        raise DataError(f"expected a number for a {answer_type} answer, got {answer!r}", field=f"{path}.answer")
    if answer_type == "count" and not isinstance(answer, str):
        answer = f"{value:g}"  # some readers (Arrow) turn "3" into 3
    return answer, value


def _question_fields(question: Mapping, j: int, context: dict, positions: dict[int, int]) -> dict:
    path = f"questions[{j}]"
    require_mapping(question, path)
    fields = blank_fields("tatqa")  # fresh lists per question: examples never share mutable values
    fields.update(doc_id=context["doc_id"], table=[list(row) for row in context["table"]],
                  paragraphs=list(context["paragraphs"]))
    fields["id"] = get_id(question, "uid", f"{path}.uid")
    fields["question"] = get_str(question, "question", f"{path}.question")
    fields["extra"] = leftovers(question, _QUESTION_KEYS)
    if all(question.get(key) is None for key in GOLD_KEYS):
        return fields  # unlabelled (test-style) question
    answer_type = get_str(question, "answer_type", f"{path}.answer_type")
    if answer_type not in ANSWER_TYPES:
        raise DataError(f"expected one of {list(ANSWER_TYPES)}, got {answer_type!r}", field=f"{path}.answer_type")
    answer_from = get_str(question, "answer_from", f"{path}.answer_from")
    if answer_from not in MODALITY_OF_ANSWER_FROM:
        raise DataError(f"expected one of {list(MODALITY_OF_ANSWER_FROM)}, got {answer_from!r}",
                        field=f"{path}.answer_from")
    scale = get_str(question, "scale", f"{path}.scale", allow_empty=True)
    if scale not in SCALES:
        raise DataError(f"expected one of {list(SCALES)}, got {scale!r}", field=f"{path}.scale")
    derivation = get_str(question, "derivation", f"{path}.derivation", allow_empty=True)
    rel = get_field(question, "rel_paragraphs", f"{path}.rel_paragraphs")
    if not isinstance(rel, list):
        raise DataError(f"expected a list of paragraph orders, got {type_name(rel)}",
                        field=f"{path}.rel_paragraphs")
    evidence = []
    for item in rel:
        order = int(item) if isinstance(item, str) and item.strip().isdigit() else item
        if isinstance(order, bool) or not isinstance(order, int) or order not in positions:
            raise DataError(f"{item!r} is not the order of a paragraph of this context "
                            f"(orders {sorted(positions)})", field=f"{path}.rel_paragraphs")
        evidence.append(f"text_{positions[order]}")
    if answer_from in ("table", "table-text"):
        evidence.append("table")
    fields["answer"], fields["answer_value"] = read_gold_answer(question, answer_type, path)
    fields.update(answer_type=answer_type, modality=MODALITY_OF_ANSWER_FROM[answer_from], scale=scale,
                  derivation=derivation.strip(), gold_evidence=evidence)
    if answer_type == "arithmetic" and derivation.strip():
        try:
            parsed = parse_derivation(derivation)
        except ValueError as exc:
            fields["extra"]["derivation_error"] = str(exc)
        else:
            fields.update(operators=list(parsed.operators), num_steps=parsed.num_steps,
                          program_template=parsed.template)
    return fields


def parse_tatqa_record(context) -> list:
    """One context -> a list with, per question, its fields (dict) or the ``DataError`` that rejects it.

    Raises ``DataError`` when the context itself is bad (then all its questions are lost).
    """
    require_mapping(context, None, "a TAT-QA context object")
    table = require_mapping(get_field(context, "table", "table"), "table")
    doc_id = get_id(table, "uid", "table.uid")
    try:
        rows = get_table(table.get("table"), "table.table", required=True)
        paragraphs, positions = _paragraphs(context)
        questions = get_field(context, "questions", "questions")
        if not isinstance(questions, list):
            raise DataError(f"expected a list of questions, got {type_name(questions)}", field="questions")
    except DataError as error:
        raise error.located(record_id=doc_id) from None  # the context's id is its table uid
    base = {"doc_id": doc_id, "table": rows, "paragraphs": paragraphs}
    out: list = []
    for j, question in enumerate(questions):
        try:
            out.append(_question_fields(question, j, base, positions))
        except DataError as error:
            qid = question.get("uid") if isinstance(question, Mapping) else None
            out.append(error.located(record_id=str(qid) if qid is not None else doc_id))
    return out
