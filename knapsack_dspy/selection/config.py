"""``SelectionConfig``: every setting of one predictor's exemplar selection, in one frozen value.

One set of defaults, validated once (``__post_init__``, one-line errors naming the setting); variations
with ``dataclasses.replace`` (``KnapsackFewShot``'s search) or :meth:`SelectionConfig.with_settings` (which
names an unknown setting instead of raising ``TypeError``); JSON round-trip with ``to_dict`` /
``from_dict`` (saved programs). ``SelectExemplars`` owns one; ``RunSpec`` and ``kdspy compile`` build one.

Why these defaults (``docs/core.md``, "SelectionConfig"): ``max_exemplars=4`` and ``val_size=40`` are what
every committed result, suite and the CLI use; ``budget=None`` means the target model's context window
(a program compiled without a budget fits the model it was compiled for; experiments name their budget);
``alpha=0.75``, ``beta=0`` and ``knn_k=200`` are SEER's; ``attributes=()``: no attribute is constrained until the
pool's builder names its own (the document-QA tasks name SEER's ``modality``).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from knapsack_dspy.errors import KnapsackDspyError
from knapsack_dspy.selection.selectors.base import ATTRIBUTE_SOURCES, ExemplarSelector
from knapsack_dspy.selection.selectors.registry import DEFAULT_SELECTOR, make_selector, selector_class

__all__ = ["DEMO_ORDERS", "EVIDENCE_MODES", "EVIDENCE_SOLVERS", "SELECTOR_SETTINGS", "SelectionConfig",
           "SelectionConfigError", "check_setting"]

#: How the per-query exemplars are ordered in the prompt (``SelectionConfig.demo_order``).
DEMO_ORDERS = ("similarity", "canonical")
#: How demos and the pieces of selectable input fields are chosen when a call has pieces (``SelectionConfig.evidence``):
#: in one knapsack; the demos first, then the pieces by a knapsack; the demos first, then the pieces by relevance.
EVIDENCE_MODES = ("joint", "sequential", "relevance")
#: How that knapsack is solved (``SelectionConfig.evidence_solver``): exactly (milp) or by its greedy.
EVIDENCE_SOLVERS = ("knapsack", "greedy")

#: Settings handed to the selector when its ``__init__`` takes them (a selector ignores the ones it has no
#: use for: KATE has no ``alpha``).
SELECTOR_SETTINGS = ("max_exemplars", "alpha", "beta", "attributes", "knn_k", "max_per_doc", "core_size", "seed")


class SelectionConfigError(KnapsackDspyError, ValueError):
    """A selection setting is invalid (the message names it)."""


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _names(value, setting: str) -> tuple[str, ...]:
    if isinstance(value, str) or not isinstance(value, (list, tuple)):
        raise SelectionConfigError(f"{setting} must be a list of names, got {value!r}")
    if not all(isinstance(v, str) and v for v in value):
        raise SelectionConfigError(f"{setting} must be a list of non-empty names, got {value!r}")
    if len(set(value)) != len(value):
        raise SelectionConfigError(f"{setting} names an attribute twice: {list(value)!r}")
    return tuple(value)


def _fail(message: str):
    raise SelectionConfigError(message)


def _check_selector(value):
    if not isinstance(value, str):
        _fail(f"selector must be a name, got {value!r}")
    try:
        selector_class(value)
    except ValueError as exc:
        raise SelectionConfigError(str(exc)) from None
    return value


def _non_negative_int(name: str):
    def check(value):
        if not _is_int(value) or value < 0:
            _fail(f"{name} must be a non-negative integer, got {value!r}")
        return value
    return check


def _check_budget(value):
    if value is not None and (not _is_int(value) or value <= 0):
        _fail(f"budget must be a positive number of tokens or None, got {value!r}")
    return value


def _share(name: str):
    def check(value):
        if not _is_number(value) or not 0 <= value <= 1:
            _fail(f"{name} must be a number in [0, 1], got {value!r}")
        return value
    return check


def _check_attribute_source(value):
    if value is not None and value not in ATTRIBUTE_SOURCES:
        _fail(f"attribute_source must be one of {ATTRIBUTE_SOURCES} or None, got {value!r}")
    return value


def _positive_int_or_none(name: str):
    def check(value):
        if value is not None and (not _is_int(value) or value < 1):
            _fail(f"{name} must be a positive integer or None, got {value!r}")
        return value
    return check


def _check_exemplar_budget(value):
    if value is not None and (not _is_int(value) or value <= 0):
        _fail(f"exemplar_budget must be a positive number of tokens or None, got {value!r}")
    return value


def _check_embed_fields(value):
    if value is None:
        return None
    value = _names(value, "embed_fields")
    if not value:
        _fail("embed_fields must name at least one field (or be None: the predictor's input fields)")
    return value


def _check_exclude_same_doc(value):
    if not isinstance(value, bool):
        _fail(f"exclude_same_doc must be true or false, got {value!r}")
    return value


def _check_demo_order(value):
    if value not in DEMO_ORDERS:
        _fail(f"demo_order must be one of {DEMO_ORDERS}, got {value!r}")
    return value


def _check_latency_budget(value):
    if value is not None and (not _is_number(value) or value <= 0):
        _fail(f"latency_budget must be a positive number of seconds or None, got {value!r}")
    return value


def _check_latency_rates(value):
    if value is None:
        return None
    from knapsack_dspy.selection.latency import LatencyModel

    try:
        return LatencyModel.from_dict(value).to_dict()
    except ValueError as exc:
        raise SelectionConfigError(str(exc)) from None


def _check_derive_kinds(value):
    if not isinstance(value, bool):
        _fail(f"derive_kinds must be true or false, got {value!r}")
    return value


def _check_context_fields(value):
    if isinstance(value, str) or not isinstance(value, (list, tuple)) \
            or not all(isinstance(v, str) and v for v in value):
        _fail(f"context_fields must be a list of input field names, got {value!r}")
    if len(set(value)) != len(value):
        _fail(f"context_fields names a field twice: {list(value)!r}")
    return tuple(value)


def _one_of(name: str, choices: tuple[str, ...]):
    def check(value):
        if value not in choices:
            _fail(f"{name} must be one of {choices}, got {value!r}")
        return value
    return check


def _check_evidence_weight(value):
    if not _is_number(value) or value < 0:
        _fail(f"evidence_weight must be a number >= 0, got {value!r}")
    return value


def _check_evidence_budget(value):
    if value is not None and (not _is_int(value) or value <= 0):
        _fail(f"evidence_budget must be a positive number of tokens or None, got {value!r}")
    return value


def _check_selector_params(value):
    if not isinstance(value, Mapping):
        _fail(f"selector_params must be a mapping of parameter names to values, got {value!r}")
    params = dict(value)
    own = sorted(set(params) & set(_CHECKS))
    if own:
        _fail(f"selector_params {own} are SelectionConfig settings: set them directly")
    return params


#: setting -> its check on its own (returns the value as the config holds it); every SelectionConfig field has one
_CHECKS = {
    "selector": _check_selector,
    "max_exemplars": _non_negative_int("max_exemplars"),
    "budget": _check_budget,
    "reserve_output_tokens": _non_negative_int("reserve_output_tokens"),
    "exemplar_budget": _check_exemplar_budget,
    "alpha": _share("alpha"),
    "beta": _share("beta"),
    "attributes": lambda value: _names(value, "attributes"),
    "attribute_source": _check_attribute_source,
    "knn_k": _positive_int_or_none("knn_k"),
    "max_per_doc": _positive_int_or_none("max_per_doc"),
    "core_size": _non_negative_int("core_size"),
    "val_size": _non_negative_int("val_size"),
    "seed": _non_negative_int("seed"),
    "embed_fields": _check_embed_fields,
    "exclude_same_doc": _check_exclude_same_doc,
    "shared_fields": lambda value: None if value is None else _names(value, "shared_fields"),
    "selector_params": _check_selector_params,
    "demo_order": _check_demo_order,
    "latency_budget": _check_latency_budget,
    "latency_rates": _check_latency_rates,
    "derive_kinds": _check_derive_kinds,
    "context_fields": _check_context_fields,
    "evidence": _one_of("evidence", EVIDENCE_MODES),
    "evidence_solver": _one_of("evidence_solver", EVIDENCE_SOLVERS),
    "evidence_weight": _check_evidence_weight,
    "evidence_budget": _check_evidence_budget,
}


def check_setting(name: str, value):
    """One selection setting checked on its own (``SelectionConfigError`` naming it); returns the value as a
    ``SelectionConfig`` holds it (lists of names as tuples, latency rates complete)."""
    check = _CHECKS.get(name)
    return value if check is None else check(value)


@dataclass(frozen=True)
class SelectionConfig:
    """The selection settings of one predictor.

    selector: a registered selector name (``SELECTORS``: priced_case_coverage -- the default, ``DEFAULT_SELECTOR``:
        case coverage with a price on prompt tokens --, case_coverage, kate_within_budget, seer, seer_gold, kate,
        diverse_kate, random, csp, fixed, static, hybrid, no_demos, or one added with ``register_selector``).
    max_exemplars: M, the most exemplars per prompt.
    budget: total prompt tokens; ``None``: the target model's context window (4,096 when unknown).
    reserve_output_tokens: tokens kept free for the answer.
    exemplar_budget: the most tokens the exemplars of one prompt may take together (SEER's L, the exemplars' own
        budget), beside ``budget``; ``None``: none. A query's exemplars then get
        ``min(budget - query prompt - reserve_output_tokens, exemplar_budget)`` tokens (``exemplar_capacity``):
        the whole prompt stays within ``budget`` (the context window when ``budget`` is None: a prompt must
        still fit the model) and the exemplars within ``exemplar_budget``. The exemplars' tokens are their demos'
        tokens in the prompt (a shared field, e.g. a table, paid once: ``total_cost`` of the selection, the
        ``exemplar_tokens`` of a bench row); ``within_budget`` then means within both. At most ``budget``.
    alpha, beta: SEER's template shares: >= alpha*M exemplars with the query's (predicted) attribute value,
        >= beta*M with another.
    attributes: attributes with a template, most important first (the last is relaxed first).
    attribute_source: how a query's attributes are obtained: "classifier", "lm", "gold" or "none";
        ``None``: the selector's default (``seer_gold``: gold; others: classifier; "none" without attributes).
    knn_k: SEER's nearest-neighbour pre-filter before the knapsack.
    max_per_doc: at most this many exemplars from one document (``None``: no limit).
    core_size: hybrid's compile-time core.
    val_size: validation queries used at compile time (fitting compile-time sets, the configuration search).
    seed: seeds the validation subset, compile-time draws and per-query draws (random, csp).
    embed_fields: the query / exemplar fields whose text is embedded for similarity; ``None``: the input fields
        of the predictor the selection serves (``KnapsackFewShot.compile`` fills them in).
    exclude_same_doc: never pick exemplars from the query's own document (no leakage).
    shared_fields: demo fields whose value exemplars can share (``("table",)``: questions about one document
        show its table once; the exemplars after the first refer to it, and the knapsack pays the shared part
        once). ``()``: none; ``None``: the program decides (the document pipelines share the table).
    selector_params: further parameters of the chosen selector (e.g. ``{"respect_budget": True}`` for kate,
        ``{"n_candidates": 5}`` for fixed); each must be one the selector declares.
    demo_order: the order of the per-query exemplars in the prompt: ``"similarity"`` (SEER's: least similar
        first, the most similar next to the question) or ``"canonical"`` (one order over the pool for every
        query, ``exemplar_pool.canonical_keys``: consecutive prompts sharing exemplars share a longer prefix,
        which a server's prompt cache reuses). A static set or a hybrid core always opens the prompt in its
        one fixed order.
    latency_budget: seconds a prompt may take (opt-in; ``None``: no latency budget): the exemplars must also
        keep the predicted call time (``selection.latency.LatencyModel``) within it, where the declared shared
        prefix (the system message, a static set, a hybrid core) costs no prefill and every other token its
        prefill time. The token ``budget`` still holds.
    latency_rates: the rates that prediction uses (``{"prefill_tokens_per_s", "decode_tokens_per_s",
        "overhead_s", "output_tokens"}``); ``None``: the measured ones of the target model
        (``knapsack_dspy.llm.latency_rates``; needed for models without an entry).
    derive_kinds: when the selector reads exemplar kinds (``case_coverage``) and the pool carries none (no
        ``kind`` label from a hook, an ``attributes={"kind": f}`` function or an example field), derive them
        from the pool itself: k-means of the demos' output embeddings (``attribute_classifier.derive_kinds``).
        ``False``: no kinds, the selector's similarity-only fallback.
    context_fields: input fields whose value is a list of strings (a RAG program's ``context: list[str]``) that
        the predictor may cut per call: it then chooses its demos and which of those pieces to show together
        (``docs/core.md``, "Selectable context"). An input whose value is a
        ``knapsack_dspy.modules.selectable_context.Pieces`` is selectable whatever this says. ``()``: none.
    evidence: how demos and pieces are chosen when a call has pieces: ``"joint"`` (one knapsack over both),
        ``"sequential"`` (the selector's demos first, at the capacity the pieces every prompt shows leave -- the
        most relevant piece and its fixed part --, then the pieces by a knapsack in what is left) or
        ``"relevance"`` (the demos as in sequential, then the pieces in relevance order while they fit). A selector
        that exposes no knapsack problem makes ``"joint"`` sequential, and the selection info says so.
    evidence_solver: ``"knapsack"`` (exact, milp) or ``"greedy"`` (its greedy: the same objective).
    evidence_weight: lambda, the exchange rate between a piece's value (relevance to the query plus the query's
        terms it covers) and a demo's value: a plain number, to be fitted on data.
    evidence_budget: the most tokens the pieces (with their fixed parts) may take, beside ``budget``; ``None``:
        none.
    """

    selector: str = DEFAULT_SELECTOR
    max_exemplars: int = 4
    budget: int | None = None
    reserve_output_tokens: int = 256
    exemplar_budget: int | None = None
    alpha: float = 0.75
    beta: float = 0.0
    attributes: tuple[str, ...] = ()
    attribute_source: str | None = None
    knn_k: int | None = 200
    max_per_doc: int | None = None
    core_size: int = 2
    val_size: int = 40
    seed: int = 0
    embed_fields: tuple[str, ...] | None = None
    exclude_same_doc: bool = True
    shared_fields: tuple[str, ...] | None = None
    selector_params: Mapping[str, Any] = field(default_factory=dict)
    demo_order: str = "similarity"
    latency_budget: float | None = None
    latency_rates: Mapping[str, Any] | None = None
    derive_kinds: bool = True
    context_fields: tuple[str, ...] = ()
    evidence: str = "joint"
    evidence_solver: str = "knapsack"
    evidence_weight: float = 1.0
    evidence_budget: int | None = None

    def __post_init__(self):
        for f in fields(self):  # each setting on its own (check_setting), then how they go together
            object.__setattr__(self, f.name, check_setting(f.name, getattr(self, f.name)))
        if self.exemplar_budget is not None and self.budget is not None and self.exemplar_budget > self.budget:
            raise SelectionConfigError(f"exemplar_budget ({self.exemplar_budget}) is larger than the whole prompt's "
                                       f"budget ({self.budget})")
        cls = selector_class(self.selector)
        params = dict(self.selector_params)
        unknown = sorted(set(params) - set(cls.param_names()))
        if unknown:
            raise SelectionConfigError(
                f"selector {self.selector!r} has no parameter {', '.join(map(repr, unknown))}; "
                f"its parameters: {', '.join(p for p in cls.param_names() if p not in SELECTOR_SETTINGS)}")
        try:
            self.build_selector()
        except (TypeError, ValueError) as exc:  # the selector's own checks (e.g. hybrid: core_size <= M)
            raise SelectionConfigError(f"selector {self.selector!r}: {exc}") from None

    @classmethod
    def check_settings(cls, **settings) -> dict[str, Any]:
        """Each of ``settings`` checked on its own (``SelectionConfigError`` naming the first bad one or an unknown
        name); returns them as a config would hold them. What depends on the other settings (a selector's own
        parameters, hybrid's ``core_size <= max_exemplars``) is checked when the config is built."""
        valid = [f.name for f in fields(cls)]
        unknown = sorted(set(settings) - set(valid))
        if unknown:
            raise SelectionConfigError(f"unknown selection setting {', '.join(map(repr, unknown))}; "
                                       f"valid: {', '.join(valid)}")
        return {name: check_setting(name, value) for name, value in settings.items()}

    # ----------------------------------------------------------------------------------------------
    @property
    def selector_class(self) -> type[ExemplarSelector]:
        return selector_class(self.selector)

    @property
    def resolved_attribute_source(self) -> str:
        """The attribute source in use: the configured one, else the selector's default ("none" when there
        are no attributes to predict)."""
        if self.attribute_source is not None:
            return self.attribute_source
        return self.selector_class.default_attribute_source if self.attributes else "none"

    def exemplar_capacity(self, capacity: float) -> float:
        """The tokens a query's exemplars may take, from what the whole-prompt budget leaves them (``budget`` -
        query prompt - output reserve): that, capped by ``exemplar_budget`` when there is one."""
        return capacity if self.exemplar_budget is None else min(capacity, self.exemplar_budget)

    def build_selector(self) -> ExemplarSelector:
        """A new, unfitted selector with this config's parameters."""
        accepted = set(self.selector_class.param_names())
        params = {name: getattr(self, name) for name in SELECTOR_SETTINGS if name in accepted}
        return make_selector(self.selector, **params, **self.selector_params)

    def with_settings(self, **settings) -> SelectionConfig:
        """``dataclasses.replace`` that names an unknown setting (``SelectionConfigError``) instead of
        raising ``TypeError``."""
        valid = [f.name for f in fields(self)]
        unknown = sorted(set(settings) - set(valid))
        if unknown:
            raise SelectionConfigError(f"unknown selection setting {', '.join(map(repr, unknown))}; "
                                       f"valid: {', '.join(valid)}")
        return dataclasses.replace(self, **settings) if settings else self

    def to_dict(self) -> dict[str, Any]:
        """JSON-compatible (tuples become lists)."""
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out.update(attributes=list(self.attributes), context_fields=list(self.context_fields),
                   embed_fields=None if self.embed_fields is None else list(self.embed_fields),
                   shared_fields=None if self.shared_fields is None else list(self.shared_fields),
                   selector_params=dict(self.selector_params),
                   latency_rates=None if self.latency_rates is None else dict(self.latency_rates))
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SelectionConfig:
        """The config ``to_dict`` wrote; unknown keys are an error, missing ones take the defaults."""
        if not isinstance(data, Mapping):
            raise SelectionConfigError(f"a selection config is a JSON object, got {type(data).__name__}")
        return cls().with_settings(**dict(data))
