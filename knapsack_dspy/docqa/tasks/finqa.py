"""FinQA (Chen et al., 2021): numerical questions over a financial report's table and text, answered by a
program; the official execution accuracy and program accuracy."""

from __future__ import annotations

from typing import Any

from knapsack_dspy.docqa.data.finqa import parse_finqa_record
from knapsack_dspy.docqa.data.loader import DatasetSpec, ignore_split
from knapsack_dspy.docqa.metrics.answer_matching import finqa_exact_match, kdspy_lenient_match
from knapsack_dspy.docqa.metrics.finqa import check_program, execution_match, score_finqa_files
from knapsack_dspy.docqa.tasks.task import Task, register_task
from knapsack_dspy.messages import one_line

__all__ = ["FILES", "FINQA", "FINQA_PARTS", "FINQA_PROGRAM", "score_answer"]

#: FinQA's splits cut by page (``document_parts``): ``dev_docs_tune`` is the eval part of ``dev_docs`` (the
#: TAT-QA rule; named as TAT-QA's ``dev_tune``, for tuning), ``docs_pool`` every page no tuning question is about.
FINQA_PARTS = (("train_docs_pool", (("train_docs", "pool"),)), ("train_docs_eval", (("train_docs", "eval"),)),
               ("dev_docs_pool", (("dev_docs", "pool"),)), ("dev_docs_tune", (("dev_docs", "eval"),)),
               ("docs_pool", (("train_docs", ""), ("dev_docs", "pool"))))

#: the official FinQA JSON (``finqa/<split>.json``): questions with their page's table and text
FILES = DatasetSpec(
    "finqa", "finqa", ("{split}.json", "{split}.json.gz", "{split}.jsonl"),
    ignore_split(parse_finqa_record),
    ("train", "dev", "test", "train_docs", "dev_docs", *(name for name, _ in FINQA_PARTS)),
    documents_note=("the data directory holds FinQA documents for train_docs and dev_docs only (parts: "
                    "train_docs_pool / _eval, dev_docs_pool / _tune, docs_pool); other splits: question/program "
                    "CSVs (dataset 'finqa_cases'), or pass path=<official FinQA JSON> or source='hub:<id>'"),
    parts=FINQA_PARTS)

#: pot (the default) and python_pot write Python with FinQA's answer rules, finqa_pot the FinQA DSL
#: (``programs.build_finqa_program``)
FINQA_PROGRAM = "knapsack_dspy.docqa.tasks.programs:build_finqa_program"


def score_answer(example, prediction) -> dict[str, Any]:
    """With a FinQA-DSL program, official execution accuracy (``correct``) and program accuracy; with a Python
    program (``prediction.language == "python"``) or a direct answer, the official exact match of the executed
    answer (program accuracy is defined for the DSL only: ``None``); our own lenient match
    (``metrics.answer_matching.kdspy_lenient_match``, not SEER's rule) is recorded apart (``kdspy_lenient``).
    Program equivalence is bounded by the programs' sizes (``program_check`` says when it was skipped)."""
    answer = getattr(prediction, "answer", None)
    program = getattr(prediction, "program", None)
    row: dict[str, Any] = {}
    if program and getattr(prediction, "language", "finqa") == "finqa":
        correct = execution_match(program, example.get("table"), example.get("answer"))
        try:  # bounded by the programs' sizes; beyond them only the execution check counts
            check = check_program(program, example.get("program"))
        except ValueError as exc:  # the gold program cannot be read the official way
            row.update(program_correct=None, program_check=f"skipped: {one_line(exc, 200)}")
        else:
            row["program_correct"] = check.equal
            if check.skipped:
                row["program_check"] = check.skipped
    else:  # a Python program's executed answer, or a direct answer: the official exact match
        correct = answer is not None and finqa_exact_match(answer, example.get("answer"))
        if program:
            row["program_correct"] = None  # program accuracy is defined for the FinQA DSL only
    row.update(correct=bool(correct), em=float(bool(correct)),
               kdspy_lenient=answer is not None and kdspy_lenient_match(answer, example.get("answer")))
    return row


FINQA = register_task(Task(
    name="finqa", files=FILES, score=score_answer, score_name="execution accuracy",
    build=FINQA_PROGRAM, file_scorer=score_finqa_files,
    file_figures=(("execution_accuracy", "execution accuracy (%)"), ("program_accuracy", "program accuracy (%)")),
    description="FinQA: financial reports, table + text, computed answers; execution and program accuracy"))
