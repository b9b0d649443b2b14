"""Sample: the queries a compile selects for -- a seeded subset of the validation examples, else pool examples asked
as queries -- each as one predictor sees it, and what a sample query hands to selection besides its inputs."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from knapsack_dspy.teleprompt.predictor_pools import PredictorPool

__all__ = ["ValQuery", "gold_attributes", "pool_as_queries", "query_fields", "sample_pool_queries",
           "sample_validation"]


@dataclass
class ValQuery:
    """A validation example as one predictor sees it: its inputs, its prompt size without selected demos, and
    its fields for the proxies (gold attributes, gold program)."""

    example: Any
    inputs: dict
    base_tokens: int


def sample_validation(valset: Sequence[Any], inputs_of: Callable[[Any], dict | None], size: int, seed: int | None,
                      base_tokens: Callable[[Mapping[str, Any]], int]) -> list[ValQuery]:
    """The validation examples the search scores configurations on: those with inputs for the predictor
    (``inputs_of``), ``size`` of them drawn with ``seed`` (in their order) when there are more."""
    rng = np.random.default_rng(seed)
    queries = [(example, inputs_of(example)) for example in valset]
    found = [(example, inputs) for example, inputs in queries if inputs is not None]
    subset = ([found[i] for i in sorted(rng.choice(len(found), size, replace=False))]
              if len(found) > size else found)
    return [ValQuery(example, inputs, base_tokens(inputs)) for example, inputs in subset]


def pool_as_queries(pool: PredictorPool) -> list[ValQuery]:
    """The pool's examples as queries with their demos' inputs (what a selector fits on without a valset)."""
    return [ValQuery(example, demo, 0) for example, demo in zip(pool.examples, pool.demos, strict=True)]


def sample_pool_queries(pool: PredictorPool, inputs_of: Callable[[Any], dict | None], count: int, seed: int | None,
                        base_tokens: Callable[[Mapping[str, Any]], int]) -> list[ValQuery]:
    """Up to ``count`` pool examples asked as queries (each never selects itself), drawn with ``seed`` among the
    first ``2 * count`` of a permutation that have inputs for the predictor."""
    queries: list[ValQuery] = []
    picks = np.random.default_rng(seed).permutation(len(pool.examples))
    for i in picks[: count * 2]:
        inputs = inputs_of(pool.examples[int(i)])
        if inputs is not None:
            queries.append(ValQuery(pool.examples[int(i)], inputs, base_tokens(inputs)))
        if len(queries) == count:
            break
    return queries


def query_fields(example) -> dict:
    """A validation example's fields as LM attribute prediction sees them (its raw fields)."""
    return {k: v for k, v in dict(example).items() if k not in ("id", "doc_id")}


def gold_attributes(select, example, functions: Mapping[str, Callable[[Any], Any]]) -> dict:
    """The query's gold attribute values (what oracle selectors aim at): the selection's attributes, each from its
    function in ``functions`` or else the example's field of that name; those without a value left out."""
    out = {}
    for attr in select.config.attributes:
        get = functions.get(attr)
        out[attr] = get(example) if get is not None else example.get(attr)
    return {k: v for k, v in out.items() if v is not None}
