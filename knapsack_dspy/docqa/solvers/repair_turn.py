"""The program repair as the writer's conversation continued, so that it keeps the cached prompt prefix.

A repair used to be a call with its own signature (``RepairPythonProgram``): another system message, which
differed from the writer's after ~40 tokens. On a server with one prompt cache (the embedded model's llama.cpp
slot) it therefore paid its whole prompt again and evicted the prefix the next question needed (the system
message and the shared demos). Now the repair sends the writer's own prompt -- its system message, the call's
demos and the question, exactly as the writer sent them -- followed by the failed reply as the assistant's turn
and one user turn with the error, and reads the answer with the writer's signature. A prompt cache reuses
everything up to the failed reply, and what the next question shares with this one stays the slot's prefix.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Any

import dspy

__all__ = ["REPAIR_REQUEST", "WriterRepair", "continued_adapter", "repair_turns"]

#: The user turn after a failed program (``{error}``: what went wrong when it ran).
REPAIR_REQUEST = ("Running that program failed: {error}\n\nWrite a corrected program that answers the same "
                  "question, following the same conventions.")


class _Continued:
    """Mixin: the prompt the adapter formats, followed by ``turns`` (more chat messages)."""

    turns: Sequence[Mapping[str, Any]] = ()

    def format(self, signature, demos, inputs):
        return [*super().format(signature, demos, inputs), *(dict(turn) for turn in self.turns)]


@functools.cache
def _continued_class(base: type) -> type:
    return type(f"Continued{base.__name__}", (_Continued, base), {})


def continued_adapter(adapter, turns: Sequence[Mapping[str, Any]]):
    """A copy of ``adapter`` whose prompts end with ``turns``; its JSON fallback (a ChatAdapter's) is off, since
    a fallback would format a different prompt."""
    clone = _continued_class(type(adapter)).__new__(_continued_class(type(adapter)))
    clone.__dict__.update(vars(adapter))
    clone.turns = [dict(turn) for turn in turns]
    if hasattr(clone, "use_json_adapter_fallback"):
        clone.use_json_adapter_fallback = False
    return clone


def repair_turns(adapter, signature, outputs: Mapping[str, Any], error: str) -> list[dict]:
    """The failed reply (``outputs`` in the writer's output fields, as the adapter formats a reply) and the
    request to correct it."""
    formatter = getattr(adapter, "format_assistant_message_content", None)
    reply = formatter(signature, dict(outputs), missing_field_message="") if callable(formatter) \
        else str(outputs.get("program", ""))
    request = REPAIR_REQUEST.format(error=error)
    requirements = getattr(adapter, "user_message_output_requirements", None)
    if callable(requirements):
        request += "\n\n" + requirements(signature)
    return [{"role": "assistant", "content": reply}, {"role": "user", "content": request}]


class WriterRepair(dspy.Module):
    """The repair call as a module (what a solver's plan asks its driver to call, sync or async): ``writer``'s LM
    (its signature, settings and adapter: a ``SelectingPredict``'s pinned one, else the configured one) asked to
    correct its failed reply ``outputs``: the writer's prompt for the inputs with the demos, the failed reply,
    the error. Returns the prediction in the writer's output fields."""

    def __init__(self, writer: dspy.Predict, outputs: Mapping[str, Any], error: str):
        super().__init__()
        adapter = getattr(writer, "adapter", None) or dspy.settings.adapter or dspy.ChatAdapter()
        self._adapter = continued_adapter(adapter, repair_turns(adapter, writer.signature, outputs, error))
        self.predict = dspy.Predict(writer.signature, **dict(writer.config))
        self.predict.lm = writer.lm

    def forward(self, demos: Sequence = (), **inputs):
        with dspy.context(adapter=self._adapter):
            return self.predict(**inputs, demos=list(demos))

    async def aforward(self, demos: Sequence = (), **inputs):
        with dspy.context(adapter=self._adapter):
            return await self.predict.acall(**inputs, demos=list(demos))

