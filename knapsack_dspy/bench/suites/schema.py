"""What a suite file may say, checked when it is loaded: every bad value of every run group reported at once.

Two passes, both collecting instead of stopping at the first problem:

1. **types** (pydantic, strict, unknown keys forbidden): each run group (the top level merged with one
   ``[[runs]]`` table) against the fields of ``RunSpec``; a grid key may hold one value or a non-empty list;
2. **meaning**, per expanded run: the dataset, the pipeline for that dataset, SARA's retrieval strategy, the
   selector (a registered one, or a DSPy baseline ``dspy_*``) and, for our selectors, the whole
   ``SelectionConfig`` the run would compile with (alpha in [0, 1], an attribute source, ...).

Each problem is one line, ``runs[i] <key>: <reason>`` (``<key>: <reason>`` for a suite without ``[[runs]]``);
``suite_from_dict`` raises one ``SuiteError`` naming the file and holding them all, before any run starts.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

from pydantic import ConfigDict, Field, StrictBool, StrictFloat, StrictInt, StrictStr, ValidationError, create_model

__all__ = ["SUITE_KEYS", "group_problems", "run_problems"]

SUITE_KEYS = ("name", "runs", "output", "description")  # top-level keys that describe the suite, not a run


def _field_type(annotation: str) -> Any:
    """The strict pydantic type of a ``RunSpec`` field from its annotation (``from __future__`` strings)."""
    simple = annotation.replace(" ", "")
    table = {"int": StrictInt, "float": StrictFloat | StrictInt, "str": StrictStr, "bool": StrictBool,
             "tuple": list[StrictStr] | StrictStr,  # a list of names (one value, not a grid; an empty one is fine)
             "dict": dict[StrictStr, Any]}  # a TOML table (its values are checked by what reads them)
    optional = simple.endswith("|None")
    base = table[simple.removesuffix("|None")]
    return base | None if optional else base


def group_model(run_spec: type, grid_keys: tuple[str, ...]) -> type:
    """A pydantic model of one run group: every ``RunSpec`` field optional, grid keys also as lists."""
    fields: dict[str, Any] = {}
    for field in dataclasses.fields(run_spec):
        kind = _field_type(str(field.type))
        if field.name in grid_keys:
            kind = kind | list[kind] if "list[" not in str(kind) else kind
            fields[field.name] = (kind, Field(default=None))
        else:
            fields[field.name] = (kind, Field(default=None))
    for key in SUITE_KEYS:
        fields[key] = (Any, None)
    return create_model("RunGroup", __config__=ConfigDict(strict=True, extra="forbid"), **fields)


def group_problems(model: type, group: Mapping[str, Any], where: str,
                   grid: tuple[str, ...]) -> tuple[list[str], set[str]]:
    """Type problems of one run group, one line per key (for a list, the first bad item), and the keys that have
    one (the rest of the group can still be checked for meaning). ``grid``: the keys that may hold a list of
    values (one run each)."""
    problems = []
    for name in sorted(k for k, v in group.items() if isinstance(v, list) and not v and k in grid):
        problems.append(f"{where}{name}: an empty list (give at least one value)")
    try:
        model.model_validate(dict(group))
    except ValidationError as exc:
        by_key: dict[str, list[dict]] = {}
        for error in exc.errors():
            by_key.setdefault(str(error["loc"][0]) if error["loc"] else "?", []).append(error)
        for key, errors in by_key.items():
            if any(e["type"] == "extra_forbidden" for e in errors):
                problems.append(f"{where}{key}: unknown key (valid: {', '.join(sorted(model.model_fields))})")
                continue
            if isinstance(group.get(key), list) and not group[key] and key in grid:
                continue  # reported above
            indexed = [e for e in errors if any(isinstance(part, int) for part in e["loc"])]
            error = indexed[0] if indexed and isinstance(group.get(key), list) else errors[0]
            index = next((part for part in error["loc"] if isinstance(part, int)), None)
            label = key if index is None else f"{key}[{index}]"
            problems.append(f"{where}{label}: {error['msg'].lower()} (got {error.get('input')!r})")
    bad = {line[len(where):].split(":", 1)[0].split("[", 1)[0] for line in problems}
    return problems, bad


def run_problems(run: Any, where: str, checks: Mapping[str, Callable[[Any], str | None]]) -> list[str]:
    """Meaning problems of one expanded run: ``checks`` maps a key to a function returning a reason or None."""
    out = []
    for key, check in checks.items():
        reason = check(run)
        if reason:
            out.append(f"{where}{key}: {reason}")
    return out
