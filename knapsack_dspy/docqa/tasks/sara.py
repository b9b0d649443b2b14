"""SARA (Holzenberger et al., 2020): tax-law cases over the statutes -- entailment (Entailment / Contradiction) and
numerical (the tax in dollars); label accuracy, exact dollars, within 10 % and the authors' rule."""

from __future__ import annotations

from typing import Any

from knapsack_dspy.docqa.data.loader import DatasetSpec, ignore_split
from knapsack_dspy.docqa.data.sara import parse_sara_case
from knapsack_dspy.docqa.metrics.sara import score_sara_files, score_sara_prediction
from knapsack_dspy.docqa.pipelines.pipeline_names import STATUTE_PIPELINES
from knapsack_dspy.docqa.tasks.task import Task, register_task

__all__ = ["FILES", "SARA", "score_answer"]

#: ``sara/cases_<split>.json.gz``: the cases (the statutes are read by ``data/statutes.py``)
FILES = DatasetSpec("sara", "sara", ("cases_{split}.json.gz", "cases_{split}.json", "cases_{split}.jsonl"),
                    ignore_split(parse_sara_case), ("train",), default_split="train")


def score_answer(example, prediction) -> dict[str, Any]:
    """Label accuracy for entailment cases; exact dollars for numerical cases (+ within 10 %, and the SARA
    authors' rule ``authors_rule``: within max(10 %, $5,000))."""
    gold_case = {"id": example.get("id"), "type": example.get("answer_type"), "label": example.get("answer"),
                 "answer": example.get("answer"), "answer_value": example.get("answer_value")}
    if gold_case["type"] == "entailment":
        gold_case.pop("answer_value")
    score = score_sara_prediction(getattr(prediction, "answer", None), gold_case)
    return {"correct": bool(score.correct), "em": float(score.correct), "within_10pct": score.within_10pct,
            "authors_rule": score.authors_rule, "case_type": score.case_type}


SARA = register_task(Task(
    name="sara", files=FILES, score=score_answer, score_name="accuracy", pipelines=STATUTE_PIPELINES,
    build="knapsack_dspy.docqa.tasks.programs:build_statute_program", routable=False, takes_statute_budget=True,
    cuts_demos=False, attributes=(),
    compile_splits=("train", "train"), file_scorer=score_sara_files,
    file_figures=(("accuracy", "accuracy (%)"), ("entailment_accuracy", "entailment accuracy (%)"),
                  ("numerical_accuracy", "numerical accuracy, exact $ (%)"),
                  ("numerical_within_10pct", "numerical accuracy, within 10% (%)"),
                  ("numerical_authors_rule", "numerical, authors' rule (%)")),
    description="SARA: tax statutes and cases; entailment and numerical tax"))
