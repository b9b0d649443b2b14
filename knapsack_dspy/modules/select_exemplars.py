"""``SelectExemplars``: the DSPy module that returns the few-shot demos for one query.

Each ``SelectingPredict`` (``knapsack_dspy.modules.selecting_predict``) holds one; it can also be used on its
own. Its settings are one frozen ``SelectionConfig`` (``self.config``); ``fit`` (called by
``KnapsackFewShot.compile`` with the config to fit with) stores the learned state: the exemplar pool (one
``PoolColumns``: ids, demos in the predictor's fields, token costs, attributes, document ids, the texts to embed;
inline or in a pool store -- ``modules/pool_columns.py``), the attribute classifiers and the selector's own state
(e.g. a fixed set).

Beside this module: ``pool_columns`` (the pool), ``select_exemplars_state`` (reading a saved state: checks,
migrations, the pool store it names), ``empty_selection`` (why a call sends no exemplar); the attribute
classifiers, the LM attribute predictor, pool stores and latency rates load when a pool uses them.
It is a ``dspy.Parameter`` with a JSON state, so ``program.save("x.json")`` / loading round-trip it without
pickle. Embeddings are not saved: they are recomputed from the saved texts through the embedding cache (the
embedder's model id is saved and checked). A value function (``value(query, demo) -> float`` in place of the
embedding similarity) is code: it is not saved, only its name, and must be given again after loading.

At inference it never mutates shared state: it returns the demos, and the caller passes them to the
predictor for that one call (``predictor(..., demos=...)``), so threaded ``dspy.Evaluate`` is safe.
Demos come least similar first, so the most similar exemplar sits next to the question (as SEER).
"""

from __future__ import annotations

import copy
import inspect
import json
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import dspy
import numpy as np
from dspy.predict.parameter import Parameter

from knapsack_dspy.embeddings import TextEmbedder
from knapsack_dspy.errors import KnapsackDspyError
from knapsack_dspy.modules.pool_columns import (
    PoolColumns,
    inputs_digest,
    inputs_digest_of,
    inputs_key,
    query_digest_of,
    query_digests_of,
)
from knapsack_dspy.modules.pool_spec import PoolSpec, as_pool_spec
from knapsack_dspy.modules.shared_fields import referring_demo
from knapsack_dspy.selection.attribute_domains import KIND
from knapsack_dspy.selection.config import SelectionConfig
from knapsack_dspy.selection.exemplar_pool import ExemplarPool, SelectionRequest, canonical_keys, in_canonical_order
from knapsack_dspy.selection.selectors.base import candidate_search, within_new_tokens

if TYPE_CHECKING:  # loaded when used: a pool's classifiers (fit, load_state), latency rates (latency_model), pieces
    from knapsack_dspy.modules.selectable_context import EvidenceOffer
    from knapsack_dspy.selection.attribute_classifier import AttributeClassifier
    from knapsack_dspy.selection.latency import LatencyModel

_UNPICKLED = ("_lock", "_pool_obj", "_selector_obj", "_canonical", "_input_index")  # rebuilt lazily


class NotCompiledError(KnapsackDspyError, RuntimeError):
    """SelectExemplars was used before compile / fit / load."""


