"""DSPy Signatures (declarations only: fields, types and instructions; no logic).

Chain-of-thought is a module choice (``dspy.ChainOfThought`` adds ``reasoning``), not a signature.
"""

from knapsack_dspy.docqa.signatures.answer_from_table_text import AnswerFromTableText
from knapsack_dspy.docqa.signatures.answer_statute_question import AnswerStatuteQuestion
from knapsack_dspy.docqa.signatures.extract_answer import ExtractAnswer
from knapsack_dspy.docqa.signatures.predict_answer_type import PredictAnswerType
from knapsack_dspy.docqa.signatures.predict_modality import PredictModality
from knapsack_dspy.docqa.signatures.write_finqa_program import WriteFinqaProgram
from knapsack_dspy.docqa.signatures.write_python_program import (
    WriteFinqaPythonLookupProgram,
    WriteFinqaPythonProgram,
    WritePythonLookupProgram,
    WritePythonProgram,
)

__all__ = [
    "AnswerFromTableText",
    "AnswerStatuteQuestion",
    "ExtractAnswer",
    "PredictAnswerType",
    "PredictModality",
    "WriteFinqaProgram",
    "WriteFinqaPythonLookupProgram",
    "WriteFinqaPythonProgram",
    "WritePythonLookupProgram",
    "WritePythonProgram",
]
