"""FinQA's cases: the train / dev questions with their gold programs and no documents (SEER's and the
case-based reasoning paper's exemplar pool); scored as FinQA."""

from __future__ import annotations

from knapsack_dspy.docqa.data.finqa_cases import parse_finqa_case
from knapsack_dspy.docqa.data.loader import DatasetSpec
from knapsack_dspy.docqa.tasks.finqa import FINQA_PROGRAM, score_answer
from knapsack_dspy.docqa.tasks.task import Task, register_task

__all__ = ["FILES", "FINQA_CASES"]

#: ``finqa/<split>_meta.csv.gz``: the questions and their gold programs
FILES = DatasetSpec("finqa_cases", "finqa", ("{split}_meta.csv.gz", "{split}_meta.csv"),
                    lambda record, split: parse_finqa_case(record, split), ("train", "dev"))

FINQA_CASES = register_task(Task(
    name="finqa_cases", files=FILES, score=score_answer, score_name="execution accuracy",
    build=FINQA_PROGRAM,
    description="FinQA's questions with gold programs, no documents (a case pool)"))
