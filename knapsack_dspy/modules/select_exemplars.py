"""``SelectExemplars``: the DSPy module that returns the few-shot demos for one query.

Parameters live in ``__init__`` (scikit-learn style); ``fit`` (called by ``KnapsackFewShot.compile``)
stores the learned state: the exemplar pool (ids, rendered demos, token costs, attributes, document
ids, the texts to embed), the attribute classifiers and the selector's own state (e.g. a fixed set).
The module is a ``dspy.Parameter``, so ``program.save("x.json")`` / ``program.load(...)`` round-trip that
state as JSON, without pickle. Embeddings are not saved: they are recomputed from the saved texts
through the embedding cache (the embedder's model id is saved and checked).

At inference it never mutates shared state: it returns the demos, and the pipeline passes them to the
predictor for that one call (``predictor(..., demos=...)``), so threaded ``dspy.Evaluate`` is safe.
Demos come least similar first, so the most similar exemplar sits next to the question (as SEER).
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

import dspy
import numpy as np
from dspy.predict.parameter import Parameter

from knapsack_dspy.embeddings import TextEmbedder
from knapsack_dspy.selection.attribute_classifier import AttributeClassifier
from knapsack_dspy.selection.exemplar_pool import ExemplarPool, SelectionRequest
from knapsack_dspy.selection.selectors import DEFAULT_ATTRIBUTE_SOURCE, SELECTORS, make_selector

STATE_VERSION = 1
ATTRIBUTE_SOURCES = ("classifier", "gold", "lm", "none")


class NotCompiledError(RuntimeError):
    """SelectExemplars was used before compile / fit / load."""


class SelectExemplars(dspy.Module, Parameter):
    """Select few-shot exemplars for one query.

    Parameters
    ----------
    selector: a name from ``knapsack_dspy.selection.selectors.SELECTORS`` ("seer", "kate", "random", ...).
    max_exemplars: M, the most exemplars per prompt.
    budget: total prompt tokens (None: the model's context window, resolved at compile time).
    reserve_output_tokens: tokens kept free for the answer.
    attribute_source: how the query's attributes are predicted: "classifier" (logistic regression on
        embeddings, trained on the pool), "lm" (in-context prediction), "gold" (labels; oracle runs) or "none".
    attributes: attributes constrained by SEER's templates, e.g. ("modality",) or ("modality", "answer_type").
    embed_fields: query / exemplar fields whose text is embedded for similarity.
    selector_params: extra selector parameters (alpha, beta, knn_k, max_per_doc, core_size, ...).
    exclude_same_doc: never pick exemplars from the query's own document (no leakage).
    embedder: a ``TextEmbedder`` (default: all-MiniLM-L6-v2, cached).
    """

    def __init__(self, selector: str = "seer", max_exemplars: int = 8, budget: int | None = None,
                 reserve_output_tokens: int = 256, attribute_source: str | None = None,
                 attributes: Sequence[str] = ("modality",), embed_fields: Sequence[str] = ("question",),
                 selector_params: Mapping[str, Any] | None = None, exclude_same_doc: bool = True, seed: int = 0,
                 embedder: TextEmbedder | None = None):
        super().__init__()
        self.selector = selector
        self.max_exemplars = max_exemplars
        self.budget = budget
        self.reserve_output_tokens = reserve_output_tokens
        self.attribute_source = attribute_source or DEFAULT_ATTRIBUTE_SOURCE.get(selector, "classifier")
        self.attributes = tuple(attributes)
        self.embed_fields = tuple(embed_fields)
        self.selector_params = dict(selector_params or {})
        self.exclude_same_doc = exclude_same_doc
        self.seed = seed
        self.embedder = embedder or TextEmbedder()
        self._lock = threading.Lock()
        self._reset_learned()
        self._validate_params()

    # ---------------------------------------------------------------------------------------------
    def _validate_params(self):
        if self.selector not in SELECTORS:
            raise ValueError(f"unknown selector {self.selector!r}; choose from {', '.join(SELECTORS)}")
        if self.attribute_source not in ATTRIBUTE_SOURCES:
            raise ValueError(f"attribute_source must be one of {ATTRIBUTE_SOURCES}, got {self.attribute_source!r}")
        if not isinstance(self.max_exemplars, int) or isinstance(self.max_exemplars, bool) or self.max_exemplars < 0:
            raise ValueError(f"max_exemplars must be a non-negative integer, got {self.max_exemplars!r}")
        if self.budget is not None and (not isinstance(self.budget, int) or self.budget <= 0):
            raise ValueError(f"budget must be a positive number of tokens or None, got {self.budget!r}")
        if self.reserve_output_tokens < 0:
            raise ValueError("reserve_output_tokens must be >= 0")
        if not self.embed_fields:
            raise ValueError("embed_fields must name at least one field")

    def _reset_learned(self):
        self.pool_ids: list[str] = []
        self.demos: list[dict] = []
        self.costs: list[float] = []
        self.pool_attributes: dict[str, list[str]] = {}
        self.doc_ids: list[str] = []
        self.embed_texts: list[str] = []
        self.programs: list[str] = []  # gold program / derivation of each exemplar (selection-quality metrics)
        self.resolved_budget: int | None = None
        self.token_model: str | None = None
        self.classifiers: dict[str, AttributeClassifier] = {}
        self.selector_state: dict = {}
        self.compile_report: dict = {}
        self.lm_attribute_predictor = None  # set by fit / load when attribute_source == "lm"
        self._selector_obj = None
        self._pool_obj = None

    @property
    def is_fitted(self) -> bool:
        return bool(self.pool_ids) and self.resolved_budget is not None

    def make_selector(self):
        params = dict(self.selector_params)
        params.setdefault("attributes", self.attributes)
        return make_selector(self.selector, max_exemplars=self.max_exemplars, **params)

    # -- compile-time ------------------------------------------------------------------------------
    def query_text(self, fields: Mapping[str, Any]) -> str:
        parts = []
        for name in self.embed_fields:
            value = fields.get(name)
            if value is None:
                continue
            parts.append(" ".join(map(str, value)) if isinstance(value, (list, tuple)) else str(value))
        return "\n".join(parts)

    def fit(self, pool_examples: Sequence[dspy.Example], demos: Sequence[Mapping], costs: Sequence[float], *,
            budget: int, token_model: str | None = None, fit_selector_kwargs: Mapping | None = None
            ) -> SelectExemplars:
        """Store the pool and learn what selection needs. ``demos[i]`` is ``pool_examples[i]`` rendered in
        the predictor's fields; ``costs[i]`` its token cost in that prompt."""
        if not (len(pool_examples) == len(demos) == len(costs)):
            raise ValueError("pool_examples, demos and costs must have the same length")
        if not pool_examples:
            raise ValueError("the exemplar pool is empty")
        with self._lock:
            self._reset_learned()
            self.pool_ids = [str(ex.get("id", i)) for i, ex in enumerate(pool_examples)]
            self.demos = [dict(d) for d in demos]
            self.costs = [float(c) for c in costs]
            self.doc_ids = [str(ex.get("doc_id", "")) for ex in pool_examples]
            self.embed_texts = [self.query_text(ex) for ex in pool_examples]
            self.programs = [str(ex.get("program") or ex.get("derivation") or "") for ex in pool_examples]
            for attr in set(self.attributes) | {"modality", "answer_type"}:
                values = [ex.get(attr) for ex in pool_examples]
                if any(v is not None and v != "" for v in values):
                    self.pool_attributes[attr] = ["" if v is None else str(v) for v in values]
            self.resolved_budget = int(budget)
            self.token_model = token_model
            pool = self._pool()
            if self.attribute_source == "classifier":
                for attr in self.attributes:
                    if attr in self.pool_attributes:
                        self.classifiers[attr] = AttributeClassifier().fit(pool.embeddings, self.pool_attributes[attr])
            elif self.attribute_source == "lm":
                from knapsack_dspy.modules.lm_attribute_predictor import LMAttributePredictor

                self.lm_attribute_predictor = LMAttributePredictor(self.attributes).fit(pool_examples, pool.embeddings)
        # Outside the lock: a fixed-set search may run this module (threaded dspy.Evaluate) while fitting.
        selector = self.make_selector()
        if selector.needs_fit:
            selector.fit(pool, **dict(fit_selector_kwargs or {}))
        with self._lock:
            self.selector_state = selector.get_state()
            self._selector_obj = selector
        return self

    def _pool(self) -> ExemplarPool:
        if self._pool_obj is None:
            if not self.pool_ids:
                raise NotCompiledError("SelectExemplars has no exemplar pool: compile the program "
                                       "(KnapsackFewShot.compile) or load a compiled one first")
            embeddings = self.embedder.encode(self.embed_texts)
            self._pool_obj = ExemplarPool(self.pool_ids, embeddings, np.asarray(self.costs),
                                          {k: np.asarray(v) for k, v in self.pool_attributes.items()},
                                          np.asarray(self.doc_ids))
        return self._pool_obj

    def _selector(self):
        if self._selector_obj is None:
            selector = self.make_selector()
            selector.set_state(self.selector_state)
            self._selector_obj = selector
        return self._selector_obj

    def pool(self) -> ExemplarPool:
        """The exemplar pool (embedding it on first use)."""
        with self._lock:
            return self._pool()

    # -- attributes --------------------------------------------------------------------------------
    def predict_attributes(self, embedding: np.ndarray, fields: Mapping[str, Any]) -> dict[str, str]:
        if self.attribute_source == "none":
            return {}
        if self.attribute_source == "gold":
            missing = [a for a in self.attributes if not fields.get(a)]
            if missing:
                raise ValueError(f"attribute_source='gold' needs the query's {missing} (pass them as inputs)")
            return {a: str(fields[a]) for a in self.attributes}
        if self.attribute_source == "lm":
            if self.lm_attribute_predictor is None:
                raise NotCompiledError("attribute_source='lm' needs the LM attribute predictor set by compile")
            return dict(self.lm_attribute_predictor(fields))
        return {a: str(clf.predict(embedding[None, :])[0]) for a, clf in self.classifiers.items()}

    # -- inference -----------------------------------------------------------------------------------
    def forward(self, base_tokens: int = 0, id: str | None = None, doc_id: str | None = None, **fields):
        """Return ``dspy.Prediction(demos, ids, selection)`` for the query described by ``fields``
        (at least the ``embed_fields``); ``base_tokens`` is the query prompt's own size."""
        if not self.is_fitted:
            raise NotCompiledError("SelectExemplars is not compiled: run KnapsackFewShot.compile or load a program")
        start = time.perf_counter()
        with self._lock:
            pool = self._pool()
            selector = self._selector()
        text = self.query_text(fields)
        if not text.strip():
            raise ValueError(f"the query has no text in {self.embed_fields}")
        embedding = self.embedder.encode([text])[0]
        targets = self.predict_attributes(embedding, fields) if selector.uses_attributes else {}
        capacity = self.resolved_budget - int(base_tokens) - self.reserve_output_tokens
        request = SelectionRequest(embedding=embedding, capacity=float(capacity), target_attributes=targets,
                                   exclude_ids=frozenset([str(id)]) if id is not None else frozenset(),
                                   doc_id=str(doc_id) if (doc_id is not None and self.exclude_same_doc) else None,
                                   seed=self.seed, key=text)
        selection = selector.select(pool, request)
        info = selection.as_dict(pool)
        info.update(capacity=capacity, base_tokens=int(base_tokens), budget=self.resolved_budget,
                    predicted_attributes=targets, selection_ms=(time.perf_counter() - start) * 1e3,
                    prompt_tokens=int(base_tokens) + int(selection.total_cost))
        demos = [dspy.Example(**self.demos[i]) for i in selection.indices]
        return dspy.Prediction(demos=demos, ids=info["ids"], selection=info)

    # -- dspy.Parameter state ----------------------------------------------------------------------------
    def dump_state(self, json_mode=True):
        return {
            "version": STATE_VERSION,
            "params": {"selector": self.selector, "max_exemplars": self.max_exemplars, "budget": self.budget,
                       "reserve_output_tokens": self.reserve_output_tokens,
                       "attribute_source": self.attribute_source, "attributes": list(self.attributes),
                       "embed_fields": list(self.embed_fields), "selector_params": self.selector_params,
                       "exclude_same_doc": self.exclude_same_doc, "seed": self.seed},
            "embedder_model": self.embedder.model_id,
            "token_model": self.token_model,
            "resolved_budget": self.resolved_budget,
            "pool": {"ids": self.pool_ids, "demos": self.demos, "costs": self.costs,
                     "attributes": self.pool_attributes, "doc_ids": self.doc_ids, "embed_texts": self.embed_texts,
                     "programs": self.programs},
            "classifiers": {k: v.get_state() for k, v in self.classifiers.items()},
            "selector_state": self.selector_state,
            "lm_attribute_predictor": (self.lm_attribute_predictor.get_state()
                                       if self.lm_attribute_predictor is not None else None),
            "compile_report": self.compile_report,
        }

    def load_state(self, state, *, allow_unsafe_lm_state=False):
        _validate_state(state)
        params = state["params"]
        with self._lock:
            self.selector = params["selector"]
            self.max_exemplars = int(params["max_exemplars"])
            self.budget = params["budget"]
            self.reserve_output_tokens = int(params["reserve_output_tokens"])
            self.attribute_source = params["attribute_source"]
            self.attributes = tuple(params["attributes"])
            self.embed_fields = tuple(params["embed_fields"])
            self.selector_params = dict(params["selector_params"])
            self.exclude_same_doc = bool(params["exclude_same_doc"])
            self.seed = int(params["seed"])
            self._validate_params()
            if state["embedder_model"] != self.embedder.model_id:
                self.embedder = TextEmbedder(state["embedder_model"])
            self._reset_learned()
            pool = state["pool"]
            self.pool_ids = list(pool["ids"])
            self.demos = [dict(d) for d in pool["demos"]]
            self.costs = [float(c) for c in pool["costs"]]
            self.pool_attributes = {k: list(v) for k, v in pool["attributes"].items()}
            self.doc_ids = list(pool["doc_ids"])
            self.embed_texts = list(pool["embed_texts"])
            self.programs = list(pool.get("programs") or [""] * len(self.pool_ids))
            self.resolved_budget = state["resolved_budget"]
            self.token_model = state.get("token_model")
            self.classifiers = {k: AttributeClassifier.from_state(v) for k, v in state["classifiers"].items()}
            self.selector_state = dict(state.get("selector_state") or {})
            self.compile_report = dict(state.get("compile_report") or {})
            if state.get("lm_attribute_predictor") is not None:
                from knapsack_dspy.modules.lm_attribute_predictor import LMAttributePredictor

                self.lm_attribute_predictor = LMAttributePredictor(self.attributes).set_state(
                    state["lm_attribute_predictor"])
        return self

    def reset(self):
        """DSPy's reset hook (used by ``reset_copy``): forget what compile learned."""
        with self._lock:
            self._reset_learned()

    def __deepcopy__(self, memo):
        clone = self.__class__.__new__(self.__class__)
        memo[id(self)] = clone
        import copy

        for key, value in self.__dict__.items():
            if key == "_lock":
                clone._lock = threading.Lock()
            elif key in ("embedder", "_pool_obj", "_selector_obj", "lm_attribute_predictor"):
                setattr(clone, key, value)  # immutable after fit / shared resources
            else:
                setattr(clone, key, copy.deepcopy(value, memo))
        return clone


