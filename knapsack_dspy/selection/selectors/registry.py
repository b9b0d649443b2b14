"""Selectors by name: the names the CLI, suites, reports and saved programs use.

A selector class declares what it needs (``needs_fit``, ``fit_on``, ``mode``, ``uses_attributes``,
``default_attribute_source``: see :class:`ExemplarSelector`); this registry maps names to classes, and is
the only place that knows which name means what. Users add their own with :func:`register_selector`::

    @register_selector
    class ShortestSelector(ExemplarSelector):
        name = "shortest"

        def select(self, pool, request): ...

after which ``SelectionConfig(selector="shortest")``, ``kdspy bench`` suites and saved programs accept it
(register it before loading a program that uses it). An installed package adds one without being imported by
hand: an entry point of the group ``knapsack_dspy.selectors`` naming the class (``shortest =
"my_package.selectors:ShortestSelector"``; its name is the selector's), registered the first time a name is not
found or the names are listed (``knapsack_dspy/plugins.py``). A built-in selector is its module plus its line in
``BUILT_IN``.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Iterator, Mapping

from knapsack_dspy.selection.selectors.base import ATTRIBUTE_SOURCES, FIT_ON, MODES, ExemplarSelector

__all__ = ["DEFAULT_SELECTOR", "MODE_SELECTORS", "SELECTORS", "declaration_problems", "load_selector_plugins",
           "make_selector", "register_selector", "selector_class", "selector_for_mode"]

#: The package's own selectors: name -> "module:Class", imported when first asked for (importing the optimizer
#: loads the selectors a program uses, not all thirteen; ``tests/optimizer/test_selector_registry.py`` checks every
#: entry).
BUILT_IN = {
    "random": "knapsack_dspy.selection.selectors.random_selector:RandomSelector",
    "fixed": "knapsack_dspy.selection.selectors.fixed_set:FixedSetSelector",
    "kate": "knapsack_dspy.selection.selectors.kate:KATESelector",
    "kate_within_budget": "knapsack_dspy.selection.selectors.kate_within_budget:KATEWithinBudgetSelector",
    "diverse_kate": "knapsack_dspy.selection.selectors.diverse_kate:DiverseKATESelector",
    "csp": "knapsack_dspy.selection.selectors.csp:CSPSelector",
    "seer": "knapsack_dspy.selection.selectors.seer:KnapsackSelector",
    "seer_gold": "knapsack_dspy.selection.selectors.seer:GoldKnapsackSelector",
    "static": "knapsack_dspy.selection.selectors.static_knapsack:StaticKnapsackSelector",
    "hybrid": "knapsack_dspy.selection.selectors.static_knapsack:HybridKnapsackSelector",
    "no_demos": "knapsack_dspy.selection.selectors.no_demos:NoDemosSelector",
    "case_coverage": "knapsack_dspy.selection.selectors.case_coverage:CaseCoverageSelector",
    "priced_case_coverage": "knapsack_dspy.selection.selectors.priced_case_coverage:PricedCaseCoverageSelector",
}
#: name -> a registered class, or the "module:Class" of a built-in one not imported yet
_REGISTRY: dict[str, type[ExemplarSelector] | str] = dict(BUILT_IN)
_PLUGINS = {"loaded": False}
_PLUGINS_LOCK = threading.RLock()


def _register_plugin(entry_point, value) -> None:
    register_selector(value, name=entry_point.name)


def load_selector_plugins() -> None:
    """Register the selectors installed packages declare (entry points of ``knapsack_dspy.selectors``), once; one
    that cannot be registered is left out with a ``PluginWarning``. Called when a name is not found or the names
    are listed."""
    with _PLUGINS_LOCK:
        if _PLUGINS["loaded"]:
            return
        _PLUGINS["loaded"] = True
        # installed plug-ins are read only when a name is missed or listed: importing the optimizer reads none
        from knapsack_dspy.plugins import SELECTORS_GROUP, load_plugins

        load_plugins(SELECTORS_GROUP, _register_plugin)


def _known(name) -> bool:
    """Whether ``name`` is registered, the installed plug-ins looked at when it is not."""
    if name not in _REGISTRY:
        load_selector_plugins()
    return name in _REGISTRY


def _resolve(name: str) -> type[ExemplarSelector]:
    entry = _REGISTRY[name]
    if isinstance(entry, str):
        module, _, attribute = entry.partition(":")
        entry = _REGISTRY[name] = getattr(importlib.import_module(module), attribute)
    return entry


class _Selectors(Mapping):
    """name -> selector class, read-only (``register_selector`` adds to it); a built-in class is imported when
    looked up, its name is known before."""

    def __getitem__(self, name: str) -> type[ExemplarSelector]:
        if not _known(name):
            raise KeyError(name)
        return _resolve(name)

    def __contains__(self, name) -> bool:  # a name, without importing its class
        return _known(name)

    def __iter__(self) -> Iterator[str]:
        load_selector_plugins()
        return iter(list(_REGISTRY))

    def __len__(self) -> int:
        load_selector_plugins()
        return len(_REGISTRY)


SELECTORS = _Selectors()
#: The selector a config gets unless it names one: the fewest-token setting non-inferior to the most accurate one
#: (issue 38's rule, docs/selection_objective.md, "The default follows the evidence"; measured in docs/results.md,
#: "Tokens"): case coverage with a price on prompt tokens. Until then it was KATE within budget (docs/core.md,
#: "Which selector"), the reference the committed comparisons keep (``bench/scoring/comparisons.py``).
DEFAULT_SELECTOR = "priced_case_coverage"
#: The selector a ``--mode`` chooses when none is named (per_query: the default selector, a knapsack per query).
MODE_SELECTORS = {"per_query": DEFAULT_SELECTOR, "static": "static", "hybrid": "hybrid"}


def declaration_problems(klass: type[ExemplarSelector]) -> list[str]:
    """What is wrong with a selector class's declarations (``fit_on``, ``mode``, ...): empty when nothing."""
    problems = []
    if klass.fit_on not in FIT_ON:
        problems.append(f"fit_on must be one of {FIT_ON}, got {klass.fit_on!r}")
    if klass.fit_on is not None and not klass.needs_fit:
        problems.append(f"fit_on={klass.fit_on!r} needs needs_fit = True")
    if klass.mode not in MODES:
        problems.append(f"mode must be one of {MODES}, got {klass.mode!r}")
    if klass.default_attribute_source not in ATTRIBUTE_SOURCES:
        problems.append(f"default_attribute_source must be one of {ATTRIBUTE_SOURCES}, "
                        f"got {klass.default_attribute_source!r}")
    if "max_exemplars" not in klass.param_names():
        problems.append("__init__ must take max_exemplars")
    return problems


