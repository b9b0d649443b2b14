"""Re-render the prompt a results row's first LM call sent, and check it against the row's fingerprint.

Rows do not store prompts (~2,000 tokens per call); they store the sha256 of the exact messages of every LM call
and the prompt format version of the code that rendered them (``bench.results.prompt_record``). Given the run's
compiled program and the example, the program is run again with an LM that records the messages of the first
call and answers nothing: selection, retrieval and rendering are deterministic, so the messages are the ones
sent, and :class:`PromptCheck` says whether their sha256 is the recorded one (``verified``) or not
(``mismatch``: the code, the program or the data changed since). Later calls of a row (a program repair, the
JSON-adapter fallback) depend on the model's replies, which rows do not keep: they are not re-rendered. Rows
written before fingerprints existed say they cannot be checked (``unrecorded``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass

import dspy

from knapsack_dspy.bench.results.prompt_record import PROMPT_FORMAT_VERSION, PromptRecorder
from knapsack_dspy.bench.results.row_schema import as_row
from knapsack_dspy.messages import one_line

__all__ = ["PromptCheck", "rerender_prompt", "row_prompt_status"]

VERIFIED, MISMATCH, UNRECORDED, NOT_RENDERED, FAILED = "verified", "mismatch", "unrecorded", "not rendered", "failed"


@dataclass
class PromptCheck:
    """``status``: verified | mismatch | unrecorded | not rendered | failed; ``calls``: LM calls the row made;
    ``recorded``: the row's fingerprint of call 1; ``sha256`` / ``messages``: the re-rendered call 1."""

    status: str
    calls: int = 0
    recorded: str | None = None
    sha256: str | None = None
    messages: list[dict] | None = None
    format: int | None = None
    detail: str = ""

    def to_dict(self) -> dict:
        return asdict(self)


class _Rendered(Exception):
    """Raised by the recording LM once the first call's messages are recorded: nothing else needs to run."""


class _FirstCallLM(dspy.BaseLM):
    """An LM that answers no call: the prompt recorder sees the messages, then the call stops the program."""

    def forward(self, prompt=None, messages=None, **kwargs):
        raise _Rendered()


def row_prompt_status(row: Mapping) -> PromptCheck:
    """What a row says about its prompts without re-rendering: its fingerprints, or that it has none."""
    row = as_row(row)
    hashes = row.prompt_sha256
    if not hashes:
        return PromptCheck(UNRECORDED, detail="written before rows fingerprinted their prompts: the prompt cannot be "
                                              "re-rendered exactly")
    return PromptCheck(NOT_RENDERED, calls=len(hashes), recorded=hashes[0], format=row.prompt_format,
                       detail="kdspy report <dir> --prompts <question id> re-renders it from the compiled program")


def rerender_prompt(program, example, row: Mapping) -> PromptCheck:
    """Re-render the first prompt ``row`` sent (``program``: its run's compiled program; ``example``: its question)
    and check it against the row's fingerprint."""
    check = row_prompt_status(row)
    recorder = PromptRecorder(keep_messages=True)
    model = as_row(row).spec.get("model") or "unknown"
    try:
        with dspy.context(lm=_FirstCallLM(model), callbacks=[*dspy.settings.callbacks, recorder]):
            program(**program.example_inputs(example))
    except _Rendered:
        pass
    except Exception as exc:  # noqa: BLE001 - what stopped the program before its first LM call is the finding
        if not recorder.messages:
            return PromptCheck(FAILED, check.calls, check.recorded, format=check.format,
                               detail=f"the program failed before its first LM call: {one_line(exc, 300)}")
    if not recorder.messages:
        return PromptCheck(FAILED, check.calls, check.recorded, format=check.format,
                           detail="the program made no LM call for this question")
    messages, digest = recorder.messages[0], recorder.hashes[0]
    if check.status == UNRECORDED:
        return PromptCheck(UNRECORDED, sha256=digest, messages=messages,
                           detail="re-rendered by the current code; the row has no fingerprint to check it against "
                                  "(written before rows fingerprinted their prompts)")
    if digest == check.recorded:
        status, detail = VERIFIED, "the re-rendered messages have the recorded sha256"
    else:
        status = MISMATCH
        detail = "the re-rendered messages differ from those sent (their sha256 is not the recorded one)"
        if check.format != PROMPT_FORMAT_VERSION:
            detail += (f": the row was rendered by prompt format {check.format}, this code renders "
                       f"{PROMPT_FORMAT_VERSION}")
        else:
            detail += ": the code, the compiled program or the data changed since"
    if check.calls > 1:
        detail += f"; LM call 1 of {check.calls} (later calls depend on the model's replies: not re-rendered)"
    return PromptCheck(status, check.calls, check.recorded, digest, messages, check.format, detail)
