"""``make_lm``: one way to build the project's ``dspy.LM``, for any LiteLLM model string.

Every call goes through LiteLLM (``engine="litellm"``): DSPy 3.4.1's default engine (``"auto"``) sends
openai / anthropic / gemini / ollama / hosted_vllm models through its own native clients instead, which
would bypass LiteLLM's providers, the ``local`` custom provider and the call counter.

Retries have exactly one owner, DSPy: ``num_retries`` attempts more on rate limits (429), server errors
(5xx), timeouts and dropped connections, with exponential backoff (1, 2, 4 ... s, capped at 60 s; a
``retry_after`` the provider error carries is used instead). The OpenAI SDK's own retries are switched off
(``max_retries=0``) so a failing call is not retried 3 x 3 times. ``timeout`` bounds each attempt: 120 s by
default for API models; for the embedded ``local/`` models it bounds the generation (see
``local_provider``), 600 s by default, because a busy 2-core machine decodes slowly and a repeated local
attempt would only do the same work again. For the same reason ``local/`` models are not retried by default
(``num_retries=0``; nothing in-process fails transiently).
"""

from __future__ import annotations

import os
from typing import Any

import dspy

from knapsack_dspy.llm.cache import key_cache_on_endpoint
from knapsack_dspy.llm.call_counter import install_call_counter
from knapsack_dspy.llm.errors import LLMConfigError
from knapsack_dspy.llm.local_models import is_local_model, local_model_spec
from knapsack_dspy.llm.local_provider import register_local_provider
from knapsack_dspy.llm.served_models import note_served_model

DEFAULT_TIMEOUT_S = 120.0
LOCAL_DEFAULT_TIMEOUT_S = 600.0  # of generation (see local_provider)
DEFAULT_NUM_RETRIES = 3  # API models; local/ models: 0
# Providers that speak the OpenAI protocol to a server given by api_base: a key is optional there, but the
# OpenAI SDK refuses to start without one, so a placeholder is sent when none is configured.
OPENAI_COMPATIBLE_PROVIDERS = ("openai", "hosted_vllm", "openai_like", "custom_openai", "lm_studio", "llamafile")


def provider_of(model: str) -> str:
    """The provider prefix of a model string (``openai`` for a bare name such as ``gpt-4o-mini``)."""
    return model.split("/", 1)[0] if "/" in model else "openai"


def _provider_env_key(provider: str) -> str | None:
    value = os.environ.get(f"{provider.upper()}_API_KEY")
    return value or None


def make_lm(model: str, *, api_base: str | None = None, api_key: str | None = None, temperature: float = 0.0,
            max_tokens: int = 512, timeout: float | None = None, num_retries: int | None = None, cache: bool = True,
            **kwargs: Any):
    """A ``dspy.LM`` for ``model`` that calls through LiteLLM.

    model: any LiteLLM model string: ``openai/gpt-4o-mini``, ``anthropic/claude-haiku-4-5``,
        ``ollama_chat/llama3.1``, ``hosted_vllm/<name>`` (+ ``api_base``), ``openai/<name>`` + ``api_base``
        for any OpenAI-compatible server, or an embedded model ``local/qwen2.5-coder-1.5b-instruct`` /
        ``local/qwen2.5-coder-0.5b-instruct`` (registered with LiteLLM here; loaded on first call).
    api_base / api_key: the server and key; the key defaults to the provider's usual environment variable
        (``OPENAI_API_KEY``, ``ANTHROPIC_API_KEY``, ...), read by LiteLLM at call time. The server is noted for
        the model (``served_models``): its prompt tokens are then counted there when it can (``get_token_counter``).
    timeout: seconds per attempt (default 120 s; for ``local/`` models, 600 s of generation).
    num_retries: extra attempts on transient failures (see module docstring); default 3, 0 for ``local/`` models.
    cache: use DSPy's response cache (configure where with ``knapsack_dspy.llm.cache.configure_cache``);
        answers are keyed on the server too (``api_base``), unlike DSPy's default key.
    kwargs: passed to ``dspy.LM`` (e.g. ``top_p``, ``stop``, ``model_type``).

    Nothing is contacted here; call ``check_lm_config`` first for early, clear configuration errors.
    """
    if not isinstance(model, str) or not model.strip():
        raise LLMConfigError(f"model must be a LiteLLM model string such as 'openai/gpt-4o-mini', got {model!r}")
    model = model.strip()
    if num_retries is None:
        num_retries = 0 if is_local_model(model) else DEFAULT_NUM_RETRIES
    if isinstance(num_retries, bool) or not isinstance(num_retries, int) or num_retries < 0:
        raise LLMConfigError(f"num_retries must be a non-negative integer, got {num_retries!r}")
    if timeout is not None and not (isinstance(timeout, (int, float)) and timeout > 0):
        raise LLMConfigError(f"timeout must be a positive number of seconds, got {timeout!r}")
    if timeout is None:
        timeout = LOCAL_DEFAULT_TIMEOUT_S if is_local_model(model) else DEFAULT_TIMEOUT_S
    if is_local_model(model):
        local_model_spec(model)  # unknown local name -> LLMConfigError now, not at the first call
        register_local_provider()
    install_call_counter()
    if cache:
        key_cache_on_endpoint()

    lm_kwargs: dict[str, Any] = dict(kwargs)
    lm_kwargs.setdefault("max_retries", 0)  # the SDK's own retries; DSPy's num_retries is the only layer
    lm_kwargs["timeout"] = float(timeout)
    if api_base:
        lm_kwargs["api_base"] = api_base.rstrip("/")
        note_served_model(model, api_base)
    provider = provider_of(model)
    if api_key:
        lm_kwargs["api_key"] = api_key
    elif api_base and provider in OPENAI_COMPATIBLE_PROVIDERS and not _provider_env_key(provider):
        lm_kwargs["api_key"] = "not-needed"  # OpenAI-compatible servers without auth
    return dspy.LM(model, engine="litellm", temperature=temperature, max_tokens=max_tokens,
                   num_retries=num_retries, cache=cache, **lm_kwargs)
