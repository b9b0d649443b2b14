"""Demos that share a field value show it once: the first in a prompt shows it, those right after it refer to it.

Questions about one document carry the same table. With ``SelectionConfig.shared_fields=("table",)`` the pool's
demos are grouped by the values of those fields (:func:`group_demos`: only values two or more demos share form
a group); a demo's cost is then its cost *without* the shared value -- the field written as a short reference,
:func:`referring_demo` -- and each group has a shared cost, the tokens the value adds (its full demo's cost
minus its referring demo's: the token counts are additive per message, so this is exact). The knapsack pays
a group's shared cost once (``knapsack_dspy.selection``: ``groups`` / ``group_costs``); prompt order keeps a
group's demos together, and the selection marks the ones that follow a demo of their group, which are shown
referring (``SelectExemplars``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

__all__ = ["group_demos", "reference_text", "referring_demo"]


def reference_text(field: str) -> str:
    """What a demo shows in place of a value the demo before it already showed."""
    return f"(the same {field} as in the example above)"


def referring_demo(demo: Mapping, fields: Sequence[str]) -> dict:
    """``demo`` with each of ``fields`` it has replaced by its reference text."""
    return {key: (reference_text(key) if key in fields else value) for key, value in dict(demo).items()}


def _key(demo: Mapping, fields: Sequence[str]) -> str | None:
    values = [demo.get(f) for f in fields]
    if all(v in (None, "") for v in values):
        return None
    return json.dumps(values, sort_keys=True, ensure_ascii=False, default=str)


def group_demos(demos: Sequence[Mapping], fields: Sequence[str]) -> list[int]:
    """A group id per demo (-1: it shares its ``fields`` values with no other demo), numbered 0, 1, ... in order
    of first appearance."""
    if not fields:
        return [-1] * len(demos)
    keys = [_key(d, fields) for d in demos]
    counts: dict[str, int] = {}
    for key in keys:
        if key is not None:
            counts[key] = counts.get(key, 0) + 1
    numbers: dict[str, int] = {}
    out = []
    for key in keys:
        if key is None or counts[key] < 2:
            out.append(-1)
        else:
            out.append(numbers.setdefault(key, len(numbers)))
    return out
