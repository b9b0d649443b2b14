"""What the document-QA pools are labelled with, declared to the selection engine.

The engine knows no attribute by name (``selection.attribute_domains``); this module declares the two SEER uses:

- ``modality``: which part of the document a question needs -- table / text / hybrid, in that order; a predicted
  "hybrid" is uncertain (SEER's template then asks for ``beta * M`` exemplars of each modality); an LM asks for it
  with ``PredictModality``;
- ``answer_type``: span / multi-span / arithmetic / count (TAT-QA's); an LM asks with ``PredictAnswerType``;

and gives the pipelines' pool labels (:func:`pool_attribute_functions`): both of those, an exemplar's ``kind`` --
its solution pattern for ``case_coverage`` (the program's template, ``subtract(X_0,X_1),divide(#0,X_1)``, else
``answer_type:<its answer type>``, else none) -- and its ``solution`` (the gold program or derivation: the
selection-quality proxies compare it with a query's).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from knapsack_dspy.docqa.data.example_fields import MODALITIES
from knapsack_dspy.docqa.data.rendering import render_table
from knapsack_dspy.docqa.data.tatqa import ANSWER_TYPES
from knapsack_dspy.docqa.signatures.predict_answer_type import PredictAnswerType
from knapsack_dspy.docqa.signatures.predict_modality import PredictModality
from knapsack_dspy.selection.attribute_domains import declare_attribute

__all__ = ["attribute_inputs", "pool_attribute_functions", "solution_kind"]

TEXT_CHARS = 400


def attribute_inputs(fields: Mapping) -> dict:
    """An LM attribute predictor's inputs: the question, the table's header row and the start of the text."""
    table = fields.get("table") or []
    paragraphs = fields.get("paragraphs") or []
    header = render_table(table[:1]) if isinstance(table, list) and table else str(table or "")[:200]
    text = " ".join(paragraphs) if isinstance(paragraphs, list) else str(paragraphs or "")
    return {"question": str(fields.get("question", "")), "table": header, "text": text[:TEXT_CHARS]}


declare_attribute("modality", values=MODALITIES, uncertain=("hybrid",), signature=PredictModality,
                  inputs=attribute_inputs)
declare_attribute("answer_type", values=ANSWER_TYPES, signature=PredictAnswerType, inputs=attribute_inputs)


def solution_kind(example) -> str:
    """An exemplar's kind for ``case_coverage``: its program template, else ``answer_type:<type>``, else ``""``."""
    template = str(example.get("program_template") or "")
    if template:
        return template
    answer_type = str(example.get("answer_type") or "")
    return f"answer_type:{answer_type}" if answer_type else ""


def solution(example) -> str:
    """An exemplar's worked solution: its gold program, else its derivation."""
    return str(example.get("program") or example.get("derivation") or "")


def pool_attribute_functions() -> dict[str, Callable]:
    """The labels of a document-QA pool's exemplars (``compile_hooks.PoolAttributesFor``)."""
    return {"modality": lambda ex: ex.get("modality"), "answer_type": lambda ex: ex.get("answer_type"),
            "kind": solution_kind, "solution": solution}
