"""Provider prompt caches: where a prompt's shared prefix ends, for providers that need to be told.

Prompts are ordered so that consecutive ones share a long prefix: the system message, then the exemplars every
query gets (a static set, a hybrid core; ``selection.exemplar_pool``). What rewards that differs by provider:

- the embedded models (llama.cpp) reuse the longest common prefix of the slot's previous prompt by themselves;
- OpenAI-style automatic prefix caching (OpenAI, DeepSeek, vLLM's prefix caching, ...) needs nothing either;
  OpenAI caches prompts of 1,024 tokens and more, in 128-token steps;
- Anthropic caches only up to an explicit breakpoint (``cache_control`` on a message): :func:`cache_breakpoint`
  returns the LiteLLM call setting that puts one on the message ending the declared shared prefix
  (``cache_control_injection_points``). Anthropic ignores breakpoints before its minimum cacheable prefix (1,024
  tokens for most models, 2,048 for Haiku), so a per-query prompt whose only shared part is the system message
  usually writes nothing; a hybrid core or a static set usually passes it. A cache write costs 1.25x the input
  price, a read 0.1x.

The tokens a cache served are read from the responses (``call_counter``: ``cached_prompt_tokens``,
``cache_write_tokens``) and recorded in bench rows.
"""

from __future__ import annotations

__all__ = ["EXPLICIT_BREAKPOINT_PROVIDERS", "cache_breakpoint"]

#: LiteLLM providers whose prompt cache needs an explicit breakpoint.
EXPLICIT_BREAKPOINT_PROVIDERS = ("anthropic/",)


def cache_breakpoint(model: str | None, shared_demos: int) -> dict:
    """LM call settings marking the end of the shared prefix -- the system message and the first ``shared_demos``
    demos, each a user and an assistant message in DSPy's chat format -- as a cache breakpoint, for providers that
    need one; ``{}`` for the others (nothing is added to their requests or their cache keys)."""
    if not str(model or "").startswith(EXPLICIT_BREAKPOINT_PROVIDERS):
        return {}
    return {"cache_control_injection_points": [{"location": "message", "index": 2 * max(0, int(shared_demos))}]}
