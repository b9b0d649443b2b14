"""``PoolSpec``: exemplars as a caller hands them to a selection, with what is known about each one.

One specification for both ways a ``SelectExemplars`` receives exemplars: ``fit`` (the pool it compiles) and
``update_pool`` (the exemplars it adds to a compiled pool). ``SelectExemplars`` turns it into the pool it holds
(``modules/pool_columns.py``: texts to embed, digests, attribute values as strings).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["PoolSpec", "as_pool_spec"]


@dataclass(frozen=True)
class PoolSpec:
    """Exemplars for a selection (``SelectExemplars.fit`` / ``update_pool``).

    ``examples``: the exemplars (``dspy.Example``s or mappings: their ``id``, ``doc_id`` and attribute fields are
    read); ``demos[i]``: ``examples[i]`` in the predictor's fields; ``costs[i]``: its token cost in that prompt
    (``fit`` needs them; ``update_pool`` measures the added demos itself); ``ids``: the pool ids (default: each
    example's ``id``); ``attributes``: ``{name: f(example) -> value}`` for pool attributes (default: the example's
    field of that name); ``query_inputs[i]``: ``examples[i]``'s inputs as a query with its question gives them, when
    they may differ from its demo's (a demo cut to its evidence; ``None``: the demo's): a query with those inputs is
    that exemplar and never selects it; ``groups`` / ``group_costs``: demos sharing the config's ``shared_fields``
    (``knapsack_dspy.modules.shared_fields``): ``costs`` are then what each adds without the shared value,
    ``group_costs`` the shared values' tokens. The sequences are copied (tuples; each demo a ``dict``) and their
    lengths checked (``ValueError``)."""

    examples: Sequence[Any]
    demos: Sequence[Mapping[str, Any]]
    costs: Sequence[float] | None = None
    ids: Sequence[str] | None = None
    attributes: Mapping[str, Callable[[Any], Any]] | None = None
    query_inputs: Sequence[Mapping[str, Any] | None] | None = None
    groups: Sequence[int] | None = None
    group_costs: Sequence[float] | None = None

    def __post_init__(self) -> None:
        n = len(self.examples)
        for name in ("demos", "costs", "ids", "query_inputs", "groups"):
            given = getattr(self, name)
            if given is not None and len(given) != n:
                raise ValueError(f"the pool's {name} has {len(given)} entries for {n} examples")
        freeze = object.__setattr__
        freeze(self, "examples", tuple(self.examples))
        freeze(self, "demos", tuple(dict(d) for d in self.demos))
        freeze(self, "attributes", dict(self.attributes or {}))
        if self.costs is not None:
            freeze(self, "costs", tuple(float(c) for c in self.costs))
        if self.ids is not None:
            freeze(self, "ids", tuple(str(i) for i in self.ids))
        if self.query_inputs is not None:
            freeze(self, "query_inputs", tuple(self.query_inputs))
        if self.groups is not None:
            freeze(self, "groups", tuple(int(g) for g in self.groups))
        if self.group_costs is not None:
            freeze(self, "group_costs", tuple(float(c) for c in self.group_costs))

    def __len__(self) -> int:
        return len(self.examples)

    def pool_ids(self, default: Callable[[int], object]) -> list[str]:
        """The exemplars' pool ids: ``ids``, else each example's ``id``, else ``default(position)``."""
        if self.ids is not None:
            return list(self.ids)
        return [str(example.get("id", default(k))) for k, example in enumerate(self.examples)]

    def doc_ids(self) -> list[str]:
        """Each exemplar's document id (``""``: none)."""
        return [str(example.get("doc_id", "")) for example in self.examples]

    def attribute(self, name: str, example: Any) -> Any:
        """``example``'s value of the attribute ``name``: its function's, else the example's field of that name."""
        get = (self.attributes or {}).get(name)
        return get(example) if get is not None else example.get(name)

    def inputs_as_queries(self) -> list[Mapping[str, Any] | None]:
        """``query_inputs``, ``None`` for each exemplar when not given."""
        return list(self.query_inputs) if self.query_inputs is not None else [None] * len(self)


def as_pool_spec(pool: PoolSpec | Sequence[Any], demos: Sequence[Mapping[str, Any]] | None = None,
                 costs: Sequence[float] | None = None, **fields: Any) -> PoolSpec:
    """``pool`` when it is a :class:`PoolSpec` (given alone), else ``PoolSpec(pool, demos, costs, **fields)``: the
    short form ``fit(examples, demos, costs, ids=...)`` / ``update_pool(examples, demos, ...)`` of the calls."""
    if isinstance(pool, PoolSpec):
        if demos is not None or costs is not None or fields:
            raise TypeError("give a PoolSpec alone, or the examples, their demos and the pool's other fields")
        return pool
    return PoolSpec(pool, demos if demos is not None else (), costs, **fields)
