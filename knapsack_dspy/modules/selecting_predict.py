"""``SelectingPredict``: a ``dspy.Predict`` that chooses its few-shot demos for every call under a token budget.

``KnapsackFewShot.compile`` puts one in place of each predictor it compiles (same signature, LM config and
demos); it is still a ``dspy.Predict``, so DSPy's other optimizers see and change it as any predictor
(instructions by MIPROv2 / GEPA, fixed demos by LabeledFewShot / BootstrapFewShot).

At call time, ``forward(**inputs)``:

- with ``demos=`` given explicitly: sends exactly those (no selection);
- otherwise sends the predictor's own ``demos`` (set by another optimizer: a shared prefix, counted in the
  budget) followed by the exemplars its ``SelectExemplars`` (``self.selection``) chooses for this query (a
  static set or hybrid core first, in one order; the per-query ones least similar first). For a provider whose
  prompt cache needs an explicit breakpoint (Anthropic), one is put after the shared prefix
  (``llm.prompt_cache``). The capacity is ``budget - tokens of this prompt without the selected demos
  (measured now, with the current signature, so changed instructions keep the budget exact) - reserve``;
- when an input is selectable (a ``selectable_context.Pieces`` value, or a list in a field of the config's
  ``context_fields``), the demos and the pieces of that input to show are chosen together: the base prompt shows
  no piece, each piece's cost is measured in the prompt format (``selectable_context.measure_pieces``), the
  prompt with the chosen demos and pieces is measured again (a repair drops items while it exceeds the budget),
  and the call sends the field cut to the chosen pieces in document order (``docs/core.md``, "Selectable
  context"). A call with ``demos=`` given shows every piece. A program with no selectable input selects exactly as
  before.

The demos go to that one call; nothing shared is mutated, so threaded ``dspy.Evaluate`` is safe. Hints about
the query that are not inputs (its id and document, gold attributes) come from
``selection_context.selection_hints``; what was chosen goes to ``selection_context.selection_log``, with
``token_count``: ``"exact"`` (the model's own tokenizer) or ``"estimate"`` (a model without a known tokenizer,
counted with ``cl100k_base``: ``prompt_tokens`` and ``within_budget`` are then approximate), and with what every
prompt of the signature opens with: ``instruction_tokens`` (the system message's tokens) and ``instructions_sha256``
(its text's sha256: arms meant to send the same instructions can be checked to).

The adapter is pinned: the one the costs were measured with (a ``ChatAdapter`` without its JSON fallback,
unless compile was given another), because a fallback re-formats the prompt and breaks the accounting.
"""

from __future__ import annotations

import asyncio
import copy
import hashlib
import importlib
import threading
from collections.abc import Mapping
from typing import Any

import dspy
from dspy.signatures.signature import ensure_signature

from knapsack_dspy.llm.prompt_cache import cache_breakpoint
from knapsack_dspy.llm.token_counter import get_token_counter, token_count_kind
from knapsack_dspy.modules.prompt_cost import PromptCostModel, pinned_adapter
from knapsack_dspy.modules.select_exemplars import NotCompiledError, SelectExemplars
from knapsack_dspy.modules.selection_context import (
    SelectionRecord,
    current_hints,
    record_selection,
)

__all__ = ["PLAIN_LOAD_MESSAGE", "SelectingPredict", "adapter_from_state", "adapter_state"]

_OWN_STATE = ("selection", "adapter", "predictor_name")
#: What a plain ``dspy.Predict`` says when it is given a selecting predictor's saved state (``MyProgram().load(
#: "p.json")``): DSPy's ``Predict.load_state`` has no hook, and would keep the demos and drop the selection (a
#: silent zero-shot program). The one check it runs on a state we write is its decision-field validation, so the
#: saved state carries this marker there: a plain predictor refuses it with this line, ``SelectingPredict``
#: removes it before loading (``tests/optimizer/test_knapsack_plain_load.py``).
PLAIN_LOAD_MESSAGE = ("saved by a knapsack_dspy SelectingPredict (per-query demo selection): load it with "
                      "KnapsackFewShot.load(YourProgram(), path) or knapsack_dspy.load_compiled, not "
                      "YourProgram().load(path), which would drop the selection")


