"""GSM8K (Cobbe et al., 2021): grade-school math word problems, the task DSPy's tutorials start with; answered by a
plain DSPy program and scored as DSPy's tutorials score it (``docqa/metrics/gsm8k.py``: the final number).

Splits (``docqa/data/gsm8k.py``): ``train`` (the 7,473 problems of ``gsm8k/train.jsonl.gz``), cut by a hash of the
normalised question into ``pool`` (exemplars) and ``tune`` (questions to tune and measure on); the test split is
held out. Pipelines: ``cot`` is ``dspy.ChainOfThought("question -> answer")``, ``predict`` is
``dspy.Predict("question -> answer")``; any other DSPy program is named in a suite (``pipeline = "cot:question ->
answer"``, ``"my.module:factory"``). A demo's reasoning is the worked solution with its calculator annotations
made readable (the example's ``derivation``). The pool carries no kind labels: ``case_coverage`` derives them
(``selection/attribute_classifier.py``); ``operation_kind`` is a GSM8K-specific rule (the operations of a worked
solution) to compare them with, or to pass as ``KnapsackFewShot(attributes={"kind": operation_kind})``.
"""

from __future__ import annotations

from typing import Any

from knapsack_dspy.docqa.data.gsm8k import parse_gsm8k_record
from knapsack_dspy.docqa.data.loader import DatasetSpec
from knapsack_dspy.docqa.metrics.gsm8k import score_gsm8k_answer
from knapsack_dspy.docqa.tasks.task import Task, register_task

__all__ = ["FILES", "GSM8K", "PROGRAM_FIELDS", "operation_kind", "score_answer"]

#: a program's reasoning is the example's worked solution (its ``derivation``)
PROGRAM_FIELDS = {"reasoning": "derivation"}
#: ``gsm8k/train.jsonl.gz``, cut into ``pool`` and ``tune`` (``docqa/data/gsm8k.py``)
FILES = DatasetSpec("gsm8k", "gsm8k", ("{split}.jsonl.gz", "{split}.jsonl"), parse_gsm8k_record,
                    ("train", "pool", "tune"), documents_note="the test split is held out",
                    parts=(("pool", (("train", "pool"),)), ("tune", (("train", "eval"),))))


def score_answer(example, prediction) -> dict[str, Any]:
    """Right when the answer states the gold answer's integer (``docqa/metrics/gsm8k.py``)."""
    right = score_gsm8k_answer(getattr(prediction, "answer", None), example.get("answer"))
    return {"correct": right, "em": float(right)}


def operation_kind(example) -> str:
    """A GSM8K-specific kind: the set of operations the worked solution's calculator annotations use
    (``"add+divide"``; ``"none"`` without annotations)."""
    return "+".join(sorted(set(example.get("operators") or []))) or "none"


GSM8K = register_task(Task(
    name="gsm8k", files=FILES,
    score=score_answer, score_name="accuracy", pipelines=("cot", "predict"),
    build="knapsack_dspy.docqa.tasks.programs:question_program", offers_evidence=False,
    routable=False, attributes=(), compile_splits=("pool", "tune"), program_fields=PROGRAM_FIELDS,
    description="GSM8K: grade-school math word problems; the final number, as DSPy's tutorials score it"))
