"""``check_selector``: the selector contract as a check suite a third-party selector can run (as scikit-learn's
``check_estimator``), the same checks the package's own selectors pass (``tests/optimizer/test_selector_checks.py``).

    from knapsack_dspy.selection.selector_checks import check_selector
    check_selector(MySelector)                    # raises SelectorContractError naming the broken rule
    check_selector(MySelector, alpha=0.5)         # with parameters

What is checked, on small pools it builds itself (random unit embeddings, token costs, a document per pair of
exemplars, every attribute the class declares in ``pool_attributes`` plus two labelled attributes, ``colour`` and
``shape``; a class whose ``__init__`` takes ``attributes`` gets ``("colour", "shape")`` unless ``params`` name them):

- the declarations (``fit_on``, ``mode``, ``default_attribute_source``, ``max_exemplars`` in ``__init__``);
- parameters: ``__init__`` stores them (``get_params`` gives back what was passed), ``set_params`` rejects an
  unknown one;
- ``fit`` returns the selector (with what ``fit_on`` asks for: validation embeddings and a capacity, or a
  scoring function); ``get_state`` is JSON and a fresh instance with ``set_state`` selects the same;
- ``select`` returns a ``Selection`` of distinct pool indices, at most ``max_exemplars`` of them, none excluded
  nor from the query's own document, within the request's capacity when the selector declares
  ``respects_budget``, the same twice for the same request;
- ``max_exemplars = 0`` gives an empty selection (unless the parameters refuse it with a ``ValueError``) and a
  capacity nothing fits in no error.
"""

from __future__ import annotations

import json

import numpy as np

from knapsack_dspy.errors import KnapsackDspyError
from knapsack_dspy.selection.exemplar_pool import ExemplarPool, Selection, SelectionRequest
from knapsack_dspy.selection.selectors.base import (
    FIT_ON_SCORING_FUNCTION,
    FIT_ON_VALIDATION_QUERIES,
    ExemplarSelector,
)
from knapsack_dspy.selection.selectors.registry import declaration_problems

__all__ = ["SelectorContractError", "check_selector"]

_ATTRIBUTES = {"colour": ("red", "green", "blue"), "shape": ("round", "square", "flat")}


class SelectorContractError(KnapsackDspyError, AssertionError):
    """A selector class breaks the selector contract; the message names the rule and what happened."""


def _same(a, b) -> bool:
    """Equal parameters, numpy arrays included (compared element by element)."""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return bool(np.array_equal(np.asarray(a), np.asarray(b)))
    return bool(a == b)


def _fail(selector, rule: str, detail: str):
    raise SelectorContractError(f"{type(selector).__name__ if not isinstance(selector, type) else selector.__name__}"
                                f": {rule}: {detail}")


