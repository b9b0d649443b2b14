"""What a pool attribute's values mean to selection, declared by whoever builds the pool.

The selection engine knows no attribute by name. An application that labels its exemplars (a document's
*modality*, an answer's *type*) declares each attribute once with :func:`declare_attribute`:

- ``values``: the attribute's values in their order (quota-based selectors fill them in this order, SEER's template
  ranges over them); empty: the values the pool holds, sorted;
- ``uncertain``: predicted values that say "not sure" -- SEER's template then asks for ``beta * M`` exemplars of
  **each** value instead of ``alpha * M`` of the predicted one (SEER treats a "hybrid" modality so);
- ``signature`` and ``inputs``: how a language model is asked for a query's value (``attribute_source="lm"``): a
  DSPy signature whose output field is the attribute, and a function from a query's fields to its inputs.

An undeclared attribute is an :class:`AttributeDomain` with no values, nothing uncertain and no LM question.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["KIND", "AttributeDomain", "attribute_domain", "declare_attribute", "declared_attributes"]

#: the pool attribute that names an exemplar's kind of solution (``case_coverage`` covers the kinds): given by whoever
#: builds the pool (``compile_hooks.pool_attributes``), else derived from the pool (``attribute_classifier``)
KIND = "kind"


@dataclass(frozen=True)
class AttributeDomain:
    """One pool attribute's declaration (see the module docstring)."""

    name: str
    values: tuple[str, ...] = ()
    uncertain: tuple[str, ...] = ()
    signature: Any = None
    inputs: Callable[[Mapping], dict] | None = None

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"an attribute's name is a non-empty string, got {self.name!r}")
        object.__setattr__(self, "values", tuple(str(v) for v in self.values))
        object.__setattr__(self, "uncertain", tuple(str(v) for v in self.uncertain))
        if self.values and not set(self.uncertain) <= set(self.values):
            extra = sorted(set(self.uncertain) - set(self.values))
            raise ValueError(f"attribute {self.name!r}: uncertain values {extra} are not among its values "
                             f"{list(self.values)}")
        if (self.signature is None) != (self.inputs is None):
            raise ValueError(f"attribute {self.name!r}: an LM question needs both a signature and an inputs function")

    def question_inputs(self, fields: Mapping) -> dict:
        """The inputs of the attribute's LM question for a query's or an exemplar's ``fields`` (``ValueError`` when
        it declares no question)."""
        if self.inputs is None:
            raise ValueError(f"attribute {self.name!r} declares no LM question (declare_attribute(name, "
                             "signature=..., inputs=...))")
        return self.inputs(fields)

    def domain(self, labels) -> list[str]:
        """The values to range over for a pool's ``labels``: the declared values the labels hold, in their order
        (no declared values: the labels' own values, sorted)."""
        present = {str(v) for v in labels}
        return [v for v in (self.values or sorted(present)) if v in present]


_DECLARED: dict[str, AttributeDomain] = {}


def declare_attribute(name: str, values=(), uncertain=(), signature=None, inputs=None) -> AttributeDomain:
    """Declare (or re-declare, replacing) attribute ``name``; returns the declaration."""
    declared = AttributeDomain(name, tuple(values), tuple(uncertain), signature, inputs)
    _DECLARED[name] = declared
    return declared


def attribute_domain(name: str) -> AttributeDomain:
    """The declaration of ``name``; an empty one when nobody declared it."""
    return _DECLARED.get(name) or AttributeDomain(name)


def declared_attributes() -> dict[str, AttributeDomain]:
    """Every declaration, by name (a copy)."""
    return dict(_DECLARED)
