"""A reply without an answer is a failed call: ``check_reply`` raises for a completion without ``choices``.

DSPy caches whatever a successful call returns, so an OpenAI-compatible server that once sends
``"choices": []`` (a passing glitch) would otherwise leave a permanent empty answer in the response cache,
and the example would count as wrong on every re-run. Raised from inside the ``litellm.completion`` wrapper
(``call_counter``) as LiteLLM's ``InternalServerError``, the reply is a failed attempt: DSPy retries it like a
5xx, nothing is cached, and the bench records the row as a transient failure that a resume retries.
"""

from __future__ import annotations

import sys
from typing import Any

__all__ = ["EMPTY_REPLY_MESSAGE", "check_reply"]

EMPTY_REPLY_MESSAGE = "the server sent a reply with no choices (no answer at all)"


def _choices(response: Any):
    if isinstance(response, dict):
        return response.get("choices")
    return getattr(response, "choices", None)


def check_reply(response: Any, model: str | None = None) -> None:
    """Raise ``litellm.InternalServerError`` when ``response`` is a completion with an empty ``choices`` list
    (responses without a ``choices`` attribute, such as streams, pass)."""
    choices = _choices(response)
    if isinstance(choices, list) and not choices:
        # LiteLLM is loaded: a reply came through it. Not imported at the top: knapsack_dspy.llm.errors reads this
        # module's message, and importing LiteLLM there would run the provider registration (provider_hook) while
        # knapsack_dspy.llm.errors is still half-initialised.
        litellm = sys.modules["litellm"]
        model = str(model or "unknown")
        raise litellm.InternalServerError(
            message=EMPTY_REPLY_MESSAGE, llm_provider=model.split("/", 1)[0], model=model
        )
