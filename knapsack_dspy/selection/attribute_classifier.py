"""Predict a query's attribute (modality, answer type) from its embedding: SEER's "constraint module".

SEER fine-tunes BERT for this; here a multinomial logistic regression on the sentence embeddings,
trained on the pool's gold labels, is the cheap stand-in. Training uses scikit-learn; the learned
weights are plain arrays, so prediction and save / load need only numpy and JSON.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Sequence

import diskcache
import numpy as np

from knapsack_dspy import paths

# Fitted weights by (data, labels, C): compiling several selectors over one pool in a process (a bench
# suite) trains each classifier once. Small: a few (classes x dim) arrays.
_FIT_CACHE: dict[str, tuple] = {}
_FIT_LOCK = threading.Lock()


def _disk_cache():
    """Fitted weights also persist in the project cache (``<cache>/classifiers``), keyed by data and labels."""
    try:
        return diskcache.Cache(str(paths.cache_dir() / "classifiers"), size_limit=2**27)
    except Exception:  # noqa: BLE001 - an unwritable cache only costs time
        return None


class AttributeClassifier:
    """``fit(embeddings, labels)`` then ``predict(embeddings)``; ``C`` is the inverse L2 strength."""

    def __init__(self, C: float = 1.0, max_iter: int = 1000):
        self.C = C
        self.max_iter = max_iter

    def fit(self, embeddings: np.ndarray, labels: Sequence[str]) -> AttributeClassifier:
        labels = np.asarray([str(x) for x in labels])
        classes = np.unique(labels)
        if classes.size == 0:
            raise ValueError("cannot fit an attribute classifier on no labels")
        if classes.size == 1:  # one class: predict it always
            self.classes_ = classes
            self.coef_ = np.zeros((1, embeddings.shape[1]))
            self.intercept_ = np.zeros(1)
            return self
        x = np.ascontiguousarray(embeddings, dtype=np.float64)
        key = hashlib.sha1(x.tobytes() + "\x00".join(labels).encode() + repr((self.C, self.max_iter)).encode()
                           ).hexdigest()
        with _FIT_LOCK:
            cached = _FIT_CACHE.get(key)
        disk = _disk_cache()
        if cached is None and disk is not None:
            cached = disk.get(key)
        if cached is None:
            from sklearn.linear_model import LogisticRegression  # heavy (~1 s): only when a fit is not cached

            model = LogisticRegression(C=self.C, max_iter=self.max_iter)
            model.fit(x, labels)
            cached = (model.classes_.astype(str), model.coef_.copy(), model.intercept_.copy())
            if disk is not None:
                disk.set(key, cached)
        with _FIT_LOCK:
            _FIT_CACHE[key] = cached
        self.classes_, coef, intercept = cached
        if coef.shape[0] == 1:  # binary: sklearn keeps one row for the positive class
            coef = np.vstack([-coef[0] / 2, coef[0] / 2])
            intercept = np.array([-intercept[0] / 2, intercept[0] / 2])
        self.coef_, self.intercept_ = coef, intercept
        return self

    def predict_proba(self, embeddings: np.ndarray) -> np.ndarray:
        if not hasattr(self, "classes_"):
            raise RuntimeError("AttributeClassifier is not fitted")
        x = np.atleast_2d(np.asarray(embeddings, dtype=np.float64))
        if self.classes_.size == 1:
            return np.ones((x.shape[0], 1))
        z = x @ self.coef_.T + self.intercept_
        z -= z.max(axis=1, keepdims=True)
        p = np.exp(z)
        return p / p.sum(axis=1, keepdims=True)

    def predict(self, embeddings: np.ndarray) -> np.ndarray:
        return self.classes_[np.argmax(self.predict_proba(embeddings), axis=1)]

    def get_state(self) -> dict:
        return {"classes": self.classes_.tolist(), "coef": self.coef_.tolist(), "intercept": self.intercept_.tolist(),
                "C": self.C}

    @classmethod
    def from_state(cls, state: dict) -> AttributeClassifier:
        clf = cls(C=state.get("C", 1.0))
        clf.classes_ = np.asarray(state["classes"], dtype=str)
        clf.coef_ = np.asarray(state["coef"], dtype=np.float64)
        clf.intercept_ = np.asarray(state["intercept"], dtype=np.float64)
        if clf.coef_.shape != (clf.classes_.size, clf.coef_.shape[1]) and clf.classes_.size > 1:
            raise ValueError("attribute classifier state is inconsistent (coef rows != classes)")
        return clf
