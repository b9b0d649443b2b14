"""FinQA's cases: the train / dev questions with their gold programs and no documents (SEER's and the
case-based reasoning paper's exemplar pool); scored as FinQA."""

from __future__ import annotations

from knapsack_dspy.docqa.data.loader import DATASETS
from knapsack_dspy.docqa.tasks.finqa import FINQA_PROGRAM, score_answer
from knapsack_dspy.docqa.tasks.task import Task, register_task

__all__ = ["FINQA_CASES"]

FINQA_CASES = register_task(Task(
    name="finqa_cases", files=DATASETS["finqa_cases"], score=score_answer, score_name="execution accuracy",
    build=FINQA_PROGRAM,
    description="FinQA's questions with gold programs, no documents (a case pool)"))
