"""The names of the ready-made pipelines and their routes (no DSPy: the task registry and ``kdspy`` read them without
loading a program)."""

from __future__ import annotations

__all__ = ["AUTO_ROUTE", "DOCUMENT_PIPELINES", "PROGRAM_PIPELINES", "ROUTINGS", "STATUTE_PIPELINES", "is_program_spec"]

DOCUMENT_PIPELINES = ("pot", "python_pot", "finqa_pot", "cot", "few_shot", "zero_shot")
PROGRAM_PIPELINES = ("pot", "python_pot", "finqa_pot")  # the LM writes a program that is executed
#: How a DocumentQA answers: one solver (None), or routed by answer type between extraction and a program.
ROUTINGS = (None, "extract_compute")
#: ``build_pipeline(route=AUTO_ROUTE)`` (its default), a suite's and ``kdspy compile``'s: the task's default route
#: (``docqa.tasks``: TAT-QA's program pipeline routed by answer type, no route elsewhere).
AUTO_ROUTE = "auto"
STATUTE_PIPELINES = ("zero_shot", "few_shot", "cot")


def is_program_spec(text) -> bool:
    """Whether ``text`` names a plain DSPy program (``kind:argument``, ``docqa/pipelines/program_qa.py``) rather
    than a task's pipeline."""
    return isinstance(text, str) and ":" in text
