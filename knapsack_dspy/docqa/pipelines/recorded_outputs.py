"""What a pipeline's recorded outputs stand for, read back without the program (no DSPy: the bench re-scores and
replays stored rows with them).

A bench row keeps what the pipeline produced -- the answer, its scale, the program or reasoning the LM wrote
(``output``), the route a routed question took and, for an extraction, its raw reply -- and the run's pipeline
name. Which of those is a program, in which language, and which one is the whole of the LM's one reply, depends on
the pipeline and the route: this module says so, so the bench names no pipeline and no route.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from knapsack_dspy.docqa.pipelines.pipeline_names import COMPUTE_ROUTE, EXTRACT_ROUTE, PROGRAM_PIPELINES

__all__ = ["output_is_program", "recorded_prediction", "single_call_reply"]

#: the program pipeline whose programs are Python with FinQA's answer rules when re-scored; the others' programs
#: are read as FinQA's DSL (``Task.score`` reads ``language`` only where programs are FinQA's)
_PYTHON_PROGRAMS = ("python_pot",)


def recorded_prediction(pipeline: str | None, answer: Any, scale: Any, output: Any) -> SimpleNamespace:
    """The prediction a stored row's ``answer``, ``scale`` and ``output`` stand for, as the task's metric reads
    one: ``output`` is its ``program`` for a program pipeline (None otherwise); ``language`` is ``"python"`` for
    ``python_pot``, ``"finqa"`` (the DSL) otherwise."""
    program = output if pipeline in PROGRAM_PIPELINES else None
    language = "python" if pipeline in _PYTHON_PROGRAMS else "finqa"
    return SimpleNamespace(answer=answer, scale=scale, program=program, language=language)


def output_is_program(route: str | None) -> bool:
    """Whether a row's ``output`` of a question that took ``route`` is a program (a question routed to
    extraction has none)."""
    return route != EXTRACT_ROUTE


def single_call_reply(pipeline: str | None, route: str | None, *, program: Any, raw_answer: Any) -> dict | None:
    """The output fields of the one LM reply a program pipeline made for a question, rebuilt from what it kept:
    the program writer's reply is its ``program`` (unrouted, or routed to compute), the extractor's its raw
    ``answer``. None when that is not the whole reply (another pipeline or route) or was not kept."""
    if pipeline not in PROGRAM_PIPELINES:
        return None
    if (route or "") in ("", COMPUTE_ROUTE):
        field, value = "program", program
    elif route == EXTRACT_ROUTE:
        field, value = "answer", raw_answer
    else:
        return None
    return None if value is None else {field: value}
