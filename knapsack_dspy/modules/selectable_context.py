"""Selectable context: an input field whose value holds *pieces* a selecting predictor may cut per call.

A DSPy RAG program's ``context: list[str]`` is the common case: declare the field in
``SelectionConfig(context_fields=("context",))`` and each passage becomes a knapsack item beside the demos
(``docs/core.md``, "Selectable context"). A field whose pieces are not a plain list -- a document's table rows under
their header rows, a statute's sections under their headings -- holds a :class:`Pieces` value, which is selectable
whatever the config says:

- ``texts``: each piece's text (what its relevance to the query and the query's terms it covers are read from);
- ``render(kept)``: the field's value showing the pieces ``kept`` (ascending indices: document order), with the fixed
  parts they need (``render(())``: the field with no piece);
- ``needs``: per piece the index of the fixed part it needs (-1: none), e.g. every table row needs the header rows;
- ``fixed_texts``: the fixed parts, shown once whenever a piece needing them is shown (their cost shared: a
  knapsack group cost).

What a piece costs is measured in the real prompt format (:func:`measure_pieces`): the field's text as the adapter
writes it (DSPy's ``format_field_value``) counted by the predictor's token counter.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from knapsack_dspy.errors import KnapsackDspyError

__all__ = ["EvidenceOffer", "PieceCosts", "Pieces", "PiecesError", "measure_pieces", "selectable_fields"]


class PiecesError(KnapsackDspyError, ValueError):
    """A selectable field's pieces are malformed (the message says which part)."""


class Sublist:
    """``render`` of a plain list: the kept items, in their order (picklable, unlike a lambda)."""

    def __init__(self, values: Sequence[Any]):
        self.values = list(values)

    def __call__(self, kept: tuple[int, ...]) -> list:
        return [self.values[i] for i in kept]


@dataclass(frozen=True)
class Pieces:
    """A field value whose pieces a selecting predictor may cut per call (see the module docstring)."""

    texts: tuple[str, ...]
    render: Callable[[tuple[int, ...]], Any]
    needs: tuple[int, ...] = ()
    fixed_texts: tuple[str, ...] = ()

    def __post_init__(self):
        if isinstance(self.texts, str) or not isinstance(self.texts, Iterable):
            raise PiecesError(f"Pieces.texts must be a sequence of strings, got {type(self.texts).__name__}")
        texts = tuple(self.texts)
        if not all(isinstance(t, str) for t in texts):
            raise PiecesError("Pieces.texts must all be strings")
        if not callable(self.render):
            raise PiecesError("Pieces.render must be callable: render(kept indices) -> the field's value")
        fixed_texts = tuple(self.fixed_texts)
        if not all(isinstance(t, str) for t in fixed_texts):
            raise PiecesError("Pieces.fixed_texts must all be strings")
        needs = tuple(int(k) for k in self.needs) if self.needs else (-1,) * len(texts)
        if len(needs) != len(texts):
            raise PiecesError(f"Pieces.needs has {len(needs)} entries for {len(texts)} pieces")
        if any(k < -1 or k >= len(fixed_texts) for k in needs):
            raise PiecesError(f"Pieces.needs holds a fixed part outside [-1, {len(fixed_texts) - 1}]")
        object.__setattr__(self, "texts", texts)
        object.__setattr__(self, "needs", needs)
        object.__setattr__(self, "fixed_texts", fixed_texts)

    @classmethod
    def of_list(cls, values: Sequence[Any]) -> Pieces:
        """A plain list's pieces: each item a piece (its text ``str(item)``), ``render`` the kept sublist."""
        values = list(values)
        return cls(tuple(str(v) for v in values), Sublist(values))

    def __len__(self) -> int:
        return len(self.texts)

    def show(self, kept: Iterable[int] = ()) -> Any:
        """The field's value showing the pieces ``kept`` (in document order, each once)."""
        indices = tuple(sorted({int(i) for i in kept}))
        if indices and (indices[0] < 0 or indices[-1] >= len(self.texts)):
            raise PiecesError(f"pieces {list(indices)} outside [0, {len(self.texts) - 1}]")
        return self.render(indices)

    def whole(self) -> Any:
        """The field's value showing every piece."""
        return self.show(range(len(self.texts)))

    def text_with_fixed(self, index: int) -> str:
        """Piece ``index``'s text with the fixed part it needs (what its coverage of the query's terms reads)."""
        need = self.needs[index]
        return self.texts[index] if need < 0 else f"{self.fixed_texts[need]}\n{self.texts[index]}"