class SelectingPredict(dspy.Predict):
    """A ``dspy.Predict`` whose demos are selected per call (see the module docstring).

    ``selection``: the ``SelectExemplars`` holding the pool and settings (``KnapsackFewShot.compile`` fits it).
    ``adapter``: the adapter formatting (and measuring) the prompts; default ``pinned_adapter()``.
    ``token_counter``: counts the target model's tokens (default: ``get_token_counter`` of the model the
    pool was measured for).
    ``predictor_name``: the predictor's name in its program (shown in selection records).
    """

    def __init__(self, signature, selection: SelectExemplars | None = None, *, adapter: Any = None,
                 token_counter: Any = None, predictor_name: str = "", callbacks=None, **config):
        super().__init__(signature, callbacks=callbacks, **config)
        self.selection = selection if selection is not None else SelectExemplars()
        self.adapter = pinned_adapter(adapter)
        self.predictor_name = predictor_name
        self._token_counter = token_counter
        self._cost_model: PromptCostModel | None = None
        self._cost_lock = threading.Lock()

    @classmethod
    def replacing(cls, predictor: dspy.Predict, selection: SelectExemplars | None = None, **kwargs) -> SelectingPredict:
        """A selecting predictor in place of ``predictor``: same signature, LM config, LM, demos and callbacks."""
        new = cls(predictor.signature, selection, callbacks=list(getattr(predictor, "callbacks", []) or []),
                  **dict(predictor.config), **kwargs)
        new.demos = list(predictor.demos)
        new.lm = predictor.lm
        new.fields = dict(getattr(predictor, "fields", {}) or {})
        return new

    # -- what DSPy's optimizers reset --------------------------------------------------------------------
    def reset(self):
        """Forget the demos another optimizer set (DSPy's ``reset_copy``), keep the compiled selection: it is
        what this predictor is, and ``LabeledFewShot`` / ``BootstrapFewShot`` reset their student first."""
        super().reset()

    # -- token accounting --------------------------------------------------------------------------------
    @property
    def token_counter(self):
        if self._token_counter is None:
            model = self.selection.token_model
            if not model:
                raise NotCompiledError("SelectingPredict has no token counter: compile it, load a compiled "
                                       "program, or pass token_counter=")
            self._token_counter = get_token_counter(model)
        return self._token_counter

    @token_counter.setter
    def token_counter(self, counter):
        with self._cost_lock:
            self._token_counter = counter
            self._cost_model = None

    def cost_model(self, signature=None) -> PromptCostModel:
        """Token counts of this predictor's prompts (``signature``: default the current one)."""
        signature = self.signature if signature is None else signature
        with self._cost_lock:
            model = self._cost_model
            if model is None or model.signature is not signature:
                model = self._cost_model = PromptCostModel(signature, self.token_counter, self.adapter)
            return model

    # -- selection -----------------------------------------------------------------------------------------
    def select_demos(self, **kwargs) -> SelectionRecord:
        """The demos a call with these inputs sends (this predictor's own demos, then the selected ones) and the
        selection info: no LM call. ``kwargs`` as for ``forward`` (``signature=`` honoured)."""
        signature = ensure_signature(kwargs.get("signature", self.signature))
        self._check_fields(signature)
        inputs = {k: v for k, v in kwargs.items() if k in signature.input_fields}
        fixed = list(self.demos)
        hints = current_hints()
        costs = self.cost_model(signature)
        from knapsack_dspy.modules.selectable_context import Pieces, selectable_fields  # loaded at the first call

        pieces = selectable_fields(inputs, self.selection.config.context_fields)
        if any(len(p) for p in pieces.values()):
            return self._select_with_pieces(inputs, pieces, fixed, hints, costs)
        shown = {name: p.whole() for name, p in pieces.items() if isinstance(inputs[name], Pieces)}
        inputs = {**inputs, **shown}
        base = costs.prompt_tokens(inputs, [_fields(d) for d in fixed])
        shared = costs.prefix_tokens([_fields(d) for d in fixed]) if self.selection.latency_model() else 0
        chosen = self.selection(base_tokens=base, id=hints.id, doc_id=hints.doc_id,
                                exclude_ids=self._fixed_ids(fixed), attribute_fields=hints.fields or None,
                                shared_tokens=shared, **inputs, **hints.attributes)
        info = dict(chosen.selection, predictor=self.predictor_name, fixed_demos=len(fixed),
                    token_count=token_count_kind(self.token_counter),  # "estimate": within_budget is approximate
                    **_instructions(costs))
        return SelectionRecord(self.predictor_name, [*fixed, *chosen.demos], info, shown)

    def _select_with_pieces(self, inputs: dict, pieces: dict, fixed: list, hints,
                            costs: PromptCostModel) -> SelectionRecord:
        """``select_demos`` for a call with selectable inputs (``pieces``: ``{field: Pieces}``): the demos and the
        pieces chosen together (the base prompt shows no piece; each piece measured in the prompt format; the chosen
        prompt measured again)."""
        from knapsack_dspy.modules.selectable_context import EvidenceOffer, measure_pieces

        fixed_fields = [_fields(d) for d in fixed]
        empty = {name: p.show(()) for name, p in pieces.items()}
        base = costs.prompt_tokens({**inputs, **empty}, fixed_fields)
        shared = costs.prefix_tokens(fixed_fields) if self.selection.latency_model() else 0

        def measure(demos, kept) -> int:  # the real prompt with these demos and the pieces kept
            shown = {name: p.show(kept.get(name, ())) for name, p in pieces.items()}
            return costs.prompt_tokens({**inputs, **shown}, [*fixed_fields, *(_fields(d) for d in demos)])

        offer = EvidenceOffer(pieces, {name: measure_pieces(costs, name, p) for name, p in pieces.items()}, measure,
                              instruction_tokens=costs.prefix_tokens([]))
        whole = {name: p.whole() for name, p in pieces.items()}
        chosen = self.selection(base_tokens=base, id=hints.id, doc_id=hints.doc_id,
                                exclude_ids=self._fixed_ids(fixed), attribute_fields=hints.fields or None,
                                shared_tokens=shared, evidence=offer, **{**inputs, **whole}, **hints.attributes)
        info = dict(chosen.selection, predictor=self.predictor_name, fixed_demos=len(fixed),
                    token_count=token_count_kind(self.token_counter), **_instructions(costs))
        shown = {name: p.show(chosen.pieces[name]) for name, p in pieces.items()}
        return SelectionRecord(self.predictor_name, [*fixed, *chosen.demos], info, shown)

    def _check_fields(self, signature) -> None:
        fitted = self.selection.signature_fields
        if fitted and list(signature.fields) != fitted:
            raise ValueError(f"predictor {self.predictor_name or type(self).__name__}: its signature's fields "
                             f"{list(signature.fields)} are not the ones its exemplar pool was compiled for "
                             f"{fitted}; instructions may change after KnapsackFewShot, fields may not: "
                             "compile again")

    def _fixed_ids(self, fixed) -> list[str]:
        """Pool exemplars already among the fixed demos (same id, or the same fields): never selected twice."""
        if not fixed:
            return []
        selection = self.selection
        ids = {str(d.get("id")) for d in fixed if d.get("id") is not None}
        shown = [_fields(d) for d in fixed]
        for pool_id, demo in zip(selection.pool_ids, selection.demos, strict=True):
            if any(all(s.get(k) == v for k, v in demo.items()) for s in shown):
                ids.add(pool_id)
        return sorted(ids & set(selection.pool_ids))

    # -- inference -----------------------------------------------------------------------------------------
    def _prepared(self, kwargs: dict) -> dict:
        if "demos" in kwargs:  # exactly those demos; a Pieces input shows every piece
            from knapsack_dspy.modules.selectable_context import Pieces

            return {k: v.whole() if isinstance(v, Pieces) else v for k, v in kwargs.items()}
        record = self.select_demos(**kwargs)
        record_selection(record)
        # the demos every prompt opens with: this predictor's own, then a static set / hybrid core
        shared = record.info.get("fixed_demos", 0) + record.info.get("shared_prefix", 0)
        lm = self.lm or dspy.settings.lm
        breakpoint_settings = cache_breakpoint(getattr(lm, "model", None), shared)
        if breakpoint_settings:
            kwargs = {**kwargs, "config": {**breakpoint_settings, **dict(kwargs.get("config") or {})}}
        return {**kwargs, **record.inputs, "demos": record.demos}

    def forward(self, **kwargs):
        kwargs = self._prepared(kwargs)
        with dspy.context(adapter=self.adapter):
            return super().forward(**kwargs)

    async def aforward(self, **kwargs):
        # Selection is CPU work (an embedding, a small ILP): in a worker thread, with this task's context.
        kwargs = await asyncio.to_thread(self._prepared, kwargs)
        with dspy.context(adapter=self.adapter):
            return await super().aforward(**kwargs)

    # -- state ---------------------------------------------------------------------------------------------
    def dump_state(self, json_mode=True):
        state = super().dump_state(json_mode=json_mode)
        state.update(selection=self.selection.dump_state(json_mode=json_mode), adapter=adapter_state(self.adapter),
                     predictor_name=self.predictor_name)
        state["fields"] = {**dict(state.get("fields") or {}), PLAIN_LOAD_MESSAGE: {}}
        return state

    def load_state(self, state: dict, *, allow_unsafe_lm_state: bool = False) -> SelectingPredict:
        own = {k: state[k] for k in _OWN_STATE if k in state}
        if "selection" not in own:
            raise ValueError("not a SelectingPredict state (no 'selection'): was this predictor compiled by "
                             "KnapsackFewShot?")
        base = {k: v for k, v in state.items() if k not in _OWN_STATE}
        fields = {k: v for k, v in dict(base.get("fields") or {}).items() if k != PLAIN_LOAD_MESSAGE}
        if fields:
            base["fields"] = fields
        else:
            base.pop("fields", None)
        super().load_state(base, allow_unsafe_lm_state=allow_unsafe_lm_state)
        self.selection.load_state(own["selection"])
        if own.get("adapter") is not None:
            self.adapter = pinned_adapter(adapter_from_state(own["adapter"]))  # older programs: DSPy's own class
        self.predictor_name = own.get("predictor_name") or self.predictor_name
        with self._cost_lock:
            self._cost_model = None
        return self

    def __getstate__(self):  # save(save_program=True) / dspy.load: the lock and the cost cache are rebuilt
        state = super().__getstate__()
        state.pop("_cost_lock", None)
        state.pop("_cost_model", None)
        return state

    def __setstate__(self, state):
        super().__setstate__(state)
        self._cost_lock = threading.Lock()
        self._cost_model = None

    def __deepcopy__(self, memo):
        clone = self.__class__.__new__(self.__class__)
        memo[id(self)] = clone
        for key, value in self.__dict__.items():
            if key == "_cost_lock":
                clone._cost_lock = threading.Lock()
            elif key in ("_token_counter", "_cost_model", "adapter", "lm"):
                setattr(clone, key, value)  # shared: process-wide tokenizer handles, stateless formatting, the LM
            else:
                setattr(clone, key, copy.deepcopy(value, memo))
        return clone


