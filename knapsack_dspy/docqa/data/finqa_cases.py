"""FinQA question/program rows (the SEER metadata CSVs in ``finqa/``) -> uniform example fields.

These rows have no documents: ``table`` and ``paragraphs`` are empty. Columns used: ``index`` (position in
the official split), ``question``, ``answer`` (executed answer), ``program``, ``program_template`` and the
modality flags ``table_only`` / ``text_only`` / ``hybrid`` (when none is set, SEER's ``modality`` column:
0 table, 1 text, 2 hybrid; kept in ``extra`` as ``seer_modality``). Other columns go to ``extra``
(integers converted; pandas' ``Unnamed: *`` index columns dropped). ``id`` and ``doc_id`` are ``finqa-<split>-<index>``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from knapsack_dspy.docqa.data.errors import DataError
from knapsack_dspy.docqa.data.example_fields import MODALITIES, blank_fields
from knapsack_dspy.docqa.data.finqa import finqa_answer, program_fields
from knapsack_dspy.docqa.data.record_fields import get_field, get_id, get_str, require_mapping

__all__ = ["case_id", "parse_finqa_case"]

_FLAGS = (("table_only", "table"), ("text_only", "text"), ("hybrid", "hybrid"))
_CONSUMED = frozenset({"index", "question", "answer", "program", "program_template", "table_only",
                       "text_only", "hybrid"})
_RENAMED = {"modality": "seer_modality"}  # SEER's 0/1/2 code; not to be confused with the uniform field
_INT = re.compile(r"^-?\d+$")


def case_id(split: str | None, index: str) -> str:
    return f"finqa-{split}-{index}" if split else f"finqa-{index}"


def _flag(row: Mapping, column: str) -> bool:
    value = str(row.get(column) or "").strip()
    if value not in ("", "0", "1", "0.0", "1.0", "True", "False"):
        raise DataError(f"expected a 0/1 flag, got {value!r}", field=column)
    return value in ("1", "1.0", "True")


def _modality(row: Mapping) -> str:
    set_flags = [name for column, name in _FLAGS if _flag(row, column)]
    if len(set_flags) > 1:
        raise DataError(f"several modality flags set: {set_flags}", field="table_only/text_only/hybrid")
    if set_flags:
        return set_flags[0]
    code = str(row.get("modality") or "").strip()
    if code in ("0", "1", "2"):
        return MODALITIES[int(code)]
    return ""


def parse_finqa_case(row, split: str | None = None) -> list:
    """One CSV row (a dict of strings) -> ``[fields]``; raises ``DataError`` naming the column."""
    require_mapping(row, None, "a CSV row")
    index = get_id(row, "index", "index")
    record_id = case_id(split, index)
    try:
        fields = blank_fields("finqa_cases")
        fields.update(id=record_id, doc_id=record_id, question=get_str(row, "question", "question"),
                      program=get_str(row, "program", "program").strip())
        fields.update(program_fields(fields["program"], "program"))
        answer = get_field(row, "answer", "answer")
        fields["answer"], fields["answer_value"], fields["answer_type"] = finqa_answer(answer, "answer")
        if fields["operators"][-1] == "greater":
            fields["answer_type"] = "yes-no"
        template = str(row.get("program_template") or "").strip()
        if template:
            fields["program_template"] = template
        fields["modality"] = _modality(row)
        extra = {}
        for key, value in row.items():
            if key in _CONSUMED or key is None or str(key).startswith("Unnamed:") or not str(key).strip():
                continue
            is_int = isinstance(value, str) and _INT.match(value.strip())
            extra[_RENAMED.get(key, key)] = int(value) if is_int else value
        extra["index"] = int(index) if _INT.match(index) else index
        fields["extra"] = extra
    except DataError as error:
        raise error.located(record_id=record_id) from None
    return [fields]