def selectable_fields(inputs: Mapping[str, Any], context_fields: Sequence[str]) -> dict[str, Pieces]:
    """The selectable fields of one call, in the order of ``inputs``: every value that is a :class:`Pieces`, and every
    field of ``context_fields`` holding a list or tuple (its items as pieces). ``{}``: the call has none."""
    out = {}
    for name, value in inputs.items():
        if isinstance(value, Pieces):
            out[name] = value
        elif name in context_fields and isinstance(value, (list, tuple)):
            out[name] = Pieces.of_list(value)
    return out


@dataclass(frozen=True)
class PieceCosts:
    """One field's pieces measured: ``own`` tokens of each piece, ``fixed`` tokens of each fixed part (paid once
    when any piece needing it is shown), ``empty`` the field's tokens with no piece."""

    own: np.ndarray
    fixed: np.ndarray
    empty: int


def measure_pieces(cost_model, name: str, pieces: Pieces) -> PieceCosts:
    """What each piece of field ``name`` adds to the prompt, in the real prompt format (``cost_model.field_tokens``:
    the field as the adapter writes it, counted by the predictor's counter). ``t_i`` = tokens(field with piece i and
    its fixed part) - tokens(field with no piece). A fixed part needed by two or more pieces costs ``t_i + t_j -
    t_ij`` over its two cheapest pieces i, j (what showing both saves: the part shown once), a piece its ``t_i`` less
    its fixed part's cost; a fixed part needed by one piece is folded into that piece. Approximately additive: the
    caller measures the real prompt after choosing."""
    n = len(pieces)
    counts = cost_model.field_tokens(name, [pieces.show(()), *(pieces.show((i,)) for i in range(n))])
    empty, alone = int(counts[0]), np.maximum(np.asarray(counts[1:], dtype=float) - counts[0], 0.0)
    needs = np.asarray(pieces.needs, dtype=int)
    fixed = np.zeros(len(pieces.fixed_texts))
    pairs = []
    for part in range(len(pieces.fixed_texts)):
        members = np.flatnonzero(needs == part)
        if members.size >= 2:
            i, j = (int(k) for k in members[np.argsort(alone[members], kind="stable")[:2]])
            pairs.append((part, i, j))
    if pairs:
        together = cost_model.field_tokens(name, [pieces.show((i, j)) for _, i, j in pairs])
        for (part, i, j), count in zip(pairs, together, strict=True):
            fixed[part] = min(max(alone[i] + alone[j] - (count - empty), 0.0), alone[i], alone[j])
    own = alone - np.where(needs >= 0, fixed[np.maximum(needs, 0)] if fixed.size else 0.0, 0.0)
    return PieceCosts(np.maximum(own, 0.0), fixed, empty)


@dataclass(frozen=True)
class EvidenceOffer:
    """What a selecting predictor hands its ``SelectExemplars`` for one call with pieces: the selectable ``fields``,
    their measured ``costs``, ``measure(demos, kept) -> tokens`` (the real prompt with those demos and the pieces
    ``kept``, ``{field: indices}``) and ``instruction_tokens`` (the system message: the same in every prompt)."""

    fields: Mapping[str, Pieces]
    costs: Mapping[str, PieceCosts]
    measure: Callable[[Sequence[Any], Mapping[str, Sequence[int]]], int]
    instruction_tokens: int | None = None
