"""The uniform fields every loaded record gets, and their conversion to ``dspy.Example``.

Every example has all of :data:`FIELDS` (empty value when unknown) and inputs :data:`INPUT_FIELDS`.
``dspy`` is imported on first use only, so importing the data package stays cheap.
"""

from __future__ import annotations

__all__ = ["DOCUMENT_ATTRIBUTES", "FIELDS", "INPUT_FIELDS", "MODALITIES", "SCALES", "blank_fields", "make_example",
           "validate_fields"]

FIELDS = (
    "id", "doc_id", "dataset", "question", "table", "paragraphs", "answer", "answer_value", "scale",
    "program", "derivation", "modality", "answer_type", "num_steps", "operators", "program_template",
    "gold_evidence", "extra",
)
INPUT_FIELDS = ("question", "table", "paragraphs")
MODALITIES = ("table", "text", "hybrid")
#: The attributes a document-QA selection constrains unless told otherwise: SEER's modality.
DOCUMENT_ATTRIBUTES = ("modality",)
SCALES = ("", "thousand", "million", "billion", "percent")


def blank_fields(dataset: str) -> dict:
    """All uniform fields with their empty values."""
    return {
        "id": "", "doc_id": "", "dataset": dataset, "question": "", "table": [], "paragraphs": [],
        "answer": "", "answer_value": None, "scale": "", "program": "", "derivation": "", "modality": "",
        "answer_type": "", "num_steps": 0, "operators": [], "program_template": "", "gold_evidence": [],
        "extra": {},
    }


def _is_str_list(value) -> bool:
    return isinstance(value, list) and all(isinstance(item, str) for item in value)


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def validate_fields(fields) -> None:
    """Check that ``fields`` (a dict or ``dspy.Example``) has every uniform field with the documented type.

    Raises ``ValueError`` listing every problem. Used on each loaded record; also handy for examples
    built by hand.
    """
    keys = set(fields.keys())
    problems = []
    if keys != set(FIELDS):
        problems.append(f"unknown fields {sorted(keys - set(FIELDS))}, missing {sorted(set(FIELDS) - keys)}")
    get = fields.get
    checks = {
        "id": isinstance(get("id"), str) and bool(get("id")),
        "doc_id": isinstance(get("doc_id"), str),
        "dataset": isinstance(get("dataset"), str) and bool(get("dataset")),
        "question": isinstance(get("question"), str),
        "table": isinstance(get("table"), list) and all(_is_str_list(row) for row in get("table") or []),
        "paragraphs": _is_str_list(get("paragraphs")),
        "answer": isinstance(get("answer"), str) or _is_number(get("answer")) or _is_str_list(get("answer")),
        "answer_value": get("answer_value") is None or isinstance(get("answer_value"), float),
        "scale": get("scale") in SCALES,
        "program": isinstance(get("program"), str),
        "derivation": isinstance(get("derivation"), str),
        "modality": get("modality") in (*MODALITIES, ""),
        "answer_type": isinstance(get("answer_type"), str),
        "num_steps": isinstance(get("num_steps"), int) and not isinstance(get("num_steps"), bool)
        and get("num_steps") == len(get("operators") or []),
        "operators": _is_str_list(get("operators")),
        "program_template": isinstance(get("program_template"), str),
        "gold_evidence": _is_str_list(get("gold_evidence")),
        "extra": isinstance(get("extra"), dict),
    }
    problems += [f"{name}={get(name)!r:.80}" for name, ok in checks.items() if name in keys and not ok]
    if problems:
        raise ValueError("invalid uniform fields: " + "; ".join(problems))


def make_example(fields: dict):
    """A ``dspy.Example`` holding exactly :data:`FIELDS`, with inputs question / table / paragraphs."""
    import dspy  # the data layer imports without DSPy: only building an Example needs it

    validate_fields(fields)
    return dspy.Example(**{name: fields[name] for name in FIELDS}).with_inputs(*INPUT_FIELDS)
