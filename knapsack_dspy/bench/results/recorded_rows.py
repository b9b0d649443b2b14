"""The replies an earlier run recorded, by reply key: what ``kdspy bench --reuse DIR`` answers from.

A row written since reply keys keeps one per call (``reply_keys``: the prompt's fingerprint with the model, its
weights, the runtime's version and the decoding settings), so its reply answers a later prompt only when all of
them are the same; an older row's reply is matched on the prompt's fingerprint alone, and the summary says so.

A row written since schema version 2 keeps each call's reply (``completions``, aligned with ``prompt_sha256``).
An older row kept only what the pipeline made of the reply; for the rows where that is the whole reply it is
rebuilt exactly as DSPy's ChatAdapter wrote it: a single-call program row (the program-of-thought writer's only
output field is ``program``: the row's ``output``) and a single-call extraction (``answer``: the row's
``raw_answer``; an answer that then failed -- a program that did not run -- had its reply too): which pipeline and
route that is, ``docqa/pipelines/recorded_outputs.single_call_reply`` says. Rows whose call failed, or with a call
whose reply is not recoverable, give nothing.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from knapsack_dspy.bench.results.row_outcomes import ANSWER
from knapsack_dspy.bench.results.store import load_rows
from knapsack_dspy.docqa.pipelines.recorded_outputs import single_call_reply

__all__ = ["RecordedReplies", "chat_reply", "recorded_replies"]


def chat_reply(**fields) -> str:
    """A reply as DSPy's ChatAdapter parses it: ``[[ ## name ## ]]`` sections, then the completed marker."""
    parts = [f"[[ ## {name} ## ]]\n{value}" for name, value in fields.items()]
    return "\n\n".join([*parts, "[[ ## completed ## ]]"])


@dataclass
class RecordedReplies:
    """``keyed``: reply key (``llm.prompt_fingerprint.reply_key``: messages, model, weights, runtime, decoding) ->
    reply text; ``replies``: prompt fingerprint -> reply text, for the rows written before reply keys (their model,
    weights, runtime and decoding settings cannot be checked); counts of where they came from."""

    replies: dict[str, str] = field(default_factory=dict)
    keyed: dict[str, str] = field(default_factory=dict)
    from_completions: int = 0
    rebuilt: int = 0
    conflicting: int = 0  # keys or fingerprints recorded twice with different replies (the first is kept)
    rows: int = 0

    def add(self, sha: str, text: str, key: str | None = None) -> bool:
        table, name = (self.keyed, key) if key else (self.replies, sha)
        known = table.get(name)
        if known is None:
            table[name] = text
            return True
        self.conflicting += known != text
        return False

    def summary(self) -> str:
        unkeyed = (f"; {len(self.replies)} from rows without reply keys, matched on the prompt alone (model, weights, "
                   "runtime and decoding settings unchecked)" if self.replies else "")
        return (f"{len(self.replies) + len(self.keyed)} recorded replies from {self.rows} rows "
                f"({self.from_completions} recorded, {self.rebuilt} rebuilt from older rows"
                + (f", {self.conflicting} conflicting kept first" if self.conflicting else "") + ")" + unkeyed)


def _rebuilt_reply(row) -> str | None:
    if len(row.prompt_sha256 or []) != 1 or (row.spec or {}).get("samples", 1) not in (1, None):
        return None
    if row.error and row.error_kind != ANSWER:  # the call failed: no reply (an answer error still had one)
        return None
    fields = single_call_reply((row.spec or {}).get("pipeline"), row.route, program=row.output,
                               raw_answer=row.raw_answer)
    return None if fields is None else chat_reply(**fields)


def recorded_replies(paths: Iterable[str | Path]) -> RecordedReplies:
    """The replies recorded in the rows of each results directory (or rows file) of ``paths``."""
    out = RecordedReplies()
    for path in paths:
        for row in load_rows(path):
            out.rows += 1
            hashes = list(row.prompt_sha256 or [])
            completions = row.completions
            keys = list(row.reply_keys or [])
            if completions:
                keys = keys if len(keys) == len(hashes) else [None] * len(hashes)
                for sha, key, text in zip(hashes, keys, completions, strict=False):
                    if isinstance(text, str) and out.add(sha, text, key):
                        out.from_completions += 1
                continue
            text = _rebuilt_reply(row)
            if text is not None and out.add(hashes[0], text):
                out.rebuilt += 1
    return out
