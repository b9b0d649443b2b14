"""In-context attribute prediction (SEER's "constraint module" done by the LM).

For each attribute a ``dspy.Predict`` of the attribute's declared signature (``selection.attribute_domains``: the
application that labels its pool declares how an LM is asked for each attribute) is shown one pool example per
value and asked for the query's value. The demos are chosen at compile time (the pool example nearest to the
centroid of each value's examples -- deterministic) and saved with the program. A failed or unparsable
prediction falls back to the pool's most common value, so selection never stops on it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

import dspy
import numpy as np
from dspy.utils.exceptions import AdapterParseError

from knapsack_dspy.selection.attribute_domains import AttributeDomain, attribute_domain, declared_attributes


def _askable(attributes: Sequence[str]) -> dict[str, AttributeDomain]:
    domains = {a: attribute_domain(a) for a in attributes}
    unknown = [a for a, d in domains.items() if d.signature is None]
    if unknown:
        askable = sorted(a for a, d in declared_attributes().items() if d.signature is not None)
        raise ValueError(f"no LM predictor for attributes {unknown} (declare_attribute(name, signature=..., "
                         f"inputs=...)); available: {askable}")
    return domains


def _values(domain: AttributeDomain) -> tuple:
    """The values the LM may answer: the signature's ``Literal`` output, else the declared values."""
    annotation = domain.signature.output_fields[domain.name].annotation
    return tuple(getattr(annotation, "__args__", ()) or domain.values)


class LMAttributePredictor:
    """``fit(pool_examples, embeddings)`` picks demos; calling it with a query's fields returns
    ``{attribute: value}``. Not a DSPy Parameter itself: its demos live in ``SelectExemplars``'s state."""

    def __init__(self, attributes: Sequence[str] = ()):
        self.domains = _askable(attributes)
        self.attributes = tuple(attributes)
        self.predictors = {a: dspy.Predict(self.domains[a].signature) for a in self.attributes}
        self.demos: dict[str, list[dict]] = {}
        self.fallback: dict[str, str] = {}

    def fit(self, pool_examples: Sequence, embeddings: np.ndarray) -> LMAttributePredictor:
        for attr in self.attributes:
            labels = [str(ex.get(attr) or "") for ex in pool_examples]
            values = [v for v in _values(self.domains[attr]) if v in set(labels)]
            demos = []
            for value in values:
                idx = [i for i, label in enumerate(labels) if label == value]
                centroid = embeddings[idx].mean(axis=0)
                best = idx[int(np.argmax(embeddings[idx] @ centroid))]
                demos.append({**self.domains[attr].question_inputs(pool_examples[best]), attr: value})
            self.demos[attr] = demos
            self.fallback[attr] = Counter(labels).most_common(1)[0][0] if labels else ""
        return self

    def get_state(self) -> dict:
        return {"demos": self.demos, "fallback": self.fallback}

    def set_state(self, state: Mapping) -> LMAttributePredictor:
        self.demos = {k: list(v) for k, v in (state.get("demos") or {}).items()}
        self.fallback = dict(state.get("fallback") or {})
        return self

    def __call__(self, fields: Mapping) -> dict[str, str]:
        out = {}
        for attr in self.attributes:
            try:
                demos = [dspy.Example(**d) for d in self.demos.get(attr, [])]
                pred = self.predictors[attr](**self.domains[attr].question_inputs(fields), demos=demos)
                out[attr] = str(getattr(pred, attr))
            except (AdapterParseError, ValueError):  # an unparsable answer must not stop selection
                out[attr] = self.fallback.get(attr, "")
        return out
