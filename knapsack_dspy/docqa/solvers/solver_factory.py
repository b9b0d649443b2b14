"""Solvers by pipeline name (what ``knapsack_dspy.docqa.pipelines.pipeline`` and the CLI ask for)."""

from __future__ import annotations

from knapsack_dspy.docqa.solvers.chain_of_thought_answerer import ChainOfThoughtAnswerer
from knapsack_dspy.docqa.solvers.program_of_thought_answerer import ProgramOfThoughtAnswerer
from knapsack_dspy.docqa.solvers.statute_answerer import StatuteAnswerer

__all__ = ["DOCUMENT_SOLVERS", "STATUTE_SOLVERS", "make_document_solver", "make_statute_solver"]

#: pipeline name -> (solver class, constructor arguments)
DOCUMENT_SOLVERS = {
    "pot": (ProgramOfThoughtAnswerer, {"language": "python", "mode": "few_shot"}),
    "python_pot": (ProgramOfThoughtAnswerer, {"language": "python", "mode": "few_shot"}),  # pot for any data set
    "finqa_pot": (ProgramOfThoughtAnswerer, {"language": "finqa", "mode": "few_shot"}),
    "cot": (ChainOfThoughtAnswerer, {"mode": "cot"}),
    "few_shot": (ChainOfThoughtAnswerer, {"mode": "few_shot"}),
    "zero_shot": (ChainOfThoughtAnswerer, {"mode": "zero_shot"}),
}
STATUTE_SOLVERS = ("zero_shot", "few_shot", "cot")


def make_document_solver(pipeline: str, **options):
    """``pot`` / ``python_pot`` (SEER-style Python), ``finqa_pot`` (FinQA DSL), ``cot``, ``few_shot`` or ``zero_shot``;
    ``options`` go to the solver (e.g. ``demo_paragraphs="gold"``, ``retry=False``)."""
    if pipeline not in DOCUMENT_SOLVERS:
        raise ValueError(f"unknown document solver {pipeline!r}; choose from {tuple(DOCUMENT_SOLVERS)}")
    cls, defaults = DOCUMENT_SOLVERS[pipeline]
    return cls(**{**defaults, **options})


def make_statute_solver(pipeline: str = "cot", **options) -> StatuteAnswerer:
    """``StatuteAnswerer`` in mode ``zero_shot``, ``few_shot`` or ``cot``."""
    if pipeline not in STATUTE_SOLVERS:
        raise ValueError(f"unknown statute solver {pipeline!r}; choose from {STATUTE_SOLVERS}")
    return StatuteAnswerer(mode=pipeline, **options)
