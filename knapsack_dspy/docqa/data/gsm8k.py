"""GSM8K (Cobbe et al., 2021): grade-school math word problems with worked solutions.

A record is ``{"question", "answer"}``; the answer is the worked solution, one step a line, with calculator
annotations (``48/2 = <<48/2=24>>24``), then ``#### <final answer>``. Each record becomes one example:

- ``question``: the problem; ``answer``: the final answer as written after ``####`` with its thousands commas
  removed (``"1080"``), ``answer_value`` its number;
- ``derivation``: the worked solution as a demo's reasoning shows it: the ``####`` line dropped and every
  calculator annotation removed (``48/2 = <<48/2=24>>24`` reads ``48/2 = 24``; an annotation that the text does
  not already state, ``$<<12/60=0.2>>0.2``, reads ``$0.2``: the text around it always holds the result);
- ``operators``: the operations of the annotations in order (``add``, ``subtract``, ``multiply``, ``divide``;
  one per operator sign), ``num_steps`` their number; ``extra.solution``: the raw worked solution;
- ``id``: ``gsm8k-`` and the first 12 hex digits of the sha256 of the question (the file has no ids; no two
  records ask the same question); ``doc_id``: ``q-`` and the first 16 hex digits of the sha256 of the question
  *normalised* (case-folded, runs of whitespace as one space): each question is its own document.

**Pool and tuning parts** (``pool`` / ``tune``, cut from ``train.jsonl.gz``): as every split of this package cut
from one file (``document_parts``), a question goes to ``tune`` when ``int(sha256(doc_id), 16) % 100 < 30``,
else to ``pool``. ``doc_id`` is a function of the normalised question, so a question is in one part only, and two
records asking it (up to case and spacing) would be in the same part. 2,195 tuning and 5,278 pool questions.
"""

from __future__ import annotations

import hashlib
import re

from knapsack_dspy.docqa.data.errors import DataError
from knapsack_dspy.docqa.data.example_fields import blank_fields

__all__ = ["OPERATORS", "final_answer", "normalised_question", "parse_gsm8k_record", "readable_solution",
           "solution_operators"]

#: An annotation's operator sign -> its name (``solution_operators``).
OPERATORS = {"+": "add", "-": "subtract", "*": "multiply", "/": "divide"}
_ANNOTATION = re.compile(r"<<([^<>]*)>>")
_FINAL = re.compile(r"\n?####\s*(.*)\s*$", re.S)
_NUMBER = re.compile(r"(-?(?:\d[\d,]*)?\.?\d+)")
_OPERATOR_SIGN = re.compile(r"(?<=[\d.)%\s])([-+*/])(?=\s*-?[\d.(])")


def normalised_question(question: str) -> str:
    """The question as compared for the split and for duplicates: case-folded, whitespace runs as one space."""
    return " ".join(str(question).casefold().split())


def final_answer(solution: str) -> str:
    """The final answer after ``####`` (commas removed); ``DataError`` when there is none."""
    found = _FINAL.search(solution)
    if not found or not found.group(1).strip():
        raise DataError("the worked solution has no '#### <answer>' line", field="answer")
    return found.group(1).strip().replace(",", "")


def _replace_annotation(match: re.Match, text: str) -> str:
    """An annotation as the readable solution shows it: nothing when the text right after it states its result
    (``<<48/2=24>>24``, ``<<22500*20=450000>>450,000``); else ``lhs = result`` (a calculation the text does not
    spell out)."""
    body = match.group(1)
    lhs, _, result = body.partition("=")
    stated = _NUMBER.match(text, match.end())
    if result and stated and _same_number(stated.group(1), result):
        return ""
    return f"{lhs} = {result}" if result else body


def _same_number(written: str, result: str) -> bool:
    """Whether the number the text writes (``22,500``, ``.5``) is the annotation's result (``22500``, ``0.5``)."""
    try:
        return float(written.replace(",", "")) == float(result.strip().replace(",", ""))
    except ValueError:
        return written.strip() == result.strip()


def readable_solution(solution: str) -> str:
    """The worked solution without its ``####`` line and with its calculator annotations removed (module
    docstring): the reasoning a demo shows."""
    body = _FINAL.sub("", solution)
    out, last = [], 0
    for match in _ANNOTATION.finditer(body):
        out.append(body[last:match.start()])
        out.append(_replace_annotation(match, body))
        last = match.end()
    out.append(body[last:])
    lines = [" ".join(line.split()) for line in "".join(out).splitlines()]
    return "\n".join(line for line in lines if line)


def solution_operators(solution: str) -> list[str]:
    """The operations of the calculator annotations, in order (``["divide", "add"]`` for ``<<48/2=24>>`` then
    ``<<48+24=72>>``); a leading minus sign (a negative number) is not an operation."""
    found = []
    for body in _ANNOTATION.findall(solution):
        lhs = body.partition("=")[0]
        found += [OPERATORS[sign] for sign in _OPERATOR_SIGN.findall(lhs)]
    return found


def _digest(text: str, digits: int) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:digits]


def parse_gsm8k_record(record, split: str | None = None) -> list[dict]:
    """One line of ``gsm8k/train.jsonl.gz`` -> the uniform fields (module docstring)."""
    if not isinstance(record, dict):
        raise DataError(f"a GSM8K record is a JSON object, got {type(record).__name__}")
    question, solution = record.get("question"), record.get("answer")
    if not isinstance(question, str) or not question.strip():
        raise DataError("no question", field="question")
    if not isinstance(solution, str) or not solution.strip():
        raise DataError("no worked solution", field="answer")
    answer = final_answer(solution)
    try:
        value = float(answer)
    except ValueError:
        raise DataError(f"the final answer {answer!r} is not a number", field="answer") from None
    operators = solution_operators(solution)
    fields = blank_fields("gsm8k")
    fields.update(id=f"gsm8k-{_digest(question, 12)}", doc_id=f"q-{_digest(normalised_question(question), 16)}",
                  question=question.strip(), answer=answer, answer_value=value,
                  derivation=readable_solution(solution), answer_type="number", operators=operators,
                  num_steps=len(operators), extra={"solution": solution})
    return [fields]
