"""Text with holes: what a formatter makes of values it inserts as they are, found by formatting marker values.

Measuring a large pool's token costs formats every demo (a DSPy adapter's messages) and every prompt (a chat
template's text); both put each value into fixed text unchanged. A formatter probed with *marker* values shows that
fixed text once: :func:`probe` formats two sets of markers and returns each text as literal pieces and hole numbers
(a :data:`Template`), and :func:`fill` puts real values in, with no formatter call. ``probe`` refuses (``None``) a
formatter that does not insert a value verbatim: a marker missing (escaped, trimmed, dropped) or repeated, or the
fixed text different for the two sets (it depended on the value).

Markers hold what a formatter could escape or treat apart -- quotes, a backslash, a newline, a tab, braces, angle
brackets, an ampersand, non-ASCII -- and the two sets differ in length. With ``edges=True`` the second set also
starts and ends with whitespace, so a formatter that trims values is refused too; without it (a formatter that
strips a whole message, whose edges may be a value's) the caller fills in only values without edge whitespace
(:func:`plain_value`).

A probe cannot see a formatter branch on what a value *says* (a chat template looking for a tag in the content):
callers check a filled text against the formatter's own now and then (``token_counter``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeGuard

__all__ = ["Template", "fill", "marker", "plain_value", "probe"]

#: Per text: literal pieces (str) and hole numbers (int), in order.
Template = tuple[tuple[str | int, ...], ...]


def marker(hole: int, variant: int, edges: bool = False) -> str:
    """The value standing for ``hole`` in probe ``variant`` (0 or 1); ``edges``: variant 1 padded with whitespace."""
    body = f"\u27e6{hole}{'~' * (variant + 1)}:\"'\\\n\t{{}}<>&\u00e9\u27e7"
    return f" \n{body}\n " if edges and variant == 1 else body


def _split(text: str, markers: Sequence[str]) -> tuple[str | int, ...] | None:
    """``text`` as literal pieces and the numbers of the markers in it (None: a marker occurs twice)."""
    found = []
    for hole, value in enumerate(markers):
        start = text.find(value)
        if start < 0:
            continue
        if text.find(value, start + 1) >= 0:
            return None
        found.append((start, hole, value))
    found.sort()
    parts: list[str | int] = []
    position = 0
    for start, hole, value in found:
        if start < position:  # overlapping markers
            return None
        parts += [text[position:start], hole]
        position = start + len(value)
    parts.append(text[position:])
    return tuple(parts)


def probe(render: Callable[[list[str]], list[str]], holes: int, *, edges: bool = False) -> Template | None:
    """The texts ``render(values)`` makes of ``holes`` values, as a :data:`Template`: every hole must appear exactly
    once over the texts, and two sets of markers must give the same fixed text; else ``None`` (see the module
    docstring)."""
    templates = []
    for variant in (0, 1):
        markers = [marker(hole, variant, edges) for hole in range(holes)]
        split = []
        for text in render(markers):
            parts = _split(text, markers)
            if parts is None:
                return None
            split.append(parts)
        templates.append(tuple(split))
    first, second = templates
    if first != second:
        return None
    used = sorted(part for parts in first for part in parts if isinstance(part, int))
    return first if used == list(range(holes)) else None


def fill(template: Template, values: Sequence[str]) -> list[str]:
    """The texts of ``template`` with ``values[hole]`` in each hole."""
    return ["".join(values[part] if isinstance(part, int) else part for part in parts) for parts in template]


def plain_value(value: object) -> TypeGuard[str]:
    """A value a template made without ``edges`` takes as it is: a non-empty ``str`` without leading or trailing
    whitespace (a formatter stripping a message would reach into a value at its edge)."""
    return type(value) is str and bool(value) and not value[0].isspace() and not value[-1].isspace()
