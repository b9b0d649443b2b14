"""``SelectExemplars``: the DSPy module that returns the few-shot demos for one query.

Its settings are one frozen ``SelectionConfig`` (``self.config``); ``fit`` (called by ``KnapsackFewShot.compile``
with the config to fit with) stores the learned state: the exemplar pool (ids, rendered demos, token costs,
attributes, document ids, the texts to embed), the attribute classifiers and the selector's own state (e.g. a
fixed set).
The module is a ``dspy.Parameter``, so ``program.save("x.json")`` / ``program.load(...)`` round-trip that
state as JSON, without pickle. Embeddings are not saved: they are recomputed from the saved texts
through the embedding cache (the embedder's model id is saved and checked).

At inference it never mutates shared state: it returns the demos, and the pipeline passes them to the
predictor for that one call (``predictor(..., demos=...)``), so threaded ``dspy.Evaluate`` is safe.
Demos come least similar first, so the most similar exemplar sits next to the question (as SEER).
"""

from __future__ import annotations

import copy
import math
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

import dspy
import numpy as np
from dspy.predict.parameter import Parameter

from knapsack_dspy.embeddings import TextEmbedder
from knapsack_dspy.modules.lm_attribute_predictor import LMAttributePredictor
from knapsack_dspy.selection.attribute_classifier import AttributeClassifier
from knapsack_dspy.selection.config import SELECTOR_SETTINGS, SelectionConfig
from knapsack_dspy.selection.exemplar_pool import ExemplarPool, SelectionRequest
from knapsack_dspy.selection.selectors.fixed_set import FixedSetSelector

STATE_VERSION = 2


class NotCompiledError(RuntimeError):
    """SelectExemplars was used before compile / fit / load."""


