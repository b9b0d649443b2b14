"""TAT-QA (Zhu et al., 2021): questions over a financial report's table and text; the official exact match and
numeracy-focused F1 with the answer's scale."""

from __future__ import annotations

from typing import Any

from knapsack_dspy.docqa.data.loader import DatasetSpec, ignore_split
from knapsack_dspy.docqa.data.tatqa import parse_tatqa_record, record_size
from knapsack_dspy.docqa.metrics.tatqa import score_tatqa_answer, score_tatqa_files
from knapsack_dspy.docqa.tasks.task import Task, register_task

__all__ = ["FILES", "TATQA", "TATQA_FOLDS", "default_demo_cut", "default_route", "score_answer"]

#: TAT-QA's pool cut in two halves by document (``document_parts``, folds): cross-fitting on the pool alone.
TATQA_FOLDS = (("dev_pool_fold0", (("dev_pool", "fold0"),)), ("dev_pool_fold1", (("dev_pool", "fold1"),)))

#: ``tatqa/<split>.json.gz`` (the official files' names too); ``dev_pool`` / ``dev_tune`` cut ``dev`` by document
FILES = DatasetSpec(
    "tatqa", "tatqa", ("{split}.json.gz", "{split}.json", "{split}.jsonl", "tatqa_dataset_{split}.json"),
    ignore_split(parse_tatqa_record), ("dev", "dev_pool", "dev_tune", *(name for name, _ in TATQA_FOLDS)),
    record_size=record_size, not_splits=("dev_sample_prediction",), parts=TATQA_FOLDS)


def score_answer(example, prediction) -> dict[str, Any]:
    """Exact match and F1 of the answer with its scale (official TAT-QA rules); ``correct`` is EM. Loaded examples
    hold a span answer as one string (the official files: a one-item list); a computed 0 is an answer (the
    official script would read the number 0 as none)."""
    answer = getattr(prediction, "answer", None)
    if isinstance(answer, (int, float)) and not isinstance(answer, bool):
        # The official script reads a prediction of 0 as "no answer" (``if not prediction``); a program
        # that computes 0 did answer, so numbers are scored as the text they print as (-0.0 as 0.0).
        answer = str(answer + 0.0 if answer == 0 else answer)
    em, f1 = score_tatqa_answer(answer, getattr(prediction, "scale", None), example.get("answer"),
                                example.get("scale") or "", example.get("answer_type"))
    return {"em": em, "f1": f1, "correct": em == 1.0}


def default_route(pipeline: str) -> str | None:
    """The measured best (docs/results.md, "Answer quality"): span questions extracted, the others answered by a
    program, for TAT-QA's program pipeline; no route elsewhere."""
    return "extract_compute" if pipeline == "pot" else None


def default_demo_cut(pipeline: str) -> dict[str, str]:
    """The measured fewest-token setting non-inferior to the most accurate (docs/results.md, "Tokens"; issue 38):
    a demo of TAT-QA's program pipeline shows its table's header rows and the rows its gold solution reads
    (``demo_table="gold_rows"``) and its evidence paragraphs only (``demo_paragraphs="gold"``); the whole demo
    elsewhere."""
    return {"demo_table": "gold_rows", "demo_paragraphs": "gold"} if pipeline == "pot" else {}


TATQA = register_task(Task(
    name="tatqa", files=FILES, score=score_answer, score_name="exact match",
    default_route=default_route, default_demo_cut=default_demo_cut, compile_splits=("dev_pool", "dev_tune"),
    score_on_error={"f1": 0.0},
    file_scorer=score_tatqa_files,
    file_figures=(("exact_match", "exact match (%)"), ("f1", "F1 (%)"), ("scale_accuracy", "scale accuracy (%)")),
    description="TAT-QA: financial reports, table + text; exact match and F1 with the scale"))