class SelectExemplars(dspy.Module, Parameter):
    """Select few-shot exemplars for one query.

    ``config``: the selection settings (:class:`knapsack_dspy.selection.SelectionConfig`: selector, M,
    budget, attributes, ...); keyword arguments replace single settings of it
    (``SelectExemplars(selector="kate", max_exemplars=2)``; an unknown one is an error).
    ``embedder``: a ``TextEmbedder`` (default: all-MiniLM-L6-v2, cached).
    ``value``: ``value(query, demo) -> float``, what a pool demo is worth to a query (both mappings of the
    predictor's fields), in place of the cosine similarity of their embeddings (``None``).
    """

    def __init__(self, config: SelectionConfig | None = None, *, embedder: TextEmbedder | None = None,
                 value: Callable[[Mapping, Mapping], float] | None = None, **settings):
        super().__init__()
        self.config = (config if config is not None else SelectionConfig()).with_settings(**settings)
        self.embedder = embedder or TextEmbedder()
        self.value = value
        self._lock = threading.Lock()
        self._reset_learned()

    @property
    def attribute_source(self) -> str:
        """How query attributes are obtained ("classifier", "lm", "gold" or "none"), defaults resolved."""
        return self.config.resolved_attribute_source

    def _reset_learned(self):
        self.pool_columns = PoolColumns()  # the exemplar pool (inline or in a pool store): modules/pool_columns.py
        self.kinds = "none"  # where the pool's kinds come from: "given", "derived (...)" or "none" (not saved)
        self.resolved_budget: int | None = None
        self.token_model: str | None = None
        self.classifiers: dict[str, AttributeClassifier] = {}
        self.selector_state: dict = {}
        self.compile_report: dict = {}
        self.signature_fields: list[str] = []  # the fields of the predictor the pool was built for ([]: unchecked)
        self.input_fields: list[str] = []  # its input fields: a demo with the query's inputs is never selected
        self.value_name: str | None = None  # the value function's name when one was used (it is not saved)
        self.lm_attribute_predictor = None  # set by fit / load when attribute_source == "lm"
        self._selector_obj = None
        self._pool_obj = None
        self._canonical = None  # the pool's canonical demo order, computed when first needed
        self._input_index = None  # normalised inputs -> pool ids (same_inputs_ids), built when first needed

    @property
    def is_fitted(self) -> bool:
        return bool(len(self.pool_columns)) and self.resolved_budget is not None

    # the pool's columns (read-only: fit, update_pool and load_state replace the pool as a whole)
    @property
    def pool_ids(self) -> Sequence[str]:
        return self.pool_columns.ids

    @property
    def demos(self) -> Sequence[dict]:
        """The pool's demos, in the predictor's fields."""
        return self.pool_columns.demos

    @property
    def costs(self) -> Sequence[float]:
        """Each demo's token cost in the predictor's prompt (without a shared value: ``group_costs``)."""
        return self.pool_columns.costs

    @property
    def groups(self) -> Sequence[int]:
        """Demos sharing a field value (``shared_fields``): each demo's group, ``-1`` none; empty: nothing shared."""
        return self.pool_columns.groups

    @property
    def group_costs(self) -> Sequence[float]:
        return self.pool_columns.group_costs

    @property
    def pool_attributes(self) -> Mapping[str, Sequence[str]]:
        return self.pool_columns.attributes

    @property
    def doc_ids(self) -> Sequence[str]:
        return self.pool_columns.doc_ids

    @property
    def embed_texts(self) -> Sequence[str]:
        return self.pool_columns.embed_texts

    @property
    def programs(self) -> Sequence[str]:
        """Each exemplar's gold program / derivation (the selection-quality proxies read them)."""
        return self.pool_columns.programs

    @property
    def store(self):
        """The pool store holding the pool (a large pool), else ``None``: the pool is inline."""
        return self.pool_columns.store

    # -- compile-time ------------------------------------------------------------------------------
    def query_text(self, fields: Mapping[str, Any]) -> str:
        """The text embedded for a query or an exemplar: its ``embed_fields``, one per line."""
        return query_text(fields, self.config.embed_fields or ())

    def fit(self, pool_examples: PoolSpec | Sequence[dspy.Example], demos: Sequence[Mapping] | None = None,
            costs: Sequence[float] | None = None, *, budget: int, token_model: str | None = None,
            config: SelectionConfig | None = None, fit_inputs: Mapping | None = None,
            input_fields: Sequence[str] | None = None, signature_fields: Sequence[str] = (),
            prompt_format: str | None = None, progress: bool = False, **pool_fields: Any) -> SelectExemplars:
        """Store the pool and learn what selection needs, with ``config`` (default: the current one).

        ``pool_examples``: the exemplars, their demos in the predictor's fields, their token costs in that prompt and
        what else is known about them (:class:`~knapsack_dspy.modules.pool_spec.PoolSpec`: ids, attribute functions,
        inputs as queries give them, shared costs); ``fit(examples, demos, costs, ids=..., ...)`` is short for
        ``fit(PoolSpec(examples, demos, costs, ids=..., ...), ...)``. ``budget``: the resolved token budget;
        ``token_model``: the model the costs were counted for. ``fit_inputs``: what the selector's ``fit`` needs
        besides the pool (see ``ExemplarSelector.fit_on``). ``input_fields``: the predictor's input fields,
        embedded when the config's ``embed_fields`` is ``None``; ``signature_fields``: all its fields (checked at
        inference). ``prompt_format``: what else the costs were measured with (the adapter; part of a pool store's
        hash). A pool of more than ``pool_store.INLINE_POOL_LIMIT`` exemplars is written to a pool store (under
        ``pool_store.default_store_root()``) and the saved state references it by hash. ``progress``: progress
        bars while the pool is embedded."""
        spec = as_pool_spec(pool_examples, demos, costs, **pool_fields)
        if spec.costs is None:
            raise ValueError("fit needs the pool's token costs (PoolSpec.costs)")
        if not len(spec):
            raise ValueError("the exemplar pool is empty")
        config = config if config is not None else self.config
        if config.embed_fields is None:
            if not input_fields:
                raise ValueError("embed_fields is None (the predictor's input fields) but no input_fields were given")
            config = config.with_settings(embed_fields=tuple(input_fields))
        from knapsack_dspy.selection import pool_store  # a large pool's store: loaded when used

        with self._lock:
            self.config = config
            self._reset_learned()
            self.signature_fields = list(signature_fields)
            self.input_fields = list(input_fields or self.config.embed_fields or ())
            self.value_name = _function_name(self.value)
            own_demos = [dict(d) for d in spec.demos]  # the selection's own (a spec may be fitted again)
            self.pool_columns = PoolColumns(
                ids=spec.pool_ids(default=lambda position: position), demos=own_demos, costs=list(spec.costs),
                doc_ids=spec.doc_ids(), embed_texts=[self.query_text(d) for d in own_demos],
                programs=[solution_of(ex, spec.attributes or {}) for ex in spec.examples],
                attributes=self._pool_attributes(spec, progress),
                groups=list(spec.groups or ()), group_costs=list(spec.group_costs or ()),
                query_digests=query_digests_of(own_demos, spec.query_inputs, self.input_fields))
            self.resolved_budget = int(budget)
            self.token_model = token_model
            pool = self._pool(progress)
            if len(pool) > pool_store.INLINE_POOL_LIMIT:
                self._write_store(pool, self.prompt_format(prompt_format))
                pool = self._pool()
            if self.attribute_source == "classifier":
                from knapsack_dspy.selection.attribute_classifier import AttributeClassifier

                for attr in self.config.attributes:
                    if attr in self.pool_attributes:
                        self.classifiers[attr] = AttributeClassifier().fit(pool.embeddings, self.pool_attributes[attr])
            elif self.attribute_source == "lm":
                from knapsack_dspy.modules.lm_attribute_predictor import LMAttributePredictor

                self.lm_attribute_predictor = LMAttributePredictor(self.config.attributes).fit(list(spec.examples),
                                                                                             pool.embeddings)
            selector = self.config.build_selector()
        # Outside the lock: a scoring function may LM-evaluate a copy of the program while the selector fits.
        if selector.needs_fit:
            selector.fit(pool, **dict(fit_inputs or {}))
        with self._lock:
            self.selector_state = selector.get_state()
            self._selector_obj = selector
        return self

    def _pool_attributes(self, spec: PoolSpec, progress: bool) -> dict[str, list[str]]:
        """The pool attributes selection reads (the config's, the selector's and those ``spec`` gives functions for:
        the example's field of that name by default), each only when some exemplar has a value; the kinds derived
        from the pool when the selector covers kinds and none are given (sets ``self.kinds``)."""
        found: dict[str, list[str]] = {}
        wanted = (set(self.config.attributes) | set(spec.attributes or ())
                  | set(self.config.selector_class.pool_attributes)) - {SOLUTION}
        for attr in wanted:
            values = [spec.attribute(attr, ex) for ex in spec.examples]
            if any(v is not None and v != "" for v in values):
                found[attr] = ["" if v is None else str(v) for v in values]
        self.kinds = "given" if KIND in found else "none"
        if (self.config.derive_kinds and KIND in self.config.selector_class.pool_attributes
                and KIND not in found):
            derived = self._derive_kinds(spec.demos, progress)
            if derived is not None:
                found[KIND] = derived
        return found

    def _derive_kinds(self, demos: Sequence[Mapping], progress: bool) -> list[str] | None:
        """The pool's kinds from the pool itself (``attribute_classifier.derive_kinds``): k-means of the demos' outputs
        (their fields that are not inputs) as the embedder sees them; ``None`` when they cannot be told apart."""
        from knapsack_dspy.selection.attribute_classifier import derive_kinds

        outputs = [f for f in self.signature_fields if f not in set(self.input_fields)]
        texts = [query_text(demo, outputs) for demo in demos]
        if not outputs or not any(texts):
            return None
        derived = derive_kinds(_encode(self.embedder, texts, progress), seed=self.config.seed)
        if derived is None:
            return None
        self.kinds = f"derived ({derived.k} kinds from {', '.join(outputs)})"
        return list(derived.labels)

    def prompt_format(self, adapter: str | None = None) -> str:
        """What the pool's token costs depend on besides the demos (part of a pool store's hash)."""
        return json.dumps({"token_model": self.token_model, "signature_fields": self.signature_fields,
                           "input_fields": self.input_fields, "embed_fields": list(self.config.embed_fields or ()),
                           "shared_fields": list(self.config.shared_fields or ()), "adapter": adapter},
                          sort_keys=True)

    def _write_store(self, pool: ExemplarPool, prompt_format: str) -> None:
        """Put the pool (embedded: ``pool``) in a pool store and hold it from there."""
        from knapsack_dspy.selection.pool_store import default_store_root, write_store

        columns = self.pool_columns
        self._attach_store(write_store(default_store_root(), columns.records(self.input_fields), pool.embeddings,
                                       columns.costs, embedder=self.embedder.model_id, prompt_format=prompt_format,
                                       group_costs=columns.group_costs))

    def _attach_store(self, store) -> None:
        """Hold the pool from the pool store ``store`` (its columns memory-mapped, its demos read when selected)."""
        self._hold(PoolColumns.from_store(store))

    def _hold(self, columns: PoolColumns) -> None:
        """Hold the pool ``columns`` in place of the current one (what was computed from that is dropped)."""
        self.pool_columns = columns
        self._pool_obj = None
        self._input_index = None
        self._canonical = None

    def _pool(self, progress: bool = False) -> ExemplarPool:
        if self._pool_obj is None:
            if not len(self.pool_columns):
                raise NotCompiledError("SelectExemplars has no exemplar pool: compile the program "
                                       "(KnapsackFewShot.compile) or load a compiled one first")
            self._pool_obj = self.pool_columns.exemplar_pool(lambda texts: _encode(self.embedder, texts, progress))
        return self._pool_obj

    def _selector(self):
        if self._selector_obj is None:
            selector = self.config.build_selector()
            selector.set_state(self.selector_state)
            self._selector_obj = selector
        return self._selector_obj

    def update_pool(self, add_examples: PoolSpec | Sequence[Any] = (), add_demos: Sequence[Mapping] | None = None,
                    remove_ids: Sequence[str] = (), *, measure: Callable[[list[dict]], Sequence[float]],
                    add_inputs: Sequence[Mapping | None] | None = None, **pool_fields: Any) -> dict[str, int]:
        """Add exemplars and remove the pool ids ``remove_ids``, embedding and measuring (``measure(demos) -> costs``)
        only the added ones: a pool store is extended from the current one (``pool_store.extend_store``), an inline
        pool keeps its lists (its embeddings come again from the embedding cache). ``add_examples``: the exemplars
        to add, as ``fit`` takes them (a :class:`~knapsack_dspy.modules.pool_spec.PoolSpec` without costs: ids,
        attribute functions, ``query_inputs``), or their examples with ``add_demos`` and the spec's other fields as
        keywords (``add_inputs``: its ``query_inputs``). The attribute classifiers are kept (trained on the pool as
        compiled). Returns ``{"embedded", "measured", "size"}``. A selector that learned a set at compile time
        (``needs_fit``) or a pool with shared costs is compiled again instead (``ValueError``)."""
        if not self.is_fitted:
            raise NotCompiledError("update_pool needs a compiled selection (compile or load a program first)")
        if self.config.selector_class.needs_fit or len(self.groups):
            raise ValueError("update_pool: this selection learned from its pool at compile time (a fixed set or "
                             "shared costs): compile it again with the changed trainset")
        if isinstance(add_examples, PoolSpec) and add_demos is not None:
            raise TypeError("update_pool(PoolSpec(...), remove_ids=..., measure=...): after a PoolSpec, name "
                            "remove_ids (the second argument is the demos of examples given without one)")
        if add_inputs is not None:
            if "query_inputs" in pool_fields:
                raise TypeError("update_pool: give add_inputs or query_inputs, not both")
            pool_fields["query_inputs"] = add_inputs
        added = as_pool_spec(add_examples, add_demos, None, **pool_fields)
        if added.costs is not None or added.groups is not None or added.group_costs is not None:
            raise ValueError("update_pool measures the added demos itself (measure=) and adds no shared costs: give "
                             "a PoolSpec without costs, groups or group_costs")
        size = len(self.pool_ids)
        new_ids = added.pool_ids(default=lambda k: f"added-{size + k}")
        removed = {str(i) for i in remove_ids}
        unknown = sorted(removed - set(self.pool_ids))
        if unknown:
            raise ValueError(f"update_pool: ids not in the pool: {unknown[:5]}")
        kept_ids = [i for i in self.pool_ids if i not in removed]
        clash = sorted(set(new_ids) & set(kept_ids)) or sorted({i for i in new_ids if new_ids.count(i) > 1})
        if clash:
            raise ValueError(f"update_pool: ids already in the pool: {clash[:5]}")
        from knapsack_dspy.selection import pool_store  # a large pool's store: loaded when used

        names = sorted(self.pool_attributes)
        fields = self.input_fields
        columns = self.pool_columns
        records = [r for r in columns.records(fields) if r.id not in removed]  # a store's: read in one pass
        for pool_id, ex, demo, query, doc_id in zip(new_ids, added.examples, added.demos, added.inputs_as_queries(),
                                                    added.doc_ids(), strict=True):
            values = {name: added.attribute(name, ex) for name in names}
            records.append(pool_store.PoolRecord(pool_id, dict(demo), doc_id, self.query_text(demo),
                                                 solution_of(ex, added.attributes or {}),
                                                 {k: "" if v is None else str(v) for k, v in values.items()}, -1,
                                                 inputs_digest_of(demo, fields),
                                                 query_digest_of(demo, query, fields)))
        if not records:
            raise ValueError("update_pool: the pool would be empty")
        with self._lock:
            if columns.store is not None or len(records) > pool_store.INLINE_POOL_LIMIT:
                store, done = pool_store.extend_store(
                    pool_store.default_store_root(), columns.store, records, embed=self.embedder.encode,
                    measure=measure, embedder=self.embedder.model_id,
                    prompt_format=columns.store.prompt_format if columns.store is not None else self.prompt_format())
                self._attach_store(store)
            else:
                known = {pool_store.demo_key(d): float(c)
                         for i, d, c in zip(columns.ids, columns.demos, columns.costs, strict=True)
                         if i not in removed}
                fresh = list({pool_store.demo_key(r.demo): r for r in records
                              if pool_store.demo_key(r.demo) not in known}.values())
                known.update(zip([pool_store.demo_key(r.demo) for r in fresh],
                                 map(float, measure([r.demo for r in fresh]) if fresh else []), strict=True))
                old_texts = {t for i, t in zip(columns.ids, columns.embed_texts, strict=True) if i not in removed}
                self._hold(PoolColumns.from_records(records, [known[pool_store.demo_key(r.demo)] for r in records],
                                                    names))
                done = {"embedded": len({r.embed_text for r in records} - old_texts), "measured": len(fresh)}
            self._selector_obj = None
        return {**done, "size": len(records)}

    def show_fixed_set(self, ids: Sequence[str]) -> None:
        """From now on select exactly the pool exemplars ``ids`` for every query (less the query itself and its
        document's, cut to the budget): a fixed set. A scoring function rates a candidate set so, on a copy of
        the program (``KnapsackFewShot``'s LM-scored fixed-set search)."""
        unknown = [i for i in ids if i not in set(self.pool_ids)]
        if unknown:
            raise ValueError(f"show_fixed_set: ids not in the exemplar pool: {unknown[:5]}")
        from knapsack_dspy.selection.selectors.fixed_set import FixedSetSelector

        with self._lock:
            self.config = self.config.with_settings(selector=FixedSetSelector.name, selector_params={})
            self.selector_state = {"fixed_ids": list(ids)}
            self._selector_obj = None
    def candidate_search(self) -> str:
        """How a query's candidates are found in this pool: the nearest-neighbour index's backend, cells and
        calibrated recall, or exact search (``selectors.base.candidate_search``; the compile report's
        ``candidate_search``)."""
        with self._lock:
            return candidate_search(self._selector(), self._pool(), has_values=self.value is not None)

    def latency_model(self) -> LatencyModel | None:
        """How long a call is predicted to take (``SelectionConfig.latency_rates``, else the measured rates of
        the model the pool was compiled for; None when neither is known)."""
        from knapsack_dspy.llm.latency_rates import latency_rates
        from knapsack_dspy.selection.latency import LatencyModel

        rates = self.config.latency_rates or latency_rates(self.token_model)
        return None if rates is None else LatencyModel.from_dict(rates)

    def _canonical_keys(self, pool: ExemplarPool) -> np.ndarray:
        """The pool's canonical demo order (``demo_order="canonical"``), computed once per loaded pool."""
        with self._lock:
            keys = self.__dict__.get("_canonical")
            if keys is None or keys.shape != (len(pool),):
                keys = self._canonical = canonical_keys(pool)
            return keys

    def same_inputs_ids(self, fields: Mapping[str, Any]) -> set[str]:
        """Pool ids of the exemplars a query with these inputs is (every input field of the predictor equal, up to
        case and whitespace, to its demo's inputs or to its inputs as a query gives them: ``PoolColumns.
        query_digests``): the query itself when it is also in the pool. Never selected, whatever the hints say (a
        ``dspy.Evaluate`` over trainset questions, a valset overlapping the trainset, ``kdspy serve``)."""
        names = [name for name in self.input_fields if name in fields]
        if not names or len(names) < len(self.input_fields):
            return set()
        digest = inputs_digest(inputs_key(fields, names))
        if self.store is not None:  # looked up in the store (no pass over the pool)
            return set(self.store.ids_with_inputs(digest))
        with self._lock:
            index = self.__dict__.get("_input_index")
            if index is None:
                index = {}
                ids = self.pool_ids
                for key, row in self.pool_columns.digests_of_rows(self.input_fields):
                    index.setdefault(key, set()).add(ids[row])
                self._input_index = index
        return set(index.get(digest, ()))

    def pool(self) -> ExemplarPool:
        """The exemplar pool (embedding it on first use)."""
        with self._lock:
            return self._pool()

    # -- attributes --------------------------------------------------------------------------------
    def predict_attributes(self, embedding: np.ndarray, fields: Mapping[str, Any],
                           attribute_fields: Mapping[str, Any] | None = None) -> dict[str, str]:
        """The query's target attribute values: its gold ones (in ``fields``), the classifiers' prediction from
        the embedding, or the LM's from ``attribute_fields`` (default ``fields``)."""
        if self.attribute_source == "none":
            return {}
        if self.attribute_source == "gold":
            missing = [a for a in self.config.attributes if not fields.get(a)]
            if missing:
                raise ValueError(f"attribute_source='gold' needs the query's {missing} (pass them as inputs, or as "
                                 "selection_hints(attributes=...))")
            return {a: str(fields[a]) for a in self.config.attributes}
        if self.attribute_source == "lm":
            if self.lm_attribute_predictor is None:
                raise NotCompiledError("attribute_source='lm' needs the LM attribute predictor set by compile")
            return dict(self.lm_attribute_predictor(attribute_fields if attribute_fields is not None else fields))
        return {a: str(clf.predict(embedding[None, :])[0]) for a, clf in self.classifiers.items()}

    # -- inference -----------------------------------------------------------------------------------
    def forward(self, base_tokens: int = 0, id: str | None = None, doc_id: str | None = None, *,
                exclude_ids: Sequence[str] = (), attribute_fields: Mapping[str, Any] | None = None,
                shared_tokens: int = 0, evidence: EvidenceOffer | None = None, **fields):
        """Return ``dspy.Prediction(demos, ids, selection)`` for the query described by ``fields`` (at least the
        ``embed_fields``; gold attribute values for oracle selectors); ``base_tokens`` is the query prompt's own
        size, of which ``shared_tokens`` open every prompt (the system message: the declared shared prefix a
        latency budget does not price). ``id`` / ``doc_id``: the query's own exemplar and its document's are
        never chosen; nor are ``exclude_ids``. ``attribute_fields``: what LM attribute prediction reads (default:
        ``fields``).

        ``evidence``: the call's selectable fields, their pieces measured (``selectable_context.EvidenceOffer``,
        from ``SelectingPredict``): the demos and the pieces to show are then chosen together
        (``modules/evidence_selection.py``), ``base_tokens`` is the prompt with no piece, ``fields`` hold the
        selectable fields whole, and the prediction also has ``pieces`` (``{field: kept indices}``).

        The selection info has ``predicted_latency_s`` (and ``new_prompt_tokens``, the tokens after the declared
        shared prefix) when latency rates are known for the model (``latency_model``)."""
        if not self.is_fitted:
            raise NotCompiledError("SelectExemplars is not compiled: run KnapsackFewShot.compile or load a program")
        if self.value_name is not None and self.value is None:
            raise NotCompiledError(f"this selection was compiled with the value function {self.value_name!r}, which "
                                   "is code and not saved: give it again (load_compiled(..., value=...))")
        start = time.perf_counter()
        with self._lock:
            pool = self._pool()
            selector = self._selector()
        text = self.query_text(fields)
        if not text.strip():
            raise ValueError(f"the query has no text in {self.config.embed_fields}")
        embedding = self.embedder.encode([text])[0]
        targets = (self.predict_attributes(embedding, fields, attribute_fields)
                   if selector.uses_attributes else {})
        capacity = self.config.exemplar_capacity(self._budget() - int(base_tokens)
                                                 - self.config.reserve_output_tokens)
        excluded = ({str(i) for i in exclude_ids} | ({str(id)} if id is not None else set())
                    | self.same_inputs_ids(fields))
        values = (None if self.value is None else
                  np.asarray([float(self.value(fields, demo)) for demo in self.demos], dtype=float))
        latency = self.latency_model()
        new_capacity = float("inf")
        if self.config.latency_budget is not None:
            if latency is None:
                raise ValueError(f"latency_budget={self.config.latency_budget:g} s but no latency rates are known "
                                 f"for {self.token_model or 'the model'}: give SelectionConfig(latency_rates=...)")
            new_capacity = latency.new_tokens_within(self.config.latency_budget) - (int(base_tokens)
                                                                                     - int(shared_tokens))
        request = SelectionRequest(embedding=embedding, capacity=float(capacity), target_attributes=targets,
                                   exclude_ids=frozenset(excluded),
                                   doc_id=str(doc_id) if (doc_id is not None and self.config.exclude_same_doc)
                                   else None, seed=self.config.seed, key=text, values=values,
                                   new_token_capacity=new_capacity)
        if evidence is not None:
            from knapsack_dspy.modules.evidence_selection import select_with_evidence  # a call with pieces

            embedded = self.config.embed_fields or ()
            query = query_text(fields, [name for name in embedded if name not in evidence.fields]) or text
            return select_with_evidence(
                self, pool, selector, request, evidence, query=query, budget=self._budget(), capacity=capacity,
                base_tokens=int(base_tokens), shared_tokens=int(shared_tokens), latency=latency, start=start,
                canonical_keys=self._canonical_keys(pool) if self.config.demo_order == "canonical" else None)
        selection = selector.select(pool, within_new_tokens(selector, request))
        if self.config.demo_order == "canonical":
            selection = in_canonical_order(pool, selection, self._canonical_keys(pool))
        info = selection.as_dict(pool)
        if not selection.indices and selector.selects_demos and self.config.max_exemplars > 0:
            info["reason"] = self._empty_reason(pool, request, int(base_tokens), selection.reason)
        info.update(capacity=capacity, base_tokens=int(base_tokens), budget=self.resolved_budget,
                    predicted_attributes=targets, selection_ms=(time.perf_counter() - start) * 1e3,
                    prompt_tokens=int(base_tokens) + int(selection.total_cost))
        if latency is not None:
            shared = int(shared_tokens) + pool.cost_of(selection.indices[: selection.shared_prefix])
            info["new_prompt_tokens"] = int(info["prompt_tokens"] - shared)
            info["predicted_latency_s"] = round(latency.seconds(info["new_prompt_tokens"]), 3)
        if self.config.latency_budget is not None:
            info["latency_budget"] = self.config.latency_budget
        if self.config.exemplar_budget is not None:
            info["exemplar_budget"] = self.config.exemplar_budget
        shared_fields = self.config.shared_fields or ()
        demos = [dspy.Example(**(referring_demo(self.demos[i], shared_fields) if refers else self.demos[i]))
                 for i, refers in zip(selection.indices, selection.shared or [False] * len(selection.indices),
                                      strict=True)]
        return dspy.Prediction(demos=demos, ids=info["ids"], selection=info)

    def _budget(self) -> int:
        """The resolved token budget of a fitted or loaded selection."""
        if self.resolved_budget is None:
            raise NotCompiledError("SelectExemplars is not compiled: run KnapsackFewShot.compile or load a program")
        return self.resolved_budget

    def budget_shortfall(self, base_tokens: int) -> str | None:
        """Why no pool exemplar fits a prompt of ``base_tokens`` without demos (``None``: the cheapest fits)."""
        with self._lock:
            pool = self._pool()
        capacity = self.config.exemplar_capacity(self._budget() - int(base_tokens)
                                                 - self.config.reserve_output_tokens)
        request = SelectionRequest(embedding=np.zeros(pool.embeddings.shape[1]), capacity=float(capacity))
        reason = self._empty_reason(pool, request, int(base_tokens), "")
        return reason or None

    def _empty_reason(self, pool: ExemplarPool, request: SelectionRequest, base_tokens: int, reason: str) -> str:
        """Why a call sends no exemplar, with the numbers (``empty_selection.empty_reason``)."""
        from knapsack_dspy.modules.empty_selection import empty_reason

        return empty_reason(pool, request, budget=self._budget(), base_tokens=base_tokens,
                            reserve_output_tokens=self.config.reserve_output_tokens,
                            latency_budget=self.config.latency_budget, reason=reason)

    # -- dspy.Parameter state ----------------------------------------------------------------------------
    def dump_state(self, json_mode=True):
        from knapsack_dspy.saved_format import SELECT_EXEMPLARS_STATE_VERSION

        return {
            "version": SELECT_EXEMPLARS_STATE_VERSION,
            "config": self.config.to_dict(),
            "embedder_model": self.embedder.model_id,
            "token_model": self.token_model,
            "resolved_budget": self.resolved_budget,
            **self.pool_columns.to_state(),
            "classifiers": {k: v.get_state() for k, v in self.classifiers.items()},
            "selector_state": self.selector_state,
            "lm_attribute_predictor": (self.lm_attribute_predictor.get_state()
                                       if self.lm_attribute_predictor is not None else None),
            "signature_fields": self.signature_fields,
            "input_fields": self.input_fields,
            "value": self.value_name,
            "compile_report": self.compile_report,
        }

    def load_state(self, state, *, allow_unsafe_lm_state=False):
        """Load a saved state of any supported version (``select_exemplars_state``: its checks, its pool store and
        the migrations); a malformed state is a ``ValueError`` and leaves the module as it was."""
        from knapsack_dspy.modules.select_exemplars_state import read_state
        from knapsack_dspy.selection.attribute_classifier import AttributeClassifier

        saved = read_state(state)
        config = saved.config
        with self._lock:
            self.config = config
            if state["embedder_model"] != self.embedder.model_id:
                self.embedder = TextEmbedder(state["embedder_model"])
            self._reset_learned()
            self._hold(saved.pool)
            self.resolved_budget = state["resolved_budget"]
            self.token_model = state.get("token_model")
            self.classifiers = {k: AttributeClassifier.from_state(v) for k, v in state["classifiers"].items()}
            self.selector_state = dict(state.get("selector_state") or {})
            self.compile_report = dict(state.get("compile_report") or {})
            self.signature_fields = list(state.get("signature_fields") or [])
            # before version 4 the input fields were not saved: the embedded fields are the inputs by default
            self.input_fields = list(state.get("input_fields") or config.embed_fields or [])
            self.value_name = state.get("value")
            if state.get("lm_attribute_predictor") is not None:
                from knapsack_dspy.modules.lm_attribute_predictor import LMAttributePredictor

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
            elif key in ("config", "embedder", "value", "_pool_obj", "_selector_obj", "lm_attribute_predictor",
                         "_input_index"):
                setattr(clone, key, value)  # immutable after fit / shared resources
            else:
                setattr(clone, key, copy.deepcopy(value, memo))
        return clone

    def __getstate__(self):  # pickled by save(save_program=True) / dspy.load: a lock and caches are rebuilt
        state = super().__getstate__()
        for key in _UNPICKLED:
            state.pop(key, None)  # (a pool store's columns are re-read from it: PoolColumns.__getstate__)
        return state

    def __setstate__(self, state):
        super().__setstate__(state)
        self._lock = threading.Lock()
        self._pool_obj = None
        self._selector_obj = None
        self._input_index = None
        self._canonical = None


