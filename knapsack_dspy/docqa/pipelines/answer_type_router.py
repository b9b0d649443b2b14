"""``AnswerTypeRouter``: send a question to extraction (its answer is in the document) or computation.

TAT-QA's span and multi-span questions are answered by copying from the document; arithmetic and count
questions by a program. The router predicts the answer type from the question's embedding (a logistic
regression trained on the pool's labels at compile time: ``fit_on_trainset``, called by ``KnapsackFewShot``)
and routes to ``"extract"`` when the predicted probability of a span answer is at least ``threshold``,
unless the question asks for a computation ("change", "average", "percentage", "how many", ...), which
goes to ``"compute"`` unless the classifier is nearly certain (``cue_override``).

Why it leans to computation: the compute route (program of thought) can still answer a span question (a
program may return text; its pool holds every answer type), while the extraction route cannot compute. On
dev_tune (questions 1-100 and 201-504; 101-200 are held for the final evaluation) a threshold of 0.5 with the
cue override routed 89 % of the questions to the route of their gold type; the errors left are mostly span
questions sent to computation. The router's state (classifier weights) is saved with the program.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import dspy
import numpy as np
from dspy.predict.parameter import Parameter

from knapsack_dspy.docqa.pipelines.pipeline_names import COMPUTE_ROUTE, EXTRACT_ROUTE
from knapsack_dspy.saved_format import ROUTER_STATE_VERSION
from knapsack_dspy.selection.attribute_classifier import AttributeClassifier

__all__ = ["COMPUTE_CUES", "ROUTES", "AnswerTypeRouter", "Route"]

ROUTES = (EXTRACT_ROUTE, COMPUTE_ROUTE)
EXTRACT_TYPES = ("span", "multi-span")
#: Words that ask for a computation (they send a question to "compute" unless the classifier is nearly certain).
COMPUTE_CUES = re.compile(
    r"\b(change|difference|average|mean|percentage|percent|proportion|ratio|sum|total of|increase|decrease|"
    r"growth|how many|how much (?:more|less|higher|lower)|combined|altogether|in total)\b", re.IGNORECASE)


@dataclass(frozen=True)
class Route:
    route: str  # "extract" | "compute"
    answer_type: str  # the predicted answer type
    p_extract: float  # predicted probability of a span / multi-span answer
    reason: str


class AnswerTypeRouter(dspy.Module, Parameter):
    """``fit_on_trainset(trainset, embedder)`` then ``route(question, embedding)``.

    threshold: the probability of a span answer from which a question is extracted.
    cue_override: a question with a computation cue is extracted only at this probability or above.
    """

    def __init__(self, threshold: float = 0.5, cue_override: float = 0.95):
        super().__init__()
        if not (0.0 <= threshold <= 1.0 and 0.0 <= cue_override <= 1.0):
            raise ValueError(f"threshold and cue_override must be in [0, 1], got {threshold}, {cue_override}")
        self.threshold = threshold
        self.cue_override = cue_override
        self.classifier: AttributeClassifier | None = None

    @property
    def is_fitted(self) -> bool:
        return self.classifier is not None

    def fit_on_trainset(self, trainset: Sequence, embedder) -> AnswerTypeRouter:
        """Learn the answer type from the pool's labelled questions (examples without one are skipped)."""
        labelled = [ex for ex in trainset if ex.get("answer_type")]
        if not labelled:
            raise ValueError("the router needs pool examples with an answer_type")
        embeddings = np.asarray(embedder.encode([str(ex["question"]) for ex in labelled]))
        self.classifier = AttributeClassifier().fit(embeddings, [str(ex["answer_type"]) for ex in labelled])
        return self

    def route(self, question: str, embedding: np.ndarray) -> Route:
        if self.classifier is None:
            raise RuntimeError("AnswerTypeRouter is not fitted: compile the program (KnapsackFewShot) first")
        probabilities = self.classifier.predict_proba(np.asarray(embedding)[None, :])[0]
        classes = [str(c) for c in self.classifier.classes_]
        answer_type = classes[int(np.argmax(probabilities))]
        p_extract = float(sum(p for c, p in zip(classes, probabilities, strict=True) if c in EXTRACT_TYPES))
        if p_extract < self.threshold:
            return Route("compute", answer_type, p_extract, f"P(span) {p_extract:.2f} < {self.threshold}")
        if COMPUTE_CUES.search(question or "") and p_extract < self.cue_override:
            return Route("compute", answer_type, p_extract, "the question asks for a computation")
        if answer_type not in EXTRACT_TYPES:  # a span answer is likely overall but split between span types
            answer_type = "span"
        return Route("extract", answer_type, p_extract, f"P(span) {p_extract:.2f}")

    # -- dspy.Parameter state --------------------------------------------------------------------------------
    def dump_state(self, json_mode=True):
        return {"version": ROUTER_STATE_VERSION, "threshold": self.threshold, "cue_override": self.cue_override,
                "classifier": self.classifier.get_state() if self.classifier is not None else None}

    def load_state(self, state, **_dspy_options):  # DSPy passes allow_unsafe_lm_state (no LM state here)
        if not isinstance(state, dict) or state.get("version") != ROUTER_STATE_VERSION:
            raise ValueError(f"unsupported router state: {state!r:.200}")
        self.threshold = float(state["threshold"])
        self.cue_override = float(state["cue_override"])
        self.classifier = (AttributeClassifier.from_state(state["classifier"])
                           if state.get("classifier") is not None else None)
        return self

    def reset(self):
        pass
