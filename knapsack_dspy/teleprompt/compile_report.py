"""Report: what a compile says about each predictor (``program.compile_report["predictors"][name]``, saved with the
program): its pool and budget, the configurations tried with their proxy and LM scores, the choice, how its
candidates are searched, where its kinds came from, how many sample queries get no exemplar (a
:class:`ZeroShotWarning` when most do) and how well query attributes are predicted."""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Mapping
from typing import Any

import numpy as np

from knapsack_dspy.llm.token_counter import token_count_kind
from knapsack_dspy.modules.select_exemplars import SelectExemplars
from knapsack_dspy.selection.attribute_domains import KIND
from knapsack_dspy.selection.config import SelectionConfig
from knapsack_dspy.selection.token_price import PriceFit
from knapsack_dspy.teleprompt.compile_target import CompileTarget
from knapsack_dspy.teleprompt.errors import ZeroShotWarning
from knapsack_dspy.teleprompt.pool_measurement import PoolMeasurement
from knapsack_dspy.teleprompt.predictor_pools import PredictorPool
from knapsack_dspy.teleprompt.query_samples import ValQuery, gold_attributes, query_fields, sample_pool_queries

__all__ = ["ZERO_SHOT_CHECK_QUERIES", "attribute_accuracy", "check_zero_shot", "choice_report", "predictor_report"]

#: Queries a compile selects for to check that its predictors will send exemplars at all.
ZERO_SHOT_CHECK_QUERIES = 12


def predictor_report(config: SelectionConfig, budget: int, token_model: str | None, counter: Any,
                     pool: PredictorPool, valset_size: int, val_subset: list[ValQuery],
                     measured: PoolMeasurement) -> dict[str, Any]:
    """The report's opening: the settings' mode and selector, the budget, how tokens were counted, the pool and the
    validation queries (``configs``: filled by the search; ``_pool_tokens``: summed over the predictors by
    compile, then removed)."""
    return {"mode": config.selector_class.mode, "selector": config.selector, "budget": budget,
            "token_model": token_model, "token_count": token_count_kind(counter), "pool_size": len(pool.demos),
            "pool_skipped": pool.skipped, "valset_size": valset_size, "val_subset_size": len(val_subset),
            "configs": [], "_pool_tokens": measured.pool_tokens,
            **({"shared_groups": len(measured.group_costs)} if measured.groups else {}),
            **({"exemplar_budget": config.exemplar_budget} if config.exemplar_budget is not None else {})}


def choice_report(select: SelectExemplars, point: Mapping[str, Any], kinds: str) -> dict[str, Any]:
    """The configuration chosen (its point), how its candidates are searched and, for a selector covering kinds,
    where the kinds came from."""
    out: dict[str, Any] = {"chosen": dict(point), "candidate_search": select.candidate_search()}
    if KIND in select.config.selector_class.pool_attributes:  # where the kinds it covers come from
        out["kinds"] = kinds
    price_fit = select.selector_state.get("price_fit")
    if price_fit is not None:  # token_price="auto": the price read from the pool, and how
        out["token_price"] = {**price_fit, "summary": PriceFit.from_dict(price_fit).describe()}
    return out


def check_zero_shot(target: CompileTarget, pool: PredictorPool, val_subset: list[ValQuery],
                    measured: PoolMeasurement) -> dict:
    """Select for a sample of queries (validation queries, else pool examples asked as queries: each never
    selects itself) and warn (``ZeroShotWarning``) when most get no exemplar, with the first one's reason.
    A query's selectable inputs (``context_fields``, ``Pieces``) count with no piece shown: the evidence competes with
    the demos per call, so only a demo that fits beside no evidence at all is sure to be left out.
    Returns ``{"queries", "empty", "reason"}`` for the compile report. (Called by ``KnapsackFewShot``'s compile of a
    predictor: the warning names the caller of ``compile``.)"""
    from knapsack_dspy.modules.selectable_context import selectable_fields  # a call's pieces

    select, functions = target.select, target.attribute_functions
    if not select.config.selector_class.selects_demos or select.config.max_exemplars == 0:
        return {"queries": 0, "empty": 0, "reason": "the selector sends no exemplars by design"}
    queries = val_subset[:ZERO_SHOT_CHECK_QUERIES]
    if not queries:
        queries = sample_pool_queries(pool, target.inputs, ZERO_SHOT_CHECK_QUERIES, select.config.seed,
                                      measured.base_tokens)
    empty, reasons = 0, []
    for q in queries:
        pieces = selectable_fields(q.inputs, select.config.context_fields)
        if pieces:  # the prompt without any piece
            shown = {**q.inputs, **{name: p.show(()) for name, p in pieces.items()}}
            q = dataclasses.replace(q, inputs={**q.inputs, **{name: p.whole() for name, p in pieces.items()}},
                                    base_tokens=measured.base_tokens(shown))
        if select.attribute_source == "lm":  # selecting would ask the LM for the attributes: the budget only
            reason = select.budget_shortfall(q.base_tokens)
            empty += reason is not None
            reasons += [reason] if reason else []
            continue
        chosen = select(base_tokens=q.base_tokens, id=q.example.get("id"), doc_id=q.example.get("doc_id"),
                        attribute_fields=query_fields(q.example),
                        **{**gold_attributes(select, q.example, functions), **q.inputs})
        if not chosen.selection["ids"]:
            empty += 1
            reasons.append(chosen.selection.get("reason") or "")
    reason = reasons[0] if reasons else ""
    if queries and empty * 2 >= len(queries):
        warnings.warn(f"predictor {target.name!r} will send no exemplar to {empty} of {len(queries)} sample "
                      f"queries (selector {select.config.selector!r}, M = {select.config.max_exemplars}): {reason}",
                      ZeroShotWarning, stacklevel=4)
    return {"queries": len(queries), "empty": empty, "reason": reason}


def attribute_accuracy(select: SelectExemplars, val_subset: list[ValQuery], functions: Mapping) -> dict:
    """How often the selection's attribute source (a classifier, the LM) predicts a validation query's gold
    attribute values, per attribute with gold values (none for gold or no attributes)."""
    out: dict[str, dict] = {}
    if select.attribute_source in ("none", "gold"):
        return out
    for attr in select.config.attributes:
        golds = [gold_attributes(select, q.example, functions).get(attr) for q in val_subset]
        if not any(golds):
            continue
        embeddings: np.ndarray = select.embedder.encode([select.query_text(q.inputs) for q in val_subset])
        preds = [select.predict_attributes(e, q.inputs, query_fields(q.example)).get(attr)
                 for e, q in zip(embeddings, val_subset, strict=True)]
        pairs = [(p, g) for p, g in zip(preds, golds, strict=True) if g]
        out[attr] = {"source": select.attribute_source, "accuracy": sum(p == g for p, g in pairs) / len(pairs),
                     "n": len(pairs)}
    return out
