"""``check_model_offline``: what a model string alone says about whether calls to it can work.

Nothing is contacted and no key is looked for, so ``KnapsackFewShot.compile`` asks it about the configured
``dspy.LM`` before any work (``check_lm_config`` asks it too, then checks the key and the server):

- a model string LiteLLM knows no provider for (``foo/bar``, a bare ``mymodel``) fails every call: an
  ``LLMConfigError`` naming the provider, with close provider names;
- a ``local/`` name that is not in the catalogue: an ``LLMConfigError``;
- a name LiteLLM's bundled map does not know, of a known provider (``openai/gpt-nonexistent-9``): possibly a
  model newer than the map, so only ``model_name_problem`` says so (the caller warns, or errs for a typo).

The provider is found without LiteLLM's "Provider List" banner (``litellm_provider``). LiteLLM is imported
only when a model is checked.
"""

from __future__ import annotations

import difflib
import logging

from knapsack_dspy.llm.errors import LLMConfigError
from knapsack_dspy.llm.litellm_provider import litellm_provider
from knapsack_dspy.llm.local_models import LOCAL_MODELS, is_local_model, local_model_spec

__all__ = ["SELF_HOSTED_PROVIDERS", "check_model_offline", "close_matches", "model_name_problem", "provider_for"]

logger = logging.getLogger(__name__)

# Providers that run on the user's machine / cluster: any model name can be served there.
SELF_HOSTED_PROVIDERS = ("ollama", "ollama_chat", "hosted_vllm", "vllm", "openai_like", "custom_openai",
                         "lm_studio", "llamafile", "xinference", "triton", "huggingface")


def _litellm():
    import litellm  # ~2-4 s: only when a model is checked (KnapsackFewShot imports this module)

    return litellm


def close_matches(name: str, candidates: list[str]) -> list[str]:
    return difflib.get_close_matches(name, candidates, n=3, cutoff=0.85)


def _check_string(model) -> str:
    if not isinstance(model, str) or not model.strip() or model.strip().endswith("/"):
        raise LLMConfigError(f"model must be a LiteLLM model string such as 'openai/gpt-4o-mini', got {model!r}")
    return model.strip()


def provider_for(model: str) -> tuple[str, str]:
    """``(the name LiteLLM sends, its provider)``, or ``LLMConfigError``: LiteLLM knows no provider for ``model``."""
    resolved = litellm_provider(model)
    if resolved is not None:
        return resolved
    local = ", ".join(spec.model for spec in LOCAL_MODELS.values())
    examples = (f"use '<provider>/<model>' such as 'openai/gpt-4o-mini', 'anthropic/claude-haiku-4-5', "
                f"'ollama_chat/llama3.1', or one of {local}")
    if "/" not in model:
        raise LLMConfigError(f"model {model!r} names no provider LiteLLM knows; {examples}")
    prefix = model.split("/", 1)[0]
    known = [*sorted(str(getattr(p, "value", p)) for p in _litellm().provider_list), "local"]
    suggestions = close_matches(prefix, known)
    hint = f" (did you mean {', '.join(suggestions)}?)" if suggestions else ""
    raise LLMConfigError(f"unknown LLM provider {prefix!r} in model {model!r}{hint}; {examples}")


def model_name_problem(model: str, bare: str, provider: str) -> tuple[str, bool] | None:
    """``(message, is_typo)`` when LiteLLM's bundled map does not know ``model`` of a known ``provider``
    (``is_typo``: a known name of that provider is close to it), else None."""
    litellm = _litellm()
    try:
        litellm.get_model_info(model)  # the provider is known here: no provider-list banner
    except Exception:  # noqa: BLE001  (LiteLLM raises several types for an unmapped model)
        pass
    else:
        return None
    known = sorted(str(m) for m in (litellm.models_by_provider.get(provider) or []))
    suggestions = close_matches(bare, known)
    if suggestions:
        hint = ", ".join(f"{provider}/{s}" for s in suggestions)
        return f"unknown model {model!r} for provider {provider!r} (did you mean {hint}?)", True
    return f"LiteLLM does not know model {model!r} (provider {provider!r})", False


def check_model_offline(model: str, *, api_base: str | None = None) -> None:
    """``LLMConfigError`` when calls to ``model`` cannot work at all; one logged warning when LiteLLM's bundled
    map does not know the name of a known provider's model (nothing with ``api_base`` or a self-hosted provider,
    where any name can be served). See the module docstring."""
    model = _check_string(model)
    if is_local_model(model):
        local_model_spec(model)  # unknown name -> LLMConfigError
        return
    bare, provider = provider_for(model)
    if api_base or provider in SELF_HOSTED_PROVIDERS or provider == "local":
        return
    problem = model_name_problem(model, bare, provider)
    if problem is not None:
        logger.warning("%s; it is called anyway (its context window and tokenizer are unknown here)", problem[0])
