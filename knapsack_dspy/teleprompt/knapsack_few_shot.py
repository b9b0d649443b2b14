"""``KnapsackFewShot``: a DSPy teleprompter that gives any program's predictors per-query few-shot selection.

``KnapsackFewShot(...).compile(student, trainset=pool, valset=dev)`` returns a copy of ``student`` in which
every predictor (``student.named_predictors()``, or the names given as ``predictors=``) is replaced by a
``SelectingPredict`` (same signature, LM config and demos) that chooses its demos for each call: the pool
drawn from the trainset in that predictor's own fields (``predictor_pools``), each demo's token cost measured
as the pinned adapter formats it for the target model's tokenizer, the pool embedded, attribute classifiers
trained, and (for selectors that fit at compile time: static, hybrid, fixed) the compile-time set chosen.

A plain ``dspy.ChainOfThought("question -> answer")`` compiles; a program with several predictors gets one
selection each (own pool, budget, M). The student may offer hooks (all optional; declared as protocols in
``modules/compile_hooks.py``):

- ``demo_for(predictor_name, example) -> dspy.Example | None``: the example as a demo of that predictor
  (``None``: not in its pool); default: the example restricted to the signature's fields;
- ``inputs_for(predictor_name, example) -> dict | None``: a validation query's inputs to that predictor;
- ``selection_config(predictor_name) -> SelectionConfig | None``: that predictor's settings;
- ``embedder``: an object with ``encode(texts)`` used for selection (e.g. shared with retrieval);
- ``prefetch_embeddings(examples, progress=False)``: embed everything in one batch first;
- sub-modules with ``fit_on_trainset(trainset, embedder)`` are fitted on the trainset (e.g. a router).

The selection settings of a predictor are, in this order: ``config`` given here (one ``SelectionConfig`` for
all, or ``{name: SelectionConfig}``), else the student's ``selection_config`` hook, else ``SelectionConfig()``;
settings given as keywords (and ``mode``) replace single ones of it, and the search varies it the same way.
What a selector needs at compile time (validation query embeddings, a scoring function) is what its class
declares (``ExemplarSelector.fit_on``), never read from its name.

With a valset it can search (alpha, beta, M, or any other setting), per predictor. Compiling must stay
affordable when an LM call takes 10-30 s, so the search is staged: every configuration is first scored by
**model-free proxies** on the validation subset (attribute match, budget coverage, program similarity of the
chosen exemplars to the query's gold program), and only the best ``max_lm_configs`` are evaluated with the LM
(``dspy.Evaluate`` on ``val_size`` examples). The compile report (per predictor: configs tried, proxy and LM
scores, the choice, attribute-predictor accuracy; and what the compile cost in LM calls, tokens and seconds)
is kept on the program (``program.compile_report``) and saved with it.

Compiling one predictor (``_compile_predictor``) is four steps, each in a module of its own: **measure** its pool's
token costs (``pool_measurement``), **sample** its validation queries (``query_samples``), **search** its settings
(``settings_search``) and **report** (``compile_report``); ``compile_target`` holds what the student tells about
the predictor, ``errors`` what the teleprompter raises and warns.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import dspy
from dspy.teleprompt import Teleprompter

from knapsack_dspy.embeddings import TextEmbedder
from knapsack_dspy.llm.errors import LLMConfigError
from knapsack_dspy.llm.token_counter import get_token_counter
from knapsack_dspy.modules.compile_hooks import (
    FitsOnTrainset,
    HasEmbedder,
    PoolAttributesFor,
    PrefetchesEmbeddings,
    ScoresSelections,
    SelectionConfigFor,
)
from knapsack_dspy.modules.compiled_programs import install_selecting_predictor, load_compiled, predictor_at
from knapsack_dspy.modules.prompt_cost import pinned_adapter
from knapsack_dspy.modules.selecting_predict import SelectingPredict
from knapsack_dspy.selection.config import SelectionConfig
from knapsack_dspy.selection.selectors import MODES, selector_for_mode
from knapsack_dspy.teleprompt.compile_report import (
    attribute_accuracy,
    check_zero_shot,
    choice_report,
    predictor_report,
)
from knapsack_dspy.teleprompt.compile_target import CompileTarget
from knapsack_dspy.teleprompt.errors import CompileError, ZeroShotWarning
from knapsack_dspy.teleprompt.pool_measurement import measure_pool
from knapsack_dspy.teleprompt.predictor_pools import (
    PoolError,
    PredictorPool,
    empty_pool_reason,
    pools_from_teacher,
    pools_from_trainset,
    query_inputs,
)
from knapsack_dspy.teleprompt.query_samples import pool_as_queries, sample_pool_queries, sample_validation
from knapsack_dspy.teleprompt.settings_search import SettingsSearch, search_points

logger = logging.getLogger(__name__)

DEFAULT_BUDGET = 4096  # when the config leaves the budget to the model and the model's context window is unknown
#: Pool examples asked as queries for the capacity a typical query leaves (a selector whose fit reads it: a token
#: price read from the pool), when there is no validation set
TYPICAL_QUERIES = 24
_SETTINGS = tuple(f.name for f in dataclasses.fields(SelectionConfig))
_DSPY_LM = dspy.LM  # the LiteLLM-backed LM class (as imported: a caller may rebind ``dspy.LM`` to a factory)


def _is_count(value, least: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= least


class KnapsackFewShot(Teleprompter):
    """Compile per-query few-shot exemplar selection (knapsack ILP) into any DSPy program.

    Parameters
    ----------
    metric: ``metric(example, prediction, trace=None) -> float | bool``: LM evaluation in the search (None:
        proxies only, no LM calls during compile) and, with ``teacher=``, which teacher runs give demos.
    config: a ``SelectionConfig`` for every compiled predictor, or ``{predictor name: SelectionConfig}``.
    predictors: the names of the predictors to compile (default: every predictor with a non-empty pool).
    mode: "per_query" (SEER: a knapsack per query at inference), "static" (one set for every query, chosen at
        compile time by a knapsack over summed similarity to the validation queries) or "hybrid" (a static core
        of ``core_size`` plus per-query slots); it chooses the selector
        (``knapsack_dspy.selection.selectors.selector_for_mode``). None: the config's selector.
    **settings: ``SelectionConfig`` settings replacing the config's (``selector``, ``max_exemplars``,
        ``budget``, ``reserve_output_tokens``, ``alpha``, ``beta``, ``attributes``, ``attribute_source``,
        ``knn_k``, ``max_per_doc``, ``core_size``, ``val_size``, ``seed``, ``embed_fields``,
        ``selector_params``, ...). ``budget=None`` takes the model's context window (or 4096 when unknown).
        ``attributes`` may map names to functions, ``{"label": lambda ex: ex.label}``: the attributes with a
        template, their pool values computed by your functions (default: the example's field of that name).
    search_space: e.g. ``{"alpha": [0.5, 0.75], "beta": [0, 0.25], "max_exemplars": [4, 8]}`` (any
        ``SelectionConfig`` setting); every combination is scored by proxies; the best ``max_lm_configs`` are
        LM-evaluated if ``metric``.
    value: ``value(query, demo) -> float`` in place of the embeddings' cosine similarity (both arguments are
        mappings of the predictor's fields); code is not saved: pass it again to ``load``.
    num_threads: threads of the LM evaluations (``dspy.Evaluate``).
    token_counter: a ``TokenCounter`` (default: ``get_token_counter(lm.model)``, counted by the configured LM's server
        when it has an ``api_base`` that can count: ``llm.served_token_counter``).
    lm_model: the model name whose tokenizer is used (default: the configured ``dspy.settings.lm``).
    embedder: embeds queries and exemplars (default: the student's ``embedder``, else all-MiniLM-L6-v2).
    adapter: the adapter prompts are formatted and measured with (default: the configured one, else a
        ``ChatAdapter``; a ChatAdapter's JSON fallback is switched off).
    """

    def __init__(self, metric: Callable | None = None, *, config: SelectionConfig | Mapping | None = None,
                 predictors: Sequence[str] | None = None, mode: str | None = None,
                 search_space: Mapping[str, Sequence] | None = None, max_lm_configs: int = 2, num_threads: int = 1,
                 value: Callable | None = None,
                 token_counter: Any = None, lm_model: str | None = None, embedder: Any = None, adapter: Any = None,
                 progress: bool = True, **settings):
        super().__init__()
        unknown = sorted(set(settings) - set(_SETTINGS))
        if unknown:
            raise CompileError(f"KnapsackFewShot: unknown argument {', '.join(map(repr, unknown))}; "
                               f"selection settings: {', '.join(_SETTINGS)}")
        if mode is not None and mode not in MODES:
            raise CompileError(f"mode must be one of {MODES}, got {mode!r}")
        if config is not None and not isinstance(config, (SelectionConfig, Mapping)):
            raise CompileError(f"config must be a SelectionConfig or {{predictor name: SelectionConfig}}, got "
                               f"{type(config).__name__}")
        if isinstance(config, Mapping):
            bad = [k for k, v in config.items() if not isinstance(v, SelectionConfig)]
            if bad:
                raise CompileError(f"config[{bad[0]!r}] must be a SelectionConfig")
        if predictors is not None and (isinstance(predictors, str) or not all(isinstance(p, str) for p in predictors)):
            raise CompileError(f"predictors must be a list of predictor names, got {predictors!r}")
        if value is not None and not callable(value):
            raise CompileError("value must be a function value(query, demo) -> float")
        functions = {}
        if isinstance(settings.get("attributes"), Mapping):  # {name: f(example) -> value}: names and their values
            functions = dict(settings["attributes"])
            if not all(isinstance(k, str) and callable(f) for k, f in functions.items()):
                raise CompileError("attributes must be a list of names or map names to functions f(example) -> value")
            settings["attributes"] = tuple(functions)
        self.metric = metric
        self.config = config
        self.predictors = list(predictors) if predictors is not None else None
        self.mode = mode
        self.settings = dict(settings)
        self.search_space = {k: list(v) for k, v in dict(search_space or {}).items() if v}
        unknown = sorted(set(self.search_space) - set(_SETTINGS))
        if unknown:
            raise CompileError(f"search_space keys must be selection settings ({', '.join(_SETTINGS)}); "
                               f"got {unknown}")
        if not _is_count(max_lm_configs, 0):
            raise CompileError(f"KnapsackFewShot: max_lm_configs must be a non-negative integer, "
                               f"got {max_lm_configs!r}")
        if not _is_count(num_threads, 1):
            raise CompileError(f"KnapsackFewShot: num_threads must be a positive integer, got {num_threads!r}")
        self._check_settings(config)
        self.max_lm_configs = max_lm_configs
        self.num_threads = num_threads
        self.attributes = functions
        self.value = value
        self.token_counter = token_counter
        self.lm_model = lm_model
        self.embedder = embedder
        self.adapter = adapter
        self.progress = progress

    def _check_settings(self, config) -> None:
        """The selection settings, checked now rather than at compile (one line naming the setting): each keyword
        setting and each search-space value on its own, the mode against the selector, and, when ``config`` is
        given here, the settings with it (what depends on the student's own ``selection_config`` hook, e.g.
        hybrid's ``core_size <= max_exemplars`` against the student's M, waits for compile)."""
        try:
            SelectionConfig.check_settings(**self.settings)
            if self.mode is not None:
                selector_for_mode(self.mode, self.settings.get("selector"))
        except ValueError as exc:
            raise CompileError(f"KnapsackFewShot: {exc}") from None
        for key, values in self.search_space.items():
            for value in values:
                try:
                    SelectionConfig.check_settings(**{key: value})
                except ValueError as exc:
                    raise CompileError(f"KnapsackFewShot: search_space point {{{key!r}: {value!r}}}: {exc}") from None
        given = [config] if isinstance(config, SelectionConfig) else list(config.values()) if config else []
        for base in given:
            search_points(self.search_space, self.selection_config(base))

    # ------------------------------------------------------------------------------------------------
    def selection_config(self, student_config: SelectionConfig) -> SelectionConfig:
        """``student_config`` with this teleprompter's settings (and the selector its ``mode`` names) in place."""
        settings = dict(self.settings)
        try:
            if self.mode is not None:
                settings["selector"] = selector_for_mode(self.mode, settings.get("selector"))
            return student_config.with_settings(**settings)
        except ValueError as exc:
            raise CompileError(str(exc)) from None

    def config_for(self, program: dspy.Module, name: str) -> SelectionConfig:
        """The settings predictor ``name`` is compiled with (see the class docstring for the order)."""
        config = self.config.get(name) if isinstance(self.config, Mapping) else self.config
        if config is None:
            config = program.selection_config(name) if isinstance(program, SelectionConfigFor) else None
            if config is not None and not isinstance(config, SelectionConfig):
                raise CompileError(f"the student's selection_config({name!r}) returned {type(config).__name__}, "
                                   "not a SelectionConfig")
        return self.selection_config(config if config is not None else SelectionConfig())

    def _counter(self):
        if self.token_counter is not None:
            return self.token_counter, self.lm_model or getattr(self.token_counter, "model", None)
        lm = dspy.settings.lm
        model = self.lm_model or getattr(lm, "model", None)
        if model is None:
            raise CompileError("no LM configured: call dspy.configure(lm=...) or pass lm_model / token_counter")
        # the configured LM's server counts its model's tokens (a plain dspy.LM(..., api_base=...) included)
        api_base = (getattr(lm, "kwargs", None) or {}).get("api_base") if getattr(lm, "model", None) == model else None
        return get_token_counter(model, api_base=api_base), model

    def _embedder(self, program):
        if self.embedder is not None:
            return self.embedder
        own = program.embedder if isinstance(program, HasEmbedder) else None
        return own if callable(getattr(own, "encode", None)) else TextEmbedder()

    def _targets(self, program) -> dict[str, dspy.Predict]:
        available = dict(program.named_predictors())
        if not available:
            raise CompileError(f"the student {type(program).__name__} has no dspy.Predict to compile "
                               "(KnapsackFewShot selects the demos of a program's predictors)")
        names = self.predictors if self.predictors is not None else list(available)
        if isinstance(self.config, Mapping):
            names = names if self.predictors is not None else [n for n in names if n in self.config] or names
            extra = sorted(set(self.config) - set(available))
            if extra:
                raise CompileError(f"config names predictors the student does not have: {extra}; its predictors: "
                                   f"{sorted(available)}")
        unknown = [n for n in names if n not in available]
        if unknown:
            raise CompileError(f"the student has no predictor {unknown}; its predictors: {sorted(available)}")
        return {name: available[name] for name in names}

    # ------------------------------------------------------------------------------------------------
    def compile(self, student, *, trainset, teacher=None, valset=None, **kwargs):
        if kwargs:
            raise CompileError(f"KnapsackFewShot.compile: unknown argument {', '.join(map(repr, sorted(kwargs)))}")
        started = time.perf_counter()
        _check_program(student, "student")
        if teacher is not None:
            _check_program(teacher, "teacher")
        trainset = _examples(trainset, "trainset")
        if not trainset:
            raise CompileError("trainset (the exemplar pool) is empty")
        val = _examples(valset, "valset")
        program = student.deepcopy()
        targets = self._targets(program)
        _check_lms(targets)
        counter, model = self._counter()
        embedder = self._embedder(program)
        adapter = pinned_adapter(self.adapter)
        lm_before = _lm_calls_so_far()
        summary: dict[str, Any] = {}

        if isinstance(program, PrefetchesEmbeddings):  # optional: one batch instead of many calls
            program.prefetch_embeddings([*trainset, *val], progress=self.progress)
        fitted = fit_sub_modules(program, trainset, embedder)
        try:
            if teacher is not None:
                pools, summary["teacher"] = pools_from_teacher(teacher, targets, trainset, metric=self.metric,
                                                               progress=self.progress)
            else:
                pools = pools_from_trainset(program, targets, trainset, progress=self.progress)
        except PoolError as exc:
            raise CompileError(str(exc)) from None
        empty = {name: pool for name, pool in pools.items() if not pool.demos}
        named = [name for name in empty if self.predictors is not None or isinstance(self.config, Mapping)]
        if named or len(empty) == len(pools):
            names = named or sorted(empty)
            why = ("no teacher run succeeded" + (f" (first error: {summary['teacher']['first_error']})"
                                                 if summary.get("teacher", {}).get("first_error") else "")
                   if teacher is not None else
                   empty_pool_reason(program, names[0], targets[names[0]], trainset))
            raise CompileError(f"empty exemplar pool for {names}: {why}")
        skipped = {name: "no trainset example fits its signature" for name in empty}

        reports = {}
        for name in targets:
            if name in empty:
                continue
            program = install_selecting_predictor(program, name, embedder=embedder, token_counter=counter,
                                                  value=self.value)
            reports[name] = self._compile_predictor(program, name, pools[name], val, counter, model, adapter)
        cost = {**_lm_cost(lm_before), "seconds": round(time.perf_counter() - started, 2),
                "pool_tokens_measured": int(sum(r.pop("_pool_tokens") for r in reports.values()))}
        shared = {"cost": cost, "skipped": skipped, "fitted_modules": fitted, **summary}
        for name in reports:
            predictor_at(program, name).selection.compile_report = {**reports[name], "compile": shared}
        program.compile_report = {**shared, "predictors": reports}
        # Not marked ``_compiled``: DSPy freezes a compiled sub-program (its parent's named_parameters, and so its
        # save(), would leave the selection out) and BootstrapFewShot / MIPROv2 (which bootstraps demos even for
        # a zero-demo run) refuse a compiled student; a knapsack program must stay open to both.
        return program

    @staticmethod
    def load(student, path, **kwargs):
        """Load a program compiled by ``KnapsackFewShot`` (``program.save("p.json")``) into a fresh ``student`` of
        the same class (in place; returned). ``kwargs``: see ``knapsack_dspy.modules.compiled_programs.load_compiled``
        (``value=`` must be given again when the program was compiled with one)."""
        return load_compiled(student, Path(path) if isinstance(path, str) else path, **kwargs)

    # ------------------------------------------------------------------------------------------------
    def _target(self, program, name: str) -> CompileTarget:
        """Ask the student, once, what compiling predictor ``name`` needs (``CompileTarget``)."""
        selecting = predictor_at(program, name)
        config = self.config_for(program, name)
        if config.embed_fields is None:  # the predictor's inputs
            config = config.with_settings(embed_fields=tuple(selecting.signature.input_fields))
        return CompileTarget(name, selecting, config, self._attribute_functions(program, name),
                             functools.partial(query_inputs, program, name, selecting),
                             program.selection_proxies if isinstance(program, ScoresSelections) else None)

    def _compile_predictor(self, program, name: str, pool: PredictorPool, val, counter, model, adapter) -> dict:
        """Compile predictor ``name`` (its ``SelectingPredict`` installed): measure its pool, sample its validation
        queries, search its settings, and return its compile report."""
        target = self._target(program, name)
        target.selecting.adapter = adapter
        base_config = target.config
        configs = search_points(self.search_space, base_config)
        budget = int(base_config.budget or getattr(counter, "context_window", None) or DEFAULT_BUDGET)
        measured = measure_pool(target.selecting, pool, counter, adapter, base_config.shared_fields or (),
                                progress=self.progress)
        val_subset = sample_validation(val, target.inputs, base_config.val_size, base_config.seed,
                                       measured.base_tokens)
        report = predictor_report(base_config, budget, model, counter, pool, len(val), val_subset, measured)

        searched = self._search().run(program, target, measured.pool_spec(pool, target.attribute_functions),
                                      configs, budget=budget, token_model=model,
                                      prompt_format=measured.prompt_format, val_subset=val_subset,
                                      fit_queries=val_subset or pool_as_queries(pool),
                                      typical_queries=lambda: val_subset or sample_pool_queries(
                                          pool, target.inputs, TYPICAL_QUERIES, base_config.seed,
                                          measured.base_tokens))
        select = target.select
        report["configs"] = searched.entries
        report.update(choice_report(select, configs[searched.chosen][0], searched.kinds))
        if select.config.latency_budget is not None and select.latency_model() is None:
            raise CompileError(f"predictor {name!r}: latency_budget={select.config.latency_budget:g} s but no latency "
                               f"rates are known for {model}: give SelectionConfig(latency_rates=...)")
        report["empty_selections"] = check_zero_shot(target, pool, val_subset, measured)
        if val_subset:
            report["attribute_accuracy"] = attribute_accuracy(select, val_subset, target.attribute_functions)
        return report

    def _search(self) -> SettingsSearch:
        """The settings search with this teleprompter's metric and limits."""
        return SettingsSearch(self.metric, self.max_lm_configs, self.num_threads, self.progress)

    def _attribute_functions(self, program, name: str) -> dict:
        """The functions labelling a predictor's pool exemplars: the student's (``PoolAttributesFor``), then the
        teleprompter's own ``attributes=`` over them."""
        own = program.pool_attributes(name) if isinstance(program, PoolAttributesFor) else None
        return {**dict(own or {}), **self.attributes}


def _described(value) -> str:
    """A value as an error message names it: its type and a short repr."""
    from knapsack_dspy.messages import one_line

    return f"{type(value).__name__} {one_line(repr(value), 80)}"


def _check_program(program, role: str) -> None:
    if isinstance(program, dspy.Module):
        return
    hint = (f" (a signature string becomes a program with dspy.Predict({program!r}) or "
            f"dspy.ChainOfThought({program!r}))" if isinstance(program, str) else "")
    raise CompileError(f"KnapsackFewShot.compile: the {role} must be a DSPy program (a dspy.Module such as "
                       f"dspy.ChainOfThought('question -> answer')), got {_described(program)}{hint}")


def _examples(examples, role: str) -> list:
    """``trainset`` / ``valset`` as a list, each item a ``dspy.Example`` (or a mapping of fields)."""
    if examples is None:
        return []
    if isinstance(examples, (str, bytes, Mapping)) or not isinstance(examples, Iterable):
        raise CompileError(f"KnapsackFewShot.compile: {role} must be a list of dspy.Example, got "
                           f"{_described(examples)}")
    out = list(examples)
    for i, example in enumerate(out):
        if not isinstance(example, (dspy.Example, Mapping)):
            raise CompileError(f"KnapsackFewShot.compile: {role}[{i}] must be a dspy.Example (or a mapping of "
                               f"fields), got {_described(example)}")
    return out


def _litellm_model(lm) -> str | None:
    """The LiteLLM model string ``lm`` calls, or None when its calls do not go by one: not a ``dspy.LM``
    (``DummyLM``, a custom ``BaseLM``), a subclass answering on its own, a custom engine, a provider declared to
    DSPy or an explicit ``custom_llm_provider``."""
    if not isinstance(lm, _DSPY_LM) or not isinstance(getattr(lm, "model", None), str):
        return None
    if type(lm).forward is not _DSPY_LM.forward or type(lm).aforward is not _DSPY_LM.aforward:
        return None
    kwargs = getattr(lm, "kwargs", None) or {}
    providers = getattr(lm, "_providers", None)  # providers declared to DSPy
    if not isinstance(getattr(lm, "_engine_spec", "auto"), str) or providers or kwargs.get("custom_llm_provider"):
        return None
    return lm.model


def _check_lms(targets: Mapping[str, dspy.Predict]) -> None:
    """The LMs the compiled predictors will call (each one's own, else the configured one): a model string no
    provider is known for fails every call, so it fails the compile now, in one line; an unknown model name of a
    known provider is logged (``llm.model_check``)."""
    checked = set()
    for predictor in targets.values():
        lm = predictor.lm or dspy.settings.lm
        model = _litellm_model(lm)
        if model is None or model in checked:
            continue
        checked.add(model)
        kwargs = getattr(lm, "kwargs", None) or {}
        try:
            from knapsack_dspy.llm.model_check import check_model_offline  # LiteLLM's model map: read when checked

            check_model_offline(model, api_base=kwargs.get("api_base") or kwargs.get("base_url"))
        except LLMConfigError as exc:
            raise CompileError(f"KnapsackFewShot.compile: the LM {model!r} cannot be called: {exc}") from None


def fit_sub_modules(program, trainset, embedder) -> list[str]:
    """Sub-modules that learn from the trainset at compile time (``fit_on_trainset(trainset, embedder)``, e.g. a
    router choosing a predictor by answer type) are fitted (before the pools are built); returns their names.
    Any optimizer compiling such a program calls it first (the bench's DSPy baselines do)."""
    fitted = []
    for name, module in program.named_sub_modules():
        if isinstance(module, FitsOnTrainset):
            module.fit_on_trainset(trainset, embedder)
            fitted.append(name)
    return fitted


def _lm_calls_so_far():
    """The LM calls counted so far (``llm.call_counter``), to measure what a compile spends (``_lm_cost``)."""
    from knapsack_dspy.llm.call_counter import call_counts

    return call_counts()


def _lm_cost(before) -> dict[str, Any]:
    """What the LM side of a compile cost since ``before``: calls that reached a provider, answers served by the
    cache, failed attempts (retried), their prompt / completion tokens and LiteLLM's dollar cost. Calls made
    by LMs that bypass LiteLLM (e.g. ``DummyLM``) are not seen."""
    spent = _lm_calls_so_far() - before
    return {"lm_calls": spent.calls, "lm_cache_hits": spent.cache_hits, "lm_failed_attempts": spent.failures,
            "prompt_tokens": spent.prompt_tokens, "completion_tokens": spent.completion_tokens,
            "cost_usd": round(spent.cost, 6)}


__all__ = ["DEFAULT_BUDGET", "CompileError", "KnapsackFewShot", "SelectingPredict", "ZeroShotWarning",
           "fit_sub_modules"]