def _pool(cls: type[ExemplarSelector], n: int = 24, seed: int = 0) -> ExemplarPool:
    rng = np.random.default_rng(seed)
    vectors = rng.normal(size=(n, 16)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    names = set(_ATTRIBUTES) | set(cls.pool_attributes)
    attributes = {name: np.asarray([_ATTRIBUTES.get(name, ("a", "b", "c"))[i % 3] for i in range(n)])
                  for name in names}
    return ExemplarPool([f"ex{i}" for i in range(n)], vectors, rng.integers(40, 200, n).astype(float), attributes,
                        doc_ids=np.asarray([f"doc{i // 2}" for i in range(n)]))


def _fit(selector, pool: ExemplarPool, capacity: float):
    kwargs = {}
    if selector.fit_on == FIT_ON_VALIDATION_QUERIES:
        kwargs = {"val_embeddings": pool.embeddings[:6], "capacity": capacity}
    elif selector.fit_on == FIT_ON_SCORING_FUNCTION:
        kwargs = {"score_fn": lambda indices: float(len(indices)), "capacity": capacity}
    fitted = selector.fit(pool, **kwargs)
    if fitted is not selector:
        _fail(selector, "fit returns the selector", f"got {fitted!r}")


def _check_selection(selector, pool: ExemplarPool, request: SelectionRequest, selection, capacity: float):
    if not isinstance(selection, Selection):
        _fail(selector, "select returns a Selection", f"got {type(selection).__name__}")
    indices = list(selection.indices)
    if any(not isinstance(i, (int, np.integer)) or not 0 <= int(i) < len(pool) for i in indices):
        _fail(selector, "select returns pool indices", f"got {indices}")
    if len(set(indices)) != len(indices):
        _fail(selector, "select returns distinct exemplars", f"got {indices}")
    if len(indices) > selector.max_exemplars:
        _fail(selector, "at most max_exemplars", f"{len(indices)} > {selector.max_exemplars}")
    excluded = [pool.ids[i] for i in indices if pool.ids[i] in request.exclude_ids
                or (request.doc_id is not None and pool.doc_ids is not None and pool.doc_ids[i] == request.doc_id)]
    if excluded:
        _fail(selector, "no excluded exemplar and none of the query's own document", f"chose {excluded}")
    cost = pool.cost_of(tuple(int(i) for i in indices))
    if selector.respects_budget and cost > capacity + 1e-9:
        _fail(selector, "within the capacity", f"exemplars cost {cost:g} > {capacity:g}")


def check_selector(cls: type[ExemplarSelector], **params) -> None:
    """Run the selector contract's checks on ``cls`` (built with ``params``); raise :class:`SelectorContractError`
    at the first broken rule. See the module docstring for the rules."""
    if not (isinstance(cls, type) and issubclass(cls, ExemplarSelector)):
        raise SelectorContractError(f"{cls!r} is not an ExemplarSelector subclass")
    problems = declaration_problems(cls)
    if problems:
        _fail(cls, "declarations", "; ".join(problems))
    defaults = {"max_exemplars": 3, **({"attributes": tuple(_ATTRIBUTES)} if "attributes" in cls.param_names() else {})}
    selector = cls(**{**defaults, **params})
    given = {**defaults, **params}
    stored = selector.get_params()
    for name, value in given.items():
        if name not in stored or not _same(stored[name], value):
            _fail(selector, "__init__ stores its parameters", f"{name}={value!r} came back as {stored.get(name)!r}")
    try:
        selector.set_params(no_such_parameter_xyz=1)
    except ValueError:
        pass
    else:
        _fail(selector, "set_params rejects an unknown parameter", "no_such_parameter_xyz was accepted")
    pool = _pool(cls)
    capacity = 400.0
    _fit(selector, pool, capacity)
    state = selector.get_state()
    try:
        state = json.loads(json.dumps(state))
    except (TypeError, ValueError) as exc:
        _fail(selector, "get_state is JSON", str(exc))
    request = SelectionRequest(pool.embeddings[5], capacity=capacity, target_attributes={"colour": "red"},
                               exclude_ids=frozenset({"ex7"}), doc_id="doc4", key="a query")
    first = selector.select(pool, request)
    _check_selection(selector, pool, request, first, capacity)
    again = selector.select(pool, request)
    if tuple(again.indices) != tuple(first.indices):
        _fail(selector, "the same request gives the same selection", f"{first.indices} then {again.indices}")
    restored = cls(**given).set_state(state)
    if not isinstance(restored, cls):
        _fail(selector, "set_state returns the selector", f"got {restored!r}")
    if tuple(restored.select(pool, request).indices) != tuple(first.indices):
        _fail(selector, "set_state(get_state()) selects the same", "a restored selector chose otherwise")
    try:  # parameters may refuse M = 0 (a hybrid's core larger than M): a ValueError there is the contract too
        empty = cls(**{**given, "max_exemplars": 0})
        _fit(empty, pool, capacity)
    except ValueError:
        empty = None
    if empty is not None and empty.select(pool, request).indices:
        _fail(selector, "max_exemplars = 0 selects nothing", "it selected exemplars")
    tight = SelectionRequest(pool.embeddings[5], capacity=10.0, key="a query")  # every exemplar costs >= 40
    fitted_tight = cls(**given)
    _fit(fitted_tight, pool, 10.0)
    _check_selection(selector, pool, tight, fitted_tight.select(pool, tight), 10.0)
