"""Attribute (diversity) constraints for the knapsack, as SEER's templates and as user-defined rules.

All helpers return lists of :class:`AttributeConstraint` over a candidate list, so they compose:
``constraints = seer_template(modalities, "table", M, 0.75, 0.25) + max_per_value(doc_ids, 2)``.
Counts are absolute (``alpha * M`` items) as in SEER; fractions of the chosen set are available through
``attribute_constraint(..., min_fraction=...)``.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import numpy as np

from knapsack_dspy.selection.knapsack import AttributeConstraint


def seer_template(values: Sequence[Hashable], predicted: Hashable, max_items: int, alpha: float,
                  beta: float, attribute: str = "attribute", uncertain: Sequence[Hashable] = (),
                  domain: Sequence[Hashable] | None = None) -> list[AttributeConstraint]:
    """SEER's diversity template for one attribute.

    For a predicted value ``v``: at least ``alpha * M`` chosen items have value ``v`` and at least
    ``beta * M`` have another value. When ``v`` is in ``uncertain`` (SEER treats a "hybrid" modality so),
    at least ``beta * M`` items of **each** value of ``domain`` instead.
    """
    if not 0.0 <= alpha <= 1.0 or not 0.0 <= beta <= 1.0:
        raise ValueError(f"alpha and beta must be in [0, 1], got alpha={alpha}, beta={beta}")
    arr = np.asarray([str(v) for v in values])
    predicted_s = str(predicted)
    if predicted in uncertain:
        domain = list(domain) if domain is not None else sorted(set(arr.tolist()))
        return [AttributeConstraint(arr == str(d), min_count=beta * max_items, name=f"{attribute}={d}>=beta*M")
                for d in domain if beta > 0]
    out = []
    if alpha > 0:
        out.append(AttributeConstraint(arr == predicted_s, min_count=alpha * max_items,
                                       name=f"{attribute}={predicted_s}>=alpha*M"))
    if beta > 0:
        out.append(AttributeConstraint(arr != predicted_s, min_count=beta * max_items,
                                       name=f"{attribute}!={predicted_s}>=beta*M"))
    return out


def attribute_constraint(members: Sequence[bool] | np.ndarray, *, min_count: float = 0.0,
                         max_count: float | None = None, min_fraction: float | None = None,
                         max_fraction: float | None = None, name: str = "") -> AttributeConstraint:
    """A user-defined boolean attribute with count and/or fraction bounds."""
    return AttributeConstraint(np.asarray(members, dtype=bool), min_count=min_count, max_count=max_count,
                               name=name, min_fraction=min_fraction, max_fraction=max_fraction)


def value_constraint(values: Sequence[Hashable], value: Hashable, *, min_count: float = 0.0,
                     max_count: float | None = None, min_fraction: float | None = None,
                     max_fraction: float | None = None, attribute: str = "attribute") -> AttributeConstraint:
    """Bounds on how many chosen items have ``attribute == value`` (categorical attribute)."""
    members = np.asarray([v == value for v in values], dtype=bool)
    return attribute_constraint(members, min_count=min_count, max_count=max_count, min_fraction=min_fraction,
                                max_fraction=max_fraction, name=f"{attribute}={value}")


def max_per_value(values: Sequence[Hashable], max_count: int, attribute: str = "doc_id"
                  ) -> list[AttributeConstraint]:
    """At most ``max_count`` chosen items share one value (e.g. "at most 2 exemplars from one document").

    Only values held by more than ``max_count`` candidates get a constraint (the others cannot break it).
    """
    values = list(values)
    counts: dict[Hashable, int] = {}
    for v in values:
        counts[v] = counts.get(v, 0) + 1
    return [value_constraint(values, v, max_count=max_count, attribute=attribute)
            for v, c in counts.items() if c > max_count]
