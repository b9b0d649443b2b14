"""A bench run's selection settings: ``SelectionConfig``'s fields and defaults, derived, never restated.

``SelectionConfig`` (``selection/config.py``) is the one home of the selection settings, their defaults and their
checks. ``RunSpec`` (``bench/suites/suite.py``) declares none of them: :func:`with_selection_settings` adds every field
of ``SelectionConfig`` to it, with ``SelectionConfig()``'s value as the default, so a setting added there is a suite key
(type-checked by the suite loader, checked by ``SelectionConfig`` itself) and part of the run's config with no edit
here. Two things differ for a run, both declared here:

- :data:`BENCH_DEFAULTS`: where a run's default is not ``SelectionConfig``'s (the token budget);
- a suite is TOML, which has no null: a setting that holds a name or None (``attribute_source``) holds ``""`` for
  None in a run (as run keys always have), and a run's lists of names are tuples.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from knapsack_dspy.docqa.data.example_fields import DOCUMENT_ATTRIBUTES
from knapsack_dspy.selection.config import SelectionConfig

__all__ = ["BENCH_DEFAULTS", "SELECTION_SETTINGS", "config_values", "suite_kind", "with_selection_settings"]

#: Where a bench run's default differs from ``SelectionConfig``'s -- the only place. ``budget``: a compiled
#: program without one fits its model's context window (``SelectionConfig(budget=None)``), but a bench run compares
#: selectors at one token budget, the same whatever model answers: SEER's 2,048 tokens (every committed suite
#: states its budget; run keys name it, ``b2048``). ``attributes``: the selection engine constrains none unless told,
#: the document-QA tasks SEER's modality.
BENCH_DEFAULTS: dict[str, Any] = {"budget": 2048, "attributes": DOCUMENT_ATTRIBUTES}

#: Every setting of ``SelectionConfig``, in its order: the selection fields of a ``RunSpec``.
SELECTION_SETTINGS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(SelectionConfig))

# SelectionConfig's annotations (strings: ``from __future__ import annotations``) in the suite schema's words.
_KINDS = {"int": "int", "float": "float", "str": "str", "bool": "bool", "tuple[str, ...]": "tuple",
          "Mapping[str, Any]": "dict"}


def suite_kind(annotation: str) -> tuple[str, bool]:
    """(kind, may be None) of a ``SelectionConfig`` annotation: ``int``, ``float``, ``str``, ``bool``, ``tuple`` (a
    list of names) or ``dict``; a ``TypeError`` for a type a suite cannot hold (give the new setting one of those)."""
    parts = [part.strip() for part in str(annotation).split("|")]
    base = [part for part in parts if part != "None"]
    if len(base) != 1 or base[0] not in _KINDS:
        raise TypeError(f"SelectionConfig annotation {annotation!r}: a suite holds {', '.join(_KINDS)} (or None)")
    return _KINDS[base[0]], "None" in parts


def _names_or_none(kind: str, nullable: bool) -> bool:
    return kind == "str" and nullable


def _run_field(config_field: dataclasses.Field, defaults: SelectionConfig) -> tuple[str, dataclasses.Field]:
    """The ``RunSpec`` annotation and field of one ``SelectionConfig`` field."""
    kind, nullable = suite_kind(config_field.type)
    default = BENCH_DEFAULTS.get(config_field.name, getattr(defaults, config_field.name))
    if _names_or_none(kind, nullable):
        annotation = "str"
        default = "" if default is None else default
    else:
        annotation = f"{kind} | None" if nullable else kind
    if isinstance(default, Mapping):
        return annotation, dataclasses.field(default_factory=lambda value=dict(default): dict(value))
    return annotation, dataclasses.field(default=default)


def with_selection_settings(cls: type, config: type = SelectionConfig) -> type:
    """Add every ``SelectionConfig`` (``config``) setting to ``cls`` as an annotated field with its run default
    (apply it under ``@dataclass``); ``cls`` must not declare one itself (its default would be a second home)."""
    annotations = cls.__annotations__  # the class's own: its body declares fields
    declared = sorted(set(annotations) & {f.name for f in dataclasses.fields(config)})
    if declared:
        raise TypeError(f"{cls.__name__} declares selection settings {declared}: SelectionConfig is their home")
    defaults = config()
    for config_field in dataclasses.fields(config):
        annotations[config_field.name], field = _run_field(config_field, defaults)
        setattr(cls, config_field.name, field)
    return cls


def config_values(run: Any, config: type = SelectionConfig) -> dict[str, Any]:
    """``run``'s selection settings as ``SelectionConfig`` (``config``) takes them (``""`` back to None, lists as
    tuples)."""
    values = {}
    for config_field in dataclasses.fields(config):
        kind, nullable = suite_kind(config_field.type)
        value = getattr(run, config_field.name)
        if _names_or_none(kind, nullable):
            value = value or None
        elif kind == "tuple" and isinstance(value, (list, tuple)):
            value = tuple(value)
        values[config_field.name] = value
    return values