#: the attribute function that gives an exemplar's worked solution (a program, a derivation: ``compile_hooks``),
#: kept apart from the attributes for the selection-quality proxies; without one, the example's field of that name
SOLUTION = "solution"


def solution_of(example, functions: Mapping[str, Callable]) -> str:
    """An exemplar's worked solution (``SOLUTION``), ``""`` when it has none."""
    get = functions.get(SOLUTION)
    value = get(example) if get is not None else example.get(SOLUTION)
    return "" if value is None else str(value)


def query_text(fields: Mapping[str, Any], embed_fields: Sequence[str]) -> str:
    """The text embedded for a query or an exemplar: the ``embed_fields`` of ``fields`` (those present), one
    per line; a list is joined by spaces."""
    parts = []
    for name in embed_fields:
        value = fields.get(name)
        if value is None:
            continue
        parts.append(" ".join(map(str, value)) if isinstance(value, (list, tuple)) else str(value))
    return "\n".join(parts)


def _function_name(function) -> str | None:
    if function is None:
        return None
    return getattr(function, "__qualname__", None) or getattr(function, "__name__", None) or repr(function)


def _encode(embedder, texts, progress: bool) -> np.ndarray:
    """``embedder.encode(texts)``, with a progress bar when asked and the embedder takes ``progress``."""
    if progress:
        try:
            takes = "progress" in inspect.signature(embedder.encode).parameters
        except (TypeError, ValueError):
            takes = False
        if takes:
            return embedder.encode(texts, progress=True)
    return embedder.encode(texts)
