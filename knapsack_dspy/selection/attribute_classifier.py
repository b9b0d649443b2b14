"""Predict a query's attribute (modality, answer type) from its embedding: SEER's "constraint module".

SEER fine-tunes BERT for this; here a multinomial logistic regression on the sentence embeddings,
trained on the pool's gold labels, is the cheap stand-in. Training uses scikit-learn; the learned
weights are plain arrays, so prediction and save / load need only numpy and JSON.

``derive_kinds``: the attribute ``kind`` derived from a pool nobody labelled, by k-means of its demos' output
embeddings (the rule: ``selectors/case_coverage.py``'s docstring, "Kinds derived from the pool").
"""

from __future__ import annotations

import hashlib
import math
import threading
from collections.abc import Sequence
from dataclasses import dataclass

import diskcache
import numpy as np

from knapsack_dspy import paths
from knapsack_dspy.selection import attribute_domains

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
        texts = np.asarray([str(x) for x in labels])
        classes = np.unique(texts)
        if classes.size == 0:
            raise ValueError("cannot fit an attribute classifier on no labels")
        if classes.size == 1:  # one class: predict it always
            self.classes_ = classes
            self.coef_ = np.zeros((1, embeddings.shape[1]))
            self.intercept_ = np.zeros(1)
            return self
        x = np.ascontiguousarray(embeddings, dtype=np.float64)
        key = hashlib.sha1(x.tobytes() + "\x00".join(texts).encode() + repr((self.C, self.max_iter)).encode()
                           ).hexdigest()
        with _FIT_LOCK:
            cached = _FIT_CACHE.get(key)
        disk = _disk_cache()
        if cached is None and disk is not None:
            cached = disk.get(key)
        if cached is None:
            from sklearn.linear_model import LogisticRegression  # heavy (~1 s): only when a fit is not cached

            model = LogisticRegression(C=self.C, max_iter=self.max_iter)
            model.fit(x, texts)
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


# -- kinds derived from the pool (selectors/case_coverage.py, "Kinds derived from the pool") ------------
KIND = attribute_domains.KIND  # the pool attribute the kinds go to (case coverage's default ``kind``)
MIN_POOL = 16
MAX_KINDS = 16
PREFIX = "derived:"


def kind_count(n: int) -> int:
    """The number of kinds derived for a pool of ``n`` demos (module docstring); 0: none."""
    if n < MIN_POOL:
        return 0
    return int(min(MAX_KINDS, max(2, round(math.sqrt(n / 8)))))


def _normalised(vectors) -> np.ndarray:
    x = np.asarray(vectors, dtype=np.float64)
    if x.ndim != 2:
        raise ValueError(f"derive_kinds needs a 2-d array of vectors, got shape {x.shape}")
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return x / np.where(norms > 0, norms, 1.0)


@dataclass(frozen=True)
class DerivedKinds:
    """The derived kinds of a pool: ``labels[i]`` of demo i, and the centroids (rank order) that assign others."""

    labels: tuple[str, ...]
    centroids: np.ndarray

    @property
    def k(self) -> int:
        return int(self.centroids.shape[0])

    def sizes(self) -> dict[str, int]:
        names, counts = np.unique(np.asarray(self.labels), return_counts=True)
        return {str(n): int(c) for n, c in sorted(zip(names, counts, strict=True), key=lambda p: -p[1])}

    def assign(self, vectors) -> list[str]:
        """The kind of each vector (its nearest centroid): held-out demos labelled as the pool's were."""
        x = _normalised(vectors)
        distances = (self.centroids ** 2).sum(axis=1)[None, :] - 2.0 * x @ self.centroids.T  # + |x|^2, the same
        nearest = np.argmin(distances, axis=1)
        return [f"{PREFIX}{int(i)}" for i in nearest]


def derive_kinds(vectors, *, seed: int = 0, k: int | None = None) -> DerivedKinds | None:
    """Cluster the demos' output embeddings ``vectors`` (one row per demo) into kinds; ``k``: the number of
    kinds (default: ``kind_count(len(vectors))``). ``None`` when nothing can be derived (too few demos, fewer
    distinct outputs than kinds)."""
    x = _normalised(vectors)
    k = kind_count(len(x)) if k is None else int(k)
    if k < 2 or len(x) < k:
        return None
    distinct = np.unique(np.round(x, 6), axis=0).shape[0]
    if distinct < k:  # empty or repeated outputs: no k different solutions to tell apart
        return None
    from sklearn.cluster import KMeans  # heavy import, only when kinds are derived

    fitted = KMeans(n_clusters=k, n_init=4, random_state=seed).fit(x)
    counts = np.bincount(fitted.labels_, minlength=k)
    rank = np.empty(k, dtype=int)
    rank[np.argsort(-counts, kind="stable")] = np.arange(k)  # derived:0 the largest cluster
    centroids = np.asarray(fitted.cluster_centers_)[np.argsort(-counts, kind="stable")]
    labels = tuple(f"{PREFIX}{int(rank[c])}" for c in fitted.labels_)
    return DerivedKinds(labels=labels, centroids=centroids)
