"""Reading a saved ``SelectExemplars`` state: its checks, its pool and the migrations of older versions.

``SelectExemplars.dump_state`` writes the current version (``saved_format.SELECT_EXEMPLARS_STATE_VERSION``);
``load_state`` reads every version in ``SELECT_EXEMPLARS_STATE_VERSIONS`` through :func:`read_state`, which
rejects a malformed or inconsistent state with a message naming the problem (``ValueError``) before anything of
the module changes, and finds a referenced pool store (``PoolStoreError`` when it is missing or altered).
Loaded when a program is saved or loaded, not with the module.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from knapsack_dspy.modules.pool_columns import PoolColumns
from knapsack_dspy.saved_format import SELECT_EXEMPLARS_STATE_VERSION, SELECT_EXEMPLARS_STATE_VERSIONS
from knapsack_dspy.selection.config import SELECTOR_SETTINGS, SelectionConfig


@dataclass(frozen=True)
class SavedSelection:
    """A checked saved state: its settings and its pool (the rest is read from ``state``)."""

    config: SelectionConfig
    pool: PoolColumns
    state: Mapping[str, Any]


def read_state(state: Any) -> SavedSelection:
    """Check a saved state, migrate its settings and find its pool (a version-5 state's pool store included)."""
    validate_state(state)
    try:
        config = (config_of_version_1(state["params"]) if state["version"] == 1
                  else SelectionConfig.from_dict(state["config"]))
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"invalid SelectExemplars state: {exc}") from None
    # version 5: a large pool lives in a pool store, found (or refused) before anything changes
    pool = (PoolColumns.from_store(referenced_store(state)) if "pool_store" in state
            else PoolColumns.from_state(state["pool"]))
    return SavedSelection(config, pool, state)


def referenced_store(state: Mapping):
    """The pool store a version-5 state references, found and checked (``PoolStoreError``: missing, altered)."""
    from knapsack_dspy.selection import pool_store

    ref = state["pool_store"]
    store = pool_store.find_store(ref["hash"])
    if len(store) != ref["size"] or store.embedder != state["embedder_model"]:
        raise pool_store.PoolStoreError(
            f"pool store {ref['hash'][:16]} at {store.path} holds {len(store)} exemplars embedded by "
            f"{store.embedder!r}; the program expects {ref['size']} embedded by {state['embedder_model']!r}")
    return store


def validate_state(state: Any) -> None:
    """Reject a saved state that is malformed or inconsistent, with a message naming the problem."""

    def fail(msg):
        raise ValueError(f"invalid SelectExemplars state: {msg}")

    if not isinstance(state, dict):
        fail("not a JSON object")
    if state.get("version") not in SELECT_EXEMPLARS_STATE_VERSIONS:
        fail(f"state version {state.get('version')!r} is not supported (expected 1 to "
             f"{SELECT_EXEMPLARS_STATE_VERSION})")
    stored = state["version"] >= 5 and "pool_store" in state  # version 5: a pool store in place of "pool"
    for key in ("params" if state["version"] == 1 else "config", "pool_store" if stored else "pool",
                "classifiers", "embedder_model", "resolved_budget"):
        if key not in state:
            fail(f"missing {key!r}")
    if stored:
        ref = state["pool_store"]
        if not (isinstance(ref, dict) and isinstance(ref.get("hash"), str) and len(ref["hash"]) == 64
                and isinstance(ref.get("size"), int) and ref["size"] > 0):
            fail("pool_store must be {\"hash\": 64 hex digits, \"size\": a positive count}")
        if not isinstance(state["resolved_budget"], int) or state["resolved_budget"] <= 0:
            fail(f"resolved_budget must be a positive integer, got {state['resolved_budget']!r}")
        return
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
    digests = pool.get("query_digests") or []
    if digests and (len(digests) != n or not all(isinstance(d, str) for d in digests)):
        fail(f"pool.query_digests must be {n} strings, one per id")
    groups, group_costs = pool.get("groups") or [], pool.get("group_costs") or []
    if groups and len(groups) != n:
        fail(f"pool.groups has {len(groups)} entries for {n} ids")
    if any(not isinstance(g, int) or not -1 <= g < len(group_costs) for g in groups):
        fail("pool.groups must be group ids in [-1, len(group_costs))")
    if any(not isinstance(c, (int, float)) or not math.isfinite(c) or c < 0 for c in group_costs):
        fail("pool.group_costs must be finite non-negative numbers")
    budget = state["resolved_budget"]
    if n and (not isinstance(budget, int) or budget <= 0):
        fail(f"resolved_budget must be a positive integer, got {budget!r}")


def config_of_version_1(params: Mapping[str, Any]) -> SelectionConfig:
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
