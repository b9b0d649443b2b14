"""The replies an earlier run recorded, by prompt fingerprint: what ``kdspy bench --reuse DIR`` answers from.

A row written since schema version 2 keeps each call's reply (``completions``, aligned with ``prompt_sha256``).
An older row kept only what the pipeline made of the reply; for the rows where that is the whole reply it is
rebuilt exactly as DSPy's ChatAdapter wrote it: a single-call program row (the program-of-thought writer's only
output field is ``program``: the row's ``output``) and a single-call extraction (``answer``: the row's
``raw_answer``; an answer that then failed -- a program that did not run -- had its reply too). Rows whose call
failed, or with a call whose reply is not recoverable, give nothing.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from knapsack_dspy.bench.results.row_outcomes import ANSWER
from knapsack_dspy.bench.results.store import load_rows

__all__ = ["RecordedReplies", "chat_reply", "recorded_replies"]

#: The routes whose single call's reply a version-1 row lets us rebuild: route -> (output field, row field).
_REBUILT = {"compute": ("program", "output"), "": ("program", "output"), "extract": ("answer", "raw_answer")}


def chat_reply(**fields) -> str:
    """A reply as DSPy's ChatAdapter parses it: ``[[ ## name ## ]]`` sections, then the completed marker."""
    parts = [f"[[ ## {name} ## ]]\n{value}" for name, value in fields.items()]
    return "\n\n".join([*parts, "[[ ## completed ## ]]"])


@dataclass
class RecordedReplies:
    """``replies``: prompt fingerprint -> reply text; counts of where they came from."""

    replies: dict[str, str] = field(default_factory=dict)
    from_completions: int = 0
    rebuilt: int = 0
    conflicting: int = 0  # fingerprints recorded twice with different replies (the first is kept)
    rows: int = 0

    def add(self, sha: str, text: str) -> bool:
        known = self.replies.get(sha)
        if known is None:
            self.replies[sha] = text
            return True
        self.conflicting += known != text
        return False

    def summary(self) -> str:
        return (f"{len(self.replies)} recorded replies from {self.rows} rows ({self.from_completions} recorded, "
                f"{self.rebuilt} rebuilt from older rows" + (f", {self.conflicting} conflicting kept first"
                                                             if self.conflicting else "") + ")")


def _rebuilt_reply(row) -> str | None:
    if len(row.prompt_sha256 or []) != 1 or (row.spec or {}).get("samples", 1) not in (1, None):
        return None
    if row.error and row.error_kind != ANSWER:  # the call failed: no reply (an answer error still had one)
        return None
    if (row.spec or {}).get("pipeline") not in ("pot", "python_pot", "finqa_pot"):
        return None
    target = _REBUILT.get(row.route or "")
    value = None if target is None else getattr(row, target[1])
    return None if value is None else chat_reply(**{target[0]: value})


def recorded_replies(paths: Iterable[str | Path]) -> RecordedReplies:
    """The replies recorded in the rows of each results directory (or rows file) of ``paths``."""
    out = RecordedReplies()
    for path in paths:
        for row in load_rows(path):
            out.rows += 1
            hashes = list(row.prompt_sha256 or [])
            completions = row.completions
            if completions:
                for sha, text in zip(hashes, completions, strict=False):
                    if isinstance(text, str) and out.add(sha, text):
                        out.from_completions += 1
                continue
            text = _rebuilt_reply(row)
            if text is not None and out.add(hashes[0], text):
                out.rebuilt += 1
    return out
