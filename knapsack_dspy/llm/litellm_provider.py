"""``litellm_provider``: which provider LiteLLM routes a model string to, asked without LiteLLM's banner.

``litellm.get_llm_provider`` (and every LiteLLM function that calls it: ``get_model_info``, cost and parameter
look-ups) prints a red ``Provider List: https://docs.litellm.ai/docs/providers`` banner to stdout each time it
cannot tell a provider -- for ``dspy.utils.DummyLM``'s model ``"dummy"``, three times per compile. The banner
can only be switched off process-wide (``litellm.suppress_debug_info``), which is the user's setting, not ours.
So the lookup is asked only where it cannot fail that way: for a provider prefix LiteLLM knows
(``openai/...``, ``anthropic/...``, a JSON-configured or custom provider such as ``local``); a name without a
known prefix is read from LiteLLM's bundled model map (``gpt-4o-mini`` -> openai) or its routing rules for
model families (``claude-...`` -> anthropic); anything else has no provider LiteLLM can tell, and LiteLLM is
not asked.
"""

from __future__ import annotations

__all__ = ["known_provider_prefix", "litellm_provider"]


def _litellm():
    import litellm  # ~2-4 s: only when an API model's provider is looked up

    return litellm


def _json_provider(prefix: str) -> bool:
    """LiteLLM's JSON-configured OpenAI-compatible providers (not in ``litellm.provider_list``)."""
    try:
        from litellm.litellm_core_utils.get_llm_provider_logic import JSONProviderRegistry

        return bool(JSONProviderRegistry.exists(prefix))
    except Exception:  # noqa: BLE001 - an internal of LiteLLM: without it, such prefixes count as unknown
        return False


def known_provider_prefix(prefix: str) -> bool:
    """LiteLLM routes ``<prefix>/<model>`` by this prefix (a provider, a JSON-configured or a custom one)."""
    if not prefix:
        return False
    litellm = _litellm()
    names = {str(getattr(p, "value", p)) for p in litellm.provider_list}
    names |= {str(p.get("provider")) for p in getattr(litellm, "custom_provider_map", None) or []
              if isinstance(p, dict)}
    return prefix in names or _json_provider(prefix)


def litellm_provider(model: str) -> tuple[str, str] | None:
    """``(the model name LiteLLM sends, its provider)`` for a LiteLLM model string, or ``None`` when LiteLLM
    cannot tell a provider (module docstring); nothing is printed."""
    model = str(model or "").strip()
    if not model:
        return None
    prefix, slash, rest = model.partition("/")
    litellm = _litellm()
    if slash and rest and known_provider_prefix(prefix):
        try:
            bare, provider, _, _ = litellm.get_llm_provider(model)
            return str(bare), str(provider)
        except Exception:  # noqa: BLE001 - LiteLLM's parser refused it after all: the prefix is the provider
            return rest, prefix
    entry = litellm.model_cost.get(model)
    if isinstance(entry, dict) and entry.get("litellm_provider"):
        return model, str(entry["litellm_provider"])
    if not slash:
        provider = _family_provider(model)
        if provider:
            return model, provider
    return None


def _family_provider(model: str) -> str | None:
    """The provider LiteLLM's routing rules give a bare name it does not map (``claude-...`` -> anthropic)."""
    try:
        from litellm.litellm_core_utils.fallback_generalizations import match_routing_generalization

        return match_routing_generalization(model) or None
    except Exception:  # noqa: BLE001 - an internal of LiteLLM: without it, such names have no provider
        return None
