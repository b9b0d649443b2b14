"""Recall of gold evidence in a ranking: how much of the annotated evidence survives a top-n cut.

Gold evidence ids follow FinQA's ``gold_inds`` keys and the data layer's ``gold_evidence``:
``"text_3"`` is paragraph 3 (0-based, FinQA: pre_text + post_text), ``"table_2"`` is table row 2 (row 0 the
header); TAT-QA's plain ``"table"`` (the answer uses the table) names no row and is ignored here.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

__all__ = ["gold_indices", "recall_at_n"]

_EVIDENCE_RE = re.compile(r"^(?P<kind>text|table)_(?P<index>\d+)$")


def gold_indices(gold_evidence: Iterable[str], kind: str) -> set[int]:
    """Indices of the ``kind`` ("text" or "table") items in ``gold_evidence``; other ids are ignored."""
    if kind not in ("text", "table"):
        raise ValueError(f"evidence kind must be 'text' or 'table', got {kind!r}")
    out = set()
    for item in gold_evidence:
        match = _EVIDENCE_RE.match(str(item))
        if match and match.group("kind") == kind:
            out.add(int(match.group("index")))
    return out


def recall_at_n(ranking: Sequence[int], gold: set[int], n: int | None, always_kept: Iterable[int] = ()) -> float:
    """Fraction of ``gold`` among the first ``n`` items of ``ranking`` (``n=None``: all of it).

    ``always_kept`` items (e.g. table header rows) count as retrieved whatever the cut. Raises
    ``ValueError`` for an empty ``gold`` (recall is undefined; callers skip such questions).
    """
    if not gold:
        raise ValueError("recall is undefined without gold evidence")
    kept = set(ranking if n is None else ranking[:n]) | set(always_kept)
    return len(gold & kept) / len(gold)