def register_selector(cls: type[ExemplarSelector] | None = None, *, name: str | None = None,
                      replace: bool = False):
    """Register a selector class under ``name`` (default: its ``name`` attribute). Usable as a decorator
    (``@register_selector`` or ``@register_selector(name=..., replace=True)``); returns the class. A name
    already taken is an error unless ``replace=True``; the class's declarations are checked here."""

    def register(klass):
        if not (isinstance(klass, type) and issubclass(klass, ExemplarSelector)):
            raise TypeError(f"register_selector: {klass!r} is not an ExemplarSelector subclass")
        key = klass.name if name is None else name
        if not isinstance(key, str) or not key or key == ExemplarSelector.name:
            raise ValueError(f"register_selector: {klass.__name__} needs a name (set its 'name' attribute)")
        if key in _REGISTRY and not replace and _resolve(key) is not klass:
            raise ValueError(f"register_selector: the name {key!r} is taken by {_resolve(key).__name__} "
                             "(pass replace=True to replace it)")
        problems = declaration_problems(klass)
        if problems:
            raise ValueError(f"register_selector: {klass.__name__}: {'; '.join(problems)}")
        _REGISTRY[key] = klass
        return klass

    return register if cls is None else register(cls)


def selector_class(name: str) -> type[ExemplarSelector]:
    """The class registered under ``name``; ``ValueError`` listing the names otherwise."""
    try:
        if _known(name):
            return _resolve(name)
    except TypeError:  # not a name
        pass
    raise ValueError(f"unknown selector {name!r}; choose from {', '.join(SELECTORS)}") from None


def make_selector(name: str, **params) -> ExemplarSelector:
    """Build the selector ``name`` with ``params`` (each one a parameter it declares) and validate them."""
    cls = selector_class(name)
    unknown = sorted(set(params) - set(cls.param_names()))
    if unknown:
        raise ValueError(f"selector {name!r} has no parameter {', '.join(map(repr, unknown))}; "
                         f"its parameters: {', '.join(cls.param_names())}")
    selector = cls(**params)
    selector.validate_params()
    return selector


def selector_for_mode(mode: str | None, selector: str | None = None) -> str:
    """The selector a (``mode``, ``selector``) pair names, as ``kdspy compile --mode`` and
    ``KnapsackFewShot(mode=...)`` take them: without a mode, ``selector`` (default ``DEFAULT_SELECTOR``); without a
    selector, the mode's own (``MODE_SELECTORS``); with both, the selector must select in that mode."""
    if mode is None:
        return DEFAULT_SELECTOR if selector is None else selector
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    if selector is None:
        return MODE_SELECTORS[mode]
    declared = selector_class(selector).mode
    if declared != mode:
        raise ValueError(f"selector {selector!r} selects {declared!r}, not in mode {mode!r} "
                         f"(mode {mode!r} uses {MODE_SELECTORS[mode]!r} unless a {mode} selector is named)")
    return selector