def _validate_state(state: Any) -> None:
    """Reject a saved state that is malformed or inconsistent, with a message naming the problem."""

    def fail(msg):
        raise ValueError(f"invalid SelectExemplars state: {msg}")

    if not isinstance(state, dict):
        fail("not a JSON object")
    if state.get("version") != STATE_VERSION:
        fail(f"state version {state.get('version')!r} is not supported (expected {STATE_VERSION})")
    for key in ("params", "pool", "classifiers", "embedder_model", "resolved_budget"):
        if key not in state:
            fail(f"missing {key!r}")
    pool = state["pool"]
    n = len(pool.get("ids", []))
    for key in ("demos", "costs", "doc_ids", "embed_texts"):
        if len(pool.get(key, [])) != n:
            fail(f"pool.{key} has {len(pool.get(key, []))} entries for {n} ids")
    for name, values in pool.get("attributes", {}).items():
        if len(values) != n:
            fail(f"pool.attributes[{name!r}] has {len(values)} entries for {n} ids")
    if len(set(pool["ids"])) != n:
        fail("pool ids are not unique")
    costs = pool["costs"]
    if any(not isinstance(c, (int, float)) or not math.isfinite(c) or c < 0 for c in costs):
        fail("pool.costs must be finite non-negative numbers")
    budget = state["resolved_budget"]
    if n and (not isinstance(budget, int) or budget <= 0):
        fail(f"resolved_budget must be a positive integer, got {budget!r}")