class SelectExemplars(dspy.Module, Parameter):
    """Select few-shot exemplars for one query.

    ``config``: the selection settings (:class:`knapsack_dspy.selection.SelectionConfig`: selector, M,
    budget, attributes, ...); keyword arguments replace single settings of it
    (``SelectExemplars(selector="kate", max_exemplars=2)``; an unknown one is an error).
    ``embedder``: a ``TextEmbedder`` (default: all-MiniLM-L6-v2, cached).
    """

    def __init__(self, config: SelectionConfig | None = None, *, embedder: TextEmbedder | None = None,
                 **settings):
        super().__init__()
        self.config = (config if config is not None else SelectionConfig()).with_settings(**settings)
        self.embedder = embedder or TextEmbedder()
        self._lock = threading.Lock()
        self._reset_learned()

    @property
    def attribute_source(self) -> str:
        """How query attributes are obtained ("classifier", "lm", "gold" or "none"), defaults resolved."""
        return self.config.resolved_attribute_source

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

    # -- compile-time ------------------------------------------------------------------------------
    def query_text(self, fields: Mapping[str, Any]) -> str:
        """The text embedded for a query or an exemplar: its ``embed_fields``, one per line."""
        parts = []
        for name in self.config.embed_fields:
            value = fields.get(name)
            if value is None:
                continue
            parts.append(" ".join(map(str, value)) if isinstance(value, (list, tuple)) else str(value))
        return "\n".join(parts)

    def fit(self, pool_examples: Sequence[dspy.Example], demos: Sequence[Mapping], costs: Sequence[float], *,
            budget: int, token_model: str | None = None, config: SelectionConfig | None = None,
            fit_inputs: Mapping | None = None) -> SelectExemplars:
        """Store the pool and learn what selection needs, with ``config`` (default: the current one).
        ``demos[i]`` is ``pool_examples[i]`` rendered in the predictor's fields; ``costs[i]`` its token cost in
        that prompt; ``budget`` the resolved token budget. ``fit_inputs``: what the selector's ``fit`` needs
        besides the pool (see ``ExemplarSelector.fit_on``)."""
        if not (len(pool_examples) == len(demos) == len(costs)):
            raise ValueError("pool_examples, demos and costs must have the same length")
        if not pool_examples:
            raise ValueError("the exemplar pool is empty")
        with self._lock:
            if config is not None:
                self.config = config
            self._reset_learned()
            self.pool_ids = [str(ex.get("id", i)) for i, ex in enumerate(pool_examples)]
            self.demos = [dict(d) for d in demos]
            self.costs = [float(c) for c in costs]
            self.doc_ids = [str(ex.get("doc_id", "")) for ex in pool_examples]
            self.embed_texts = [self.query_text(ex) for ex in pool_examples]
            self.programs = [str(ex.get("program") or ex.get("derivation") or "") for ex in pool_examples]
            for attr in set(self.config.attributes) | {"modality", "answer_type"}:
                values = [ex.get(attr) for ex in pool_examples]
                if any(v is not None and v != "" for v in values):
                    self.pool_attributes[attr] = ["" if v is None else str(v) for v in values]
            self.resolved_budget = int(budget)
            self.token_model = token_model
            pool = self._pool()
            if self.attribute_source == "classifier":
                for attr in self.config.attributes:
                    if attr in self.pool_attributes:
                        self.classifiers[attr] = AttributeClassifier().fit(pool.embeddings, self.pool_attributes[attr])
            elif self.attribute_source == "lm":
                self.lm_attribute_predictor = LMAttributePredictor(self.config.attributes).fit(pool_examples,
                                                                                             pool.embeddings)
            selector = self.config.build_selector()
        # Outside the lock: a scoring function may LM-evaluate a copy of the program while the selector fits.
        if selector.needs_fit:
            selector.fit(pool, **dict(fit_inputs or {}))
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
            selector = self.config.build_selector()
            selector.set_state(self.selector_state)
            self._selector_obj = selector
        return self._selector_obj

    def show_fixed_set(self, ids: Sequence[str]) -> None:
        """From now on select exactly the pool exemplars ``ids`` for every query (less the query itself and its
        document's, cut to the budget): a fixed set. A scoring function rates a candidate set so, on a copy of
        the program (``KnapsackFewShot``'s LM-scored fixed-set search)."""
        unknown = [i for i in ids if i not in set(self.pool_ids)]
        if unknown:
            raise ValueError(f"show_fixed_set: ids not in the exemplar pool: {unknown[:5]}")
        with self._lock:
            self.config = self.config.with_settings(selector=FixedSetSelector.name, selector_params={})
            self.selector_state = {"fixed_ids": list(ids)}
            self._selector_obj = None
    def pool(self) -> ExemplarPool:
        """The exemplar pool (embedding it on first use)."""
        with self._lock:
            return self._pool()

    # -- attributes --------------------------------------------------------------------------------
    def predict_attributes(self, embedding: np.ndarray, fields: Mapping[str, Any]) -> dict[str, str]:
        if self.attribute_source == "none":
            return {}
        if self.attribute_source == "gold":
            missing = [a for a in self.config.attributes if not fields.get(a)]
            if missing:
                raise ValueError(f"attribute_source='gold' needs the query's {missing} (pass them as inputs)")
            return {a: str(fields[a]) for a in self.config.attributes}
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
            raise ValueError(f"the query has no text in {self.config.embed_fields}")
        embedding = self.embedder.encode([text])[0]
        targets = self.predict_attributes(embedding, fields) if selector.uses_attributes else {}
        capacity = self.resolved_budget - int(base_tokens) - self.config.reserve_output_tokens
        request = SelectionRequest(embedding=embedding, capacity=float(capacity), target_attributes=targets,
                                   exclude_ids=frozenset([str(id)]) if id is not None else frozenset(),
                                   doc_id=str(doc_id) if (doc_id is not None and self.config.exclude_same_doc)
                                   else None, seed=self.config.seed, key=text)
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
            "config": self.config.to_dict(),
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
        try:
            config = (SelectionConfig.from_dict(state["config"]) if state["version"] == STATE_VERSION
                      else _config_of_version_1(state["params"]))
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"invalid SelectExemplars state: {exc}") from None
        with self._lock:
            self.config = config
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
                self.lm_attribute_predictor = LMAttributePredictor(config.attributes).set_state(
                    state["lm_attribute_predictor"])
        return self

    def reset(self):
        """DSPy's reset hook (used by ``reset_copy``): forget what compile learned."""
        with self._lock:
            self._reset_learned()

    def __deepcopy__(self, memo):
        clone = self.__class__.__new__(self.__class__)
        memo[id(self)] = clone
        for key, value in self.__dict__.items():
            if key == "_lock":
                clone._lock = threading.Lock()
            elif key in ("config", "embedder", "_pool_obj", "_selector_obj", "lm_attribute_predictor"):
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
    if state.get("version") not in (1, STATE_VERSION):
        fail(f"state version {state.get('version')!r} is not supported (expected 1 or {STATE_VERSION})")
    for key in ("config" if state["version"] == STATE_VERSION else "params", "pool", "classifiers",
                "embedder_model", "resolved_budget"):
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


def _config_of_version_1(params: Mapping[str, Any]) -> SelectionConfig:
    """The ``SelectionConfig`` of a version-1 state (programs saved before ``SelectionConfig``): its
    ``selector_params`` held every setting the teleprompter passed (alpha, beta, knn_k, max_per_doc, core_size,
    n_candidates, seed), of which the selector took the ones it declares."""
    extra = dict(params.get("selector_params") or {})
    settings = {name: extra.pop(name) for name in SELECTOR_SETTINGS if name in extra}
    settings.pop("seed", None)  # the selector's compile-time seed; queries were seeded by params["seed"]
    config = SelectionConfig(selector=params["selector"])
    declared = set(config.selector_class.param_names())
    return config.with_settings(
        max_exemplars=int(params["max_exemplars"]), budget=params.get("budget"),
        reserve_output_tokens=int(params["reserve_output_tokens"]), attribute_source=params["attribute_source"],
        attributes=tuple(params["attributes"]), embed_fields=tuple(params["embed_fields"]),
        exclude_same_doc=bool(params["exclude_same_doc"]), seed=int(params["seed"]),
        selector_params={k: v for k, v in extra.items() if k in declared}, **settings)