def _fields(demo) -> dict:
    return dict(demo.toDict() if hasattr(demo, "toDict") else demo)


def _instructions(costs: PromptCostModel) -> dict:
    """What every prompt of the signature opens with: ``instruction_tokens`` (the system message's tokens) and
    ``instructions_sha256`` (its text's sha256: arms that must send the same instructions can be checked)."""
    return {"instruction_tokens": int(costs.prefix_tokens([])),
            "instructions_sha256": hashlib.sha256(costs.instructions().encode("utf-8")).hexdigest()}


def adapter_state(adapter) -> dict:
    """An adapter as JSON: its class (and whether a ChatAdapter falls back to JSON)."""
    cls = type(adapter)
    state: dict[str, str | bool] = {"class": f"{cls.__module__}:{cls.__qualname__}"}
    if hasattr(adapter, "use_json_adapter_fallback"):
        state["use_json_adapter_fallback"] = bool(adapter.use_json_adapter_fallback)
    return state


def adapter_from_state(state: Mapping) -> Any:
    """The adapter ``adapter_state`` described: DSPy's own adapters (and this package's) are rebuilt."""
    path = str(state.get("class", ""))
    module, _, name = path.partition(":")
    if not (module.startswith("dspy.") or module.startswith("knapsack_dspy.")) or not name:
        raise ValueError(f"adapter {path!r} cannot be rebuilt from a saved program (only DSPy's adapters can); "
                         "load it into a student whose predictors already use it")
    cls = getattr(importlib.import_module(module), name)
    adapter = cls()
    if "use_json_adapter_fallback" in state and hasattr(adapter, "use_json_adapter_fallback"):
        adapter.use_json_adapter_fallback = bool(state["use_json_adapter_fallback"])
    return adapter
