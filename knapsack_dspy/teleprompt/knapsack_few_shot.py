"""``KnapsackFewShot``: a DSPy teleprompter that compiles a pipeline's exemplar selection.

``KnapsackFewShot(...).compile(student, trainset=pool, valset=dev)`` returns a copy of ``student`` whose
``SelectExemplars`` module is ready: the pool rendered in the real prompt format, each exemplar's token
cost measured with the target model's tokenizer, the pool embedded, attribute classifiers trained, and
(for selectors that fit at compile time: static, hybrid, fixed) the compile-time set chosen.

The selection settings are the student's ``SelectExemplars.config`` (a ``SelectionConfig``); settings given
to ``KnapsackFewShot`` replace single ones of it (``dataclasses.replace``), and the search varies it the same
way. What a selector needs at compile time (validation query embeddings, a scoring function) is what its
class declares (``ExemplarSelector.fit_on``), never read from its name.

With a valset it can search (alpha, beta, M, or any other setting). Compiling must stay affordable when an
LM call takes 10-30 s, so the search is staged: every configuration is first scored by **model-free
proxies** on the validation subset (attribute match, budget coverage, program similarity of the chosen
exemplars to the query's gold program), and only the best ``max_lm_configs`` are evaluated with the LM
(``dspy.Evaluate`` on ``val_size`` examples; DSPy's LM cache makes repeats free). The compile report
(configs tried, proxy and LM scores, the choice, attribute-predictor accuracy, and what the compile cost in
LM calls, tokens and seconds) is kept on the program and saved beside it by ``save_program``.

The student must expose, besides one ``SelectExemplars`` sub-module:
``render_demo(example) -> dict`` (the pool example in the demo predictor's fields),
``prompt_inputs(example) -> dict`` (a query's inputs to that predictor) and ``demo_signature``.
``knapsack_dspy.modules.pipeline.DocumentQA`` does.
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
import math
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import dspy
import numpy as np
from dspy.teleprompt import Teleprompter
from tqdm.auto import tqdm

from knapsack_dspy.llm.call_counter import call_counts
from knapsack_dspy.llm.errors import describe_lm_error, lm_error_kind
from knapsack_dspy.llm.token_counter import get_token_counter
from knapsack_dspy.metrics.selection_proxies import selection_proxies
from knapsack_dspy.modules.prompt_cost import PromptCostModel
from knapsack_dspy.modules.select_exemplars import SelectExemplars
from knapsack_dspy.selection.config import SelectionConfig
from knapsack_dspy.selection.selectors import (
    FIT_ON_SCORING_FUNCTION,
    FIT_ON_VALIDATION_QUERIES,
    MODES,
    selector_for_mode,
)

logger = logging.getLogger(__name__)

DEFAULT_BUDGET = 4096  # when the config leaves the budget to the model and the model's context window is unknown
_SETTINGS = tuple(f.name for f in dataclasses.fields(SelectionConfig))
_REPORTED = ("alpha", "beta", "max_exemplars")  # settings every entry of the report's "configs" shows


class CompileError(ValueError):
    """The student or the data cannot be compiled (message says why)."""


def _progress(iterable, total: int, desc: str, enabled: bool):
    return tqdm(iterable, total=total, desc=desc, leave=False) if enabled else iterable


class KnapsackFewShot(Teleprompter):
    """Compile few-shot exemplar selection by knapsack ILP.

    Parameters
    ----------
    metric: ``metric(example, prediction, trace=None) -> float | bool`` for LM evaluation in the search
        (None: proxies only, no LM calls during compile).
    mode: "per_query" (SEER: a knapsack per query at inference), "static" (one set for every query,
        chosen at compile time by a knapsack over summed similarity to the validation queries) or
        "hybrid" (a static core of ``core_size`` plus per-query slots); it chooses the selector
        (``knapsack_dspy.selection.selectors.selector_for_mode``). None: the student's (or ``selector``'s).
    **settings: ``SelectionConfig`` settings replacing the student's (``selector``, ``max_exemplars``,
        ``budget``, ``reserve_output_tokens``, ``alpha``, ``beta``, ``attributes``, ``attribute_source``,
        ``knn_k``, ``max_per_doc``, ``core_size``, ``val_size``, ``seed``, ``selector_params``, ...).
        ``budget=None`` takes the model's context window (or 4096 when unknown).
    search_space: e.g. ``{"alpha": [0.5, 0.75], "beta": [0, 0.25], "max_exemplars": [4, 8]}`` (any
        ``SelectionConfig`` setting); every combination is scored by proxies; the best ``max_lm_configs`` are
        LM-evaluated if ``metric``.
    num_threads: threads of the LM evaluations (``dspy.Evaluate``).
    token_counter: a ``TokenCounter`` (default: ``get_token_counter(lm.model)``).
    lm_model: the model name whose tokenizer is used (default: the configured ``dspy.settings.lm``).
    """

    def __init__(self, metric: Callable | None = None, *, mode: str | None = None,
                 search_space: Mapping[str, Sequence] | None = None, max_lm_configs: int = 2, num_threads: int = 1,
                 token_counter: Any = None, lm_model: str | None = None, progress: bool = True, **settings):
        super().__init__()
        unknown = sorted(set(settings) - set(_SETTINGS))
        if unknown:
            raise CompileError(f"KnapsackFewShot: unknown argument {', '.join(map(repr, unknown))}; "
                               f"selection settings: {', '.join(_SETTINGS)}")
        if mode is not None and mode not in MODES:
            raise CompileError(f"mode must be one of {MODES}, got {mode!r}")
        self.metric = metric
        self.mode = mode
        self.settings = dict(settings)
        self.search_space = {k: list(v) for k, v in dict(search_space or {}).items() if v}
        unknown = sorted(set(self.search_space) - set(_SETTINGS))
        if unknown:
            raise CompileError(f"search_space keys must be selection settings ({', '.join(_SETTINGS)}); "
                               f"got {unknown}")
        self.max_lm_configs = max_lm_configs
        self.num_threads = num_threads
        self.token_counter = token_counter
        self.lm_model = lm_model
        self.progress = progress

    # ------------------------------------------------------------------------------------------------
    def selection_config(self, student_config: SelectionConfig) -> SelectionConfig:
        """The config this teleprompter compiles with: the student's, with this teleprompter's settings (and
        the selector its ``mode`` names) in place of the student's."""
        settings = dict(self.settings)
        try:
            if self.mode is not None:
                settings["selector"] = selector_for_mode(self.mode, settings.get("selector"))
            return student_config.with_settings(**settings)
        except ValueError as exc:
            raise CompileError(str(exc)) from None

    def _counter(self):
        if self.token_counter is not None:
            return self.token_counter, self.lm_model or getattr(self.token_counter, "model", None)
        model = self.lm_model or getattr(dspy.settings.lm, "model", None)
        if model is None:
            raise CompileError("no LM configured: call dspy.configure(lm=...) or pass lm_model / token_counter")
        return get_token_counter(model), model

    @staticmethod
    def _find_selector(program) -> SelectExemplars:
        found = [m for _, m in program.named_sub_modules() if isinstance(m, SelectExemplars)]
        if len(found) != 1:
            raise CompileError(f"the student must contain exactly one SelectExemplars module, found {len(found)}")
        for hook in ("render_demo", "prompt_inputs", "demo_signature"):
            if not hasattr(program, hook):
                raise CompileError(f"the student {type(program).__name__} lacks {hook!r} "
                                   "(see knapsack_dspy.modules.pipeline.DocumentQA)")
        return found[0]

    # ------------------------------------------------------------------------------------------------
    def compile(self, student, *, trainset, teacher=None, valset=None, **kwargs):
        started = time.perf_counter()
        trainset = list(trainset or [])
        if not trainset:
            raise CompileError("trainset (the exemplar pool) is empty")
        program = student.deepcopy()
        select = self._find_selector(program)
        base_config = self.selection_config(select.config)
        configs = self._configs(base_config)
        counter, model = self._counter()
        budget = int(base_config.budget or getattr(counter, "context_window", None) or DEFAULT_BUDGET)
        cost_model = PromptCostModel(program.demo_signature, counter)

        val = list(valset or [])
        prefetch = getattr(program, "prefetch_embeddings", None)  # optional: one batch instead of many calls
        if callable(prefetch):
            prefetch([*trainset, *val], progress=self.progress)
        demos = [program.render_demo(ex) for ex in _progress(trainset, len(trainset), "rendering pool", self.progress)]
        costs = [cost_model.demo_cost(d) for d in _progress(demos, len(demos), "measuring token costs", self.progress)]

        rng = np.random.default_rng(base_config.seed)
        val_subset = ([val[i] for i in sorted(rng.choice(len(val), base_config.val_size, replace=False))]
                      if len(val) > base_config.val_size else val)
        val_base = [cost_model.base_tokens(program.prompt_inputs(ex)) for ex in val_subset]

        report: dict[str, Any] = {"mode": base_config.selector_class.mode, "selector": base_config.selector,
                                  "budget": budget, "token_model": model, "pool_size": len(trainset),
                                  "valset_size": len(val), "val_subset_size": len(val_subset), "configs": []}
        lm_before = call_counts()

        # Stage 1: fit every configuration once (no LM calls unless a fixed set is LM-scored) and score it
        # with model-free proxies; keep each fitted state to restore later instead of refitting.
        snapshots = []
        for point, config in configs:
            fit_inputs = self._fit_inputs(select, config, program, val_subset or trainset, val_base, budget)
            select.fit(trainset, demos, costs, budget=budget, token_model=model, config=config,
                       fit_inputs=fit_inputs)
            snapshots.append(select.dump_state())
            entry = {"config": point}
            if val_subset:
                entry["proxies"] = self._proxy(select, program, val_subset, val_base)
            report["configs"].append(entry)

        # Stage 2: LM evaluation of the best configurations by proxy.
        ranked = sorted(range(len(configs)), key=lambda i: -report["configs"][i].get("proxies", {}).get("score", 0.0))
        if self.metric is not None and val_subset and len(configs) > 1:
            for i in ranked[: self.max_lm_configs]:
                select.load_state(snapshots[i])
                report["configs"][i]["lm_score"] = self._lm_score(program, val_subset)
        chosen_index = max(ranked, key=lambda i: (report["configs"][i].get("lm_score", -math.inf),
                                                  report["configs"][i].get("proxies", {}).get("score", 0.0),
                                                  -ranked.index(i)))
        select.load_state(snapshots[chosen_index])
        report["chosen"] = dict(configs[chosen_index][0])
        if val_subset:
            report["attribute_accuracy"] = self._attribute_accuracy(select, program, val_subset)
        report["cost"] = {**_lm_cost(lm_before), "seconds": round(time.perf_counter() - started, 2),
                          "pool_tokens_measured": int(sum(costs))}
        select.compile_report = report
        program.compile_report = report
        program._compiled = True
        return program

    def _configs(self, base: SelectionConfig) -> list[tuple[dict, SelectionConfig]]:
        """(the point as the report shows it, its config) for every combination of the search space."""
        keys = sorted(self.search_space)
        out = []
        for values in itertools.product(*(self.search_space[k] for k in keys)):
            point = {name: getattr(base, name) for name in _REPORTED}
            point.update(zip(keys, values, strict=True))
            try:
                out.append((point, base.with_settings(**dict(zip(keys, values, strict=True)))))
            except ValueError as exc:
                raise CompileError(f"search_space point {point}: {exc}") from None
        return out

    def _fit_inputs(self, select, config: SelectionConfig, program, val_examples, val_base, budget) -> dict:
        """What the selector's ``fit`` needs besides the pool, as its class declares (``fit_on``)."""
        fit_on = config.selector_class.fit_on
        if fit_on is None:
            return {}
        # A compile-time set must fit typical queries: size it for the 90th percentile of the validation
        # prompts (longer queries drop its least similar exemplars at inference).
        capacity = budget - (float(np.percentile(val_base, 90)) if val_base else 0) - config.reserve_output_tokens
        if fit_on == FIT_ON_VALIDATION_QUERIES:
            texts = [select.query_text(program.prompt_inputs(ex) | dict(ex)) for ex in val_examples]
            return {"val_embeddings": select.embedder.encode(texts), "capacity": capacity}
        if fit_on == FIT_ON_SCORING_FUNCTION:
            if self.metric is None:
                def score(indices):
                    return _fixed_set_proxy(select, indices, val_examples)
            else:  # SEER's Fixed set baseline: the best of N random sets by validation accuracy
                def score(indices):
                    probe = program.deepcopy()
                    self._find_selector(probe).show_fixed_set([select.pool_ids[i] for i in indices])
                    return self._lm_score(probe, val_examples)
            return {"score_fn": score, "capacity": capacity}
        raise CompileError(f"selector {config.selector!r} declares fit_on={fit_on!r}, which compile cannot provide")

    def _proxy(self, select, program, val_subset, val_base) -> dict:
        rows = []
        for ex, base in zip(val_subset, val_base, strict=True):
            pred = select(base_tokens=base, id=ex.get("id"), doc_id=ex.get("doc_id"), **_query_fields(ex))
            rows.append((ex, pred.selection))
        return selection_proxies(rows, select, attributes=select.config.attributes)

    def _lm_score(self, program, val_subset) -> float:
        """The metric's score of ``program`` on ``val_subset``. ``dspy.Evaluate`` counts an example whose LM
        call failed as a zero and goes on; a score built on questions that were never asked would steer the
        search, so an LM failure (after DSPy's retries) stops the compile with a :class:`CompileError` that
        says what failed and what to do."""
        failures: list[BaseException] = []

        def asked(**inputs):
            if failures:  # the LM failed (after DSPy's retries): ask nothing more, the compile stops below
                return dspy.Prediction()
            try:
                return program(**inputs)
            except Exception as exc:
                if lm_error_kind(exc) is None:
                    raise
                failures.append(exc)
                return dspy.Prediction()

        evaluate = dspy.Evaluate(devset=val_subset, metric=self.metric, num_threads=self.num_threads,
                                 display_progress=self.progress, provide_traceback=False)
        score = float(evaluate(asked).score)
        if failures:
            raise CompileError(f"the LM failed while the search scored a configuration on {len(val_subset)} "
                               f"validation questions: {describe_lm_error(failures[0])}")
        return score

    def _attribute_accuracy(self, select, program, val_subset) -> dict:
        out = {}
        if select.attribute_source in ("none", "gold"):
            return out
        for attr in select.config.attributes:
            golds = [ex.get(attr) for ex in val_subset]
            if not any(golds):
                continue
            fields = [_query_fields(ex) for ex in val_subset]
            embeddings = select.embedder.encode([select.query_text(f) for f in fields])
            preds = [select.predict_attributes(e, f).get(attr) for e, f in zip(embeddings, fields, strict=True)]
            pairs = [(p, g) for p, g in zip(preds, golds, strict=True) if g]
            out[attr] = {"source": select.attribute_source, "accuracy": sum(p == g for p, g in pairs) / len(pairs),
                         "n": len(pairs)}
        return out


def _query_fields(example) -> dict:
    """A validation example's fields as the selector sees them (inputs plus gold attributes)."""
    return {k: v for k, v in dict(example).items() if k not in ("id", "doc_id")}


def _fixed_set_proxy(select, indices, val_examples) -> float:
    """Mean similarity of a candidate fixed set to the validation queries (model-free)."""
    if not indices:
        return 0.0
    pool = select.pool()
    texts = [select.query_text(_query_fields(ex)) for ex in val_examples]
    q = select.embedder.encode(texts)
    return float((pool.embeddings[list(indices)] @ q.T).mean())


def _lm_cost(before) -> dict[str, Any]:
    """What the LM side of a compile cost since ``before``: calls that reached a provider, answers served by the
    cache, failed attempts (retried), their prompt / completion tokens and LiteLLM's dollar cost. Calls made
    by LMs that bypass LiteLLM (e.g. ``DummyLM``) are not seen."""
    spent = call_counts() - before
    return {"lm_calls": spent.calls, "lm_cache_hits": spent.cache_hits, "lm_failed_attempts": spent.failures,
            "prompt_tokens": spent.prompt_tokens, "completion_tokens": spent.completion_tokens,
            "cost_usd": round(spent.cost, 6)}
