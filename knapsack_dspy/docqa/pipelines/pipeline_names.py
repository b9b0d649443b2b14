"""The names of the ready-made pipelines and their routes (no DSPy: the task registry and ``kdspy`` read them without
loading a program)."""

from __future__ import annotations

__all__ = ["AUTO_DEMO_CUT", "AUTO_ROUTE", "COMPUTE_ROUTE", "DEMO_CUT_SETTINGS", "DOCUMENT_PIPELINES", "EXTRACT_ROUTE",
           "PROGRAM_PIPELINES", "ROUTED_PIPELINES", "ROUTINGS", "STATUTE_PIPELINES", "UNCUT", "is_program_spec"]

DOCUMENT_PIPELINES = ("pot", "python_pot", "finqa_pot", "cot", "few_shot", "zero_shot")
PROGRAM_PIPELINES = ("pot", "python_pot", "finqa_pot")  # the LM writes a program that is executed
#: the pipelines a route (``ROUTINGS``) may be named for: extraction or their program, by answer type
ROUTED_PIPELINES = ("pot", "finqa_pot")
#: How a DocumentQA answers: one solver (None), or routed by answer type between extraction and a program.
ROUTINGS = (None, "extract_compute")
#: The routes a routed question takes (``answer_type_router``): extraction, or the program.
EXTRACT_ROUTE, COMPUTE_ROUTE = "extract", "compute"
#: ``build_pipeline(route=AUTO_ROUTE)`` (its default), a suite's and ``kdspy compile``'s: the task's default route
#: (``docqa.tasks``: TAT-QA's program pipeline routed by answer type, no route elsewhere).
AUTO_ROUTE = "auto"
#: ``build_pipeline(demo_table=AUTO_DEMO_CUT, demo_paragraphs=AUTO_DEMO_CUT)`` (their defaults), a suite's and
#: ``kdspy compile``'s: what the task's demos show by default (``Task.default_demo_cut``: TAT-QA's program pipeline
#: shows the rows and paragraphs a demo's gold solution reads, every other pipeline and task the whole demo).
AUTO_DEMO_CUT = "auto"
#: The demo-cut settings a task's default names (``DocumentQA``'s ``demo_table`` / ``demo_paragraphs``) and the value
#: that cuts nothing.
DEMO_CUT_SETTINGS = ("demo_table", "demo_paragraphs")
UNCUT = "all"
STATUTE_PIPELINES = ("zero_shot", "few_shot", "cot")


def is_program_spec(text) -> bool:
    """Whether ``text`` names a plain DSPy program (``kind:argument``, ``docqa/pipelines/program_qa.py``) rather
    than a task's pipeline."""
    return isinstance(text, str) and ":" in text
