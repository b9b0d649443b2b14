"""Answering modules (the last step of Retrieve -> SelectExemplars -> solver).

Each solver exposes the compile contract the knapsack teleprompter uses: ``.predictor`` (the
``dspy.Predict`` whose prompt the demos go into), ``prompt_inputs(example_or_fields) -> dict`` and
``as_demo(example) -> dspy.Example``; ``forward(..., demos=[...])`` passes demos per call.
"""

from knapsack_dspy.docqa.solvers.answerer_modes import MODES
from knapsack_dspy.docqa.solvers.chain_of_thought_answerer import ChainOfThoughtAnswerer
from knapsack_dspy.docqa.solvers.program_of_thought_answerer import LANGUAGES, ProgramOfThoughtAnswerer
from knapsack_dspy.docqa.solvers.solver_factory import (
    DOCUMENT_SOLVERS,
    STATUTE_SOLVERS,
    make_document_solver,
    make_statute_solver,
)
from knapsack_dspy.docqa.solvers.statute_answerer import StatuteAnswerer

__all__ = ["DOCUMENT_SOLVERS", "LANGUAGES", "MODES", "STATUTE_SOLVERS", "ChainOfThoughtAnswerer",
           "ProgramOfThoughtAnswerer", "StatuteAnswerer", "make_document_solver", "make_statute_solver"]
