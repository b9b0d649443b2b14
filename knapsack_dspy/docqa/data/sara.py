"""SARA cases (``sara/cases_<split>.json.gz``) -> uniform example fields.

A case: ``id`` (``s152_c_1_B_neg``, ``tax_case_12``), ``text`` (facts), ``question`` (a hypothesis for
entailment cases, a question for numerical ones), ``type`` (``entailment`` | ``numerical``) and either
``label`` (``Entailment`` | ``Contradiction``) or ``answer`` (``"$15037"``) with ``answer_value`` (dollars).
The facts are the single paragraph; there is no table. ``extra`` keeps ``type`` and the other leftovers,
plus, for entailment case ids, the tested ``statute`` (``"152(c)(1)(B)"``), its ``section`` (``"152"``)
and the case ``polarity`` (``pos`` / ``neg``).

``doc_id`` is the case's **group** (``case_group``): the ``_pos`` / ``_neg`` twins of a subsection
(``s152_c_1_B_pos`` / ``s152_c_1_B_neg``: near-identical facts, the opposite label) share the id without the
polarity suffix, ``s152_c_1_B``; a numerical case (``tax_case_12``) is a group of its own. Selection never picks an
exemplar of the query's own document (``SelectionConfig.exclude_same_doc``), so a case's twin is never its demo
(leave one group out), and the bench's bootstrap by document resamples twins together. The train split: 256 cases
in 168 groups (88 twin pairs, 80 numerical cases).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from knapsack_dspy.docqa.data.errors import DataError
from knapsack_dspy.docqa.data.example_fields import blank_fields
from knapsack_dspy.docqa.data.record_fields import get_field, get_id, get_str, leftovers, require_mapping, type_name
from knapsack_dspy.docqa.number_text import parse_number

__all__ = ["CASE_TYPES", "LABELS", "case_group", "parse_sara_case", "read_gold_amount", "statute_of_case_id"]

CASE_TYPES = ("entailment", "numerical")
LABELS = ("Entailment", "Contradiction")
_CASE_ID = re.compile(r"^s(?P<section>\d+[A-Za-z]?)(?P<labels>(?:_[A-Za-z0-9]+)*)_(?P<polarity>pos|neg)$")
_CONSUMED = frozenset({"id", "text", "question", "label", "answer", "answer_value"})


def statute_of_case_id(case_id: str) -> dict:
    """``"s152_c_1_B_neg"`` -> ``{"statute": "152(c)(1)(B)", "section": "152", "polarity": "neg"}``; ``{}``
    for ids that do not name a statute (``tax_case_3``)."""
    match = _CASE_ID.match(case_id)
    if not match:
        return {}
    labels = [label for label in match.group("labels").split("_") if label]
    section = match.group("section")
    return {"statute": section + "".join(f"({label})" for label in labels), "section": section,
            "polarity": match.group("polarity")}


def case_group(case_id: str) -> str:
    """The group of a case: ``"s152_c_1_B_neg"`` and ``"s152_c_1_B_pos"`` -> ``"s152_c_1_B"`` (the twins of one
    subsection); any other id (``"tax_case_12"``) is its own group."""
    return case_id[: -len("_pos")] if _CASE_ID.match(case_id) else case_id


def read_gold_amount(record: Mapping) -> tuple[str, float]:
    """(answer text, dollars) of a numerical case: ``answer`` is a dollar amount (``"$15037"``; a number is
    written as one) and ``answer_value``, when present, the same amount (it wins for the value, as it holds
    no rounding). ``DataError`` naming the field otherwise. (The SARA scorer checks gold files with it.)"""
    answer = get_field(record, "answer", "answer")
    if isinstance(answer, (int, float)) and not isinstance(answer, bool):
        answer = f"${answer:g}" if float(answer).is_integer() else f"${answer}"
    if not isinstance(answer, str):
        raise DataError(f"expected a dollar string, got {type_name(answer)}", field="answer")
    number = parse_number(answer)
    if number is None:
        raise DataError(f"no dollar amount in {answer!r}", field="answer")
    value = record.get("answer_value")
    if value is not None:
        stated = parse_number(value)
        if stated is None:
            raise DataError(f"no dollar amount in {value!r}", field="answer_value")
        if abs(stated - number) >= 0.5:
            raise DataError(f"{value!r} is not the answer {answer!r}", field="answer_value")
        number = stated
    return answer, number


def parse_sara_case(record) -> list:
    """One SARA case -> ``[fields]``; raises ``DataError`` naming the field when the case is bad."""
    require_mapping(record, None, "a SARA case object")
    case_id = get_id(record, "id", "id")
    try:
        fields = blank_fields("sara")
        case_type = get_str(record, "type", "type")
        if case_type not in CASE_TYPES:
            raise DataError(f"expected one of {list(CASE_TYPES)}, got {case_type!r}", field="type")
        fields.update(id=case_id, doc_id=case_group(case_id), question=get_str(record, "question", "question"),
                      paragraphs=[get_str(record, "text", "text")], modality="text", answer_type=case_type)
        if case_type == "entailment":
            label = get_str(record, "label", "label")
            if label not in LABELS:
                raise DataError(f"expected one of {list(LABELS)}, got {label!r}", field="label")
            fields["answer"] = label
        else:
            fields["answer"], fields["answer_value"] = read_gold_amount(record)
        fields["extra"] = {**leftovers(record, _CONSUMED), **statute_of_case_id(case_id)}
    except DataError as error:
        raise error.located(record_id=case_id) from None
    return [fields]
