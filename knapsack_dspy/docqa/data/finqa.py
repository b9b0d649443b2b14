"""FinQA records (official JSON schema) -> uniform example fields.

A record: ``id`` (``"ADI/2009/page_49.pdf-1"``), ``pre_text`` / ``post_text`` (lists of sentences),
``table`` (rows of cell strings, header first), ``qa`` with ``question``, ``program`` (DSL), ``exe_ans``
(float or ``"yes"`` / ``"no"``) and ``gold_inds`` (``{"table_1": "...", "text_3": "..."}``; text indices
count over ``pre_text + post_text``, table indices over the rows). Other keys (``filename``, ``table_ori``,
``qa.steps``, ``qa.program_re``, ``qa.ann_table_rows``, ...) go to ``extra``. A flattened record (the
``qa`` keys at top level, as some hub copies have) is read the same way.

``doc_id`` is the source page (``filename`` if present, else the id without its ``-<n>`` question
suffix), so questions about the same page share it. ``qa`` without ``program`` and ``exe_ans`` (a
test-style record) loads with empty gold values. A labelled record without ``gold_inds`` gets the evidence its
gold program reads (``knapsack_dspy.docqa.data.program_evidence``) in ``extra["program_evidence"]`` and the
``modality`` of that evidence (``gold_evidence`` stays empty: it is not gold).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from knapsack_dspy.docqa.data.errors import DataError
from knapsack_dspy.docqa.data.example_fields import blank_fields
from knapsack_dspy.docqa.data.program_evidence import program_evidence
from knapsack_dspy.docqa.data.program_template import program_template
from knapsack_dspy.docqa.data.record_fields import (
    get_field,
    get_id,
    get_str,
    get_str_list,
    get_table,
    leftovers,
    require_mapping,
    type_name,
)
from knapsack_dspy.docqa.number_text import parse_number
from knapsack_dspy.docqa.sandbox.finqa_dsl import ProgramError, parse_program

__all__ = ["YES_NO", "finqa_answer", "modality_of_evidence", "parse_finqa_record", "program_fields"]

YES_NO = ("yes", "no")
_EVIDENCE_KEY = re.compile(r"^(table|text)_(\d+)$")
_TOP_KEYS = frozenset({"id", "pre_text", "post_text", "table", "qa"})
_QA_KEYS = frozenset({"question", "program", "exe_ans", "gold_inds"})


def finqa_answer(value, path: str):
    """(answer, answer_value, answer_type) from an executed answer: a float, or ``"yes"`` / ``"no"``."""
    if isinstance(value, str) and value.strip().lower() in YES_NO:
        return value.strip().lower(), None, "yes-no"
    number = parse_number(value)
    if number is None:
        raise DataError(f"expected a number or 'yes'/'no', got {value!r}", field=path)
    return number, number, "arithmetic"


def program_fields(program: str, path: str) -> dict:
    """operators / num_steps / program_template of a FinQA program; a bad program raises naming ``path``."""
    try:
        steps = parse_program(program)
    except ProgramError as exc:
        raise DataError(f"invalid FinQA program {program!r}: {exc}", field=path) from None
    return {"operators": [s.op for s in steps], "num_steps": len(steps),
            "program_template": program_template(steps)}


def modality_of_evidence(keys) -> str:
    """``table`` / ``text`` / ``hybrid`` from gold evidence keys; no evidence -> ``hybrid`` (as SEER does)."""
    kinds = {_EVIDENCE_KEY.match(k).group(1) for k in keys}
    return kinds.pop() if len(kinds) == 1 else "hybrid"


def _doc_id(record: Mapping, record_id: str) -> str:
    filename = record.get("filename")
    if isinstance(filename, str) and filename.strip():
        return filename.strip()
    return re.sub(r"-\d+$", "", record_id)


def parse_finqa_record(record) -> list:
    """One FinQA record -> ``[fields]``; raises ``DataError`` naming the field when the record is bad."""
    require_mapping(record, None, "a FinQA record object")
    record_id = get_id(record, "id", "id")
    try:
        return [_fields(record, record_id)]
    except DataError as error:
        raise error.located(record_id=record_id) from None


def _fields(record: Mapping, record_id: str) -> dict:
    if "qa" in record or "question" not in record:
        qa, prefix = require_mapping(get_field(record, "qa", "qa"), "qa"), "qa."
    else:
        qa, prefix = record, ""  # flattened
    fields = blank_fields("finqa")
    pre = get_str_list(record, "pre_text", "pre_text")
    post = get_str_list(record, "post_text", "post_text")
    fields.update(id=record_id, doc_id=_doc_id(record, record_id), paragraphs=pre + post,
                  table=get_table(record.get("table"), "table", required=True),
                  question=get_str(qa, "question", prefix + "question"))
    extra = leftovers(record, _TOP_KEYS | (_QA_KEYS if not prefix else frozenset()))
    if prefix:
        for key, value in leftovers(qa, _QA_KEYS).items():
            extra[key if key not in extra else prefix + key] = value
    fields["extra"] = extra
    if qa.get("program") is None and qa.get("exe_ans") is None:
        return fields  # unlabelled (test-style) record
    fields["program"] = get_str(qa, "program", prefix + "program").strip()
    fields.update(program_fields(fields["program"], prefix + "program"))
    fields["answer"], fields["answer_value"], fields["answer_type"] = finqa_answer(
        get_field(qa, "exe_ans", prefix + "exe_ans"), prefix + "exe_ans")
    if fields["operators"] and fields["operators"][-1] == "greater":
        fields["answer_type"] = "yes-no"
    gold = qa.get("gold_inds")
    if gold is None:
        found = program_evidence(fields["program"], fields["table"], fields["paragraphs"])
        extra["program_evidence"] = found
        fields["modality"] = modality_of_evidence(found) if found else ""
    else:
        if not isinstance(gold, Mapping):
            raise DataError(f"expected an object of evidence ids, got {type_name(gold)}",
                            field=prefix + "gold_inds")
        for key in gold:
            match = _EVIDENCE_KEY.match(str(key))
            size = len(fields["table"]) if match and match.group(1) == "table" else len(fields["paragraphs"])
            if not match or int(match.group(2)) >= size:
                raise DataError(f"{key!r} is not 'table_<row>' or 'text_<sentence>' within this record "
                                f"({len(fields['table'])} rows, {len(fields['paragraphs'])} sentences)",
                                field=prefix + "gold_inds")
        fields["gold_evidence"] = [str(k) for k in gold]
        fields["modality"] = modality_of_evidence(fields["gold_evidence"])
        extra["gold_inds"] = dict(gold)
    return fields
