"""The LLM layer: LiteLLM-backed ``dspy.LM`` construction, the embedded offline models (LiteLLM provider
``local``), token counting with the target model's tokenizer, the LM response cache and usage accounting.

Importing this package is cheap: its names are loaded on first use (PEP 562), so no dspy / litellm / model
import happens until a function needs it (``import knapsack_dspy.llm``: a few milliseconds; LiteLLM alone
takes ~2 s to import).

- ``make_lm`` (``lm_factory``), ``check_lm_config`` (``lm_check``), ``check_model_offline`` (``model_check``),
  ``describe_lm_error`` / ``lm_error_kind`` (``errors``)
- ``get_token_counter`` / ``TokenCounter`` / ``context_window_of`` (``token_counter``)
- ``configure_cache`` (``cache``); ``UsageLedger`` (``usage``); ``real_call_count`` / ``counting_calls``
  (``call_counter``)
- ``register_local_provider`` (``local_provider``; ``provider_hook`` registers it when LiteLLM is imported),
  ``ensure_local_weights`` (``local_weights``), ``LOCAL_MODELS`` / ``register_local_model`` (``local_models``; a
  GGUF file of one's own: ``local/<path>.gguf``, ``local_model_files``), ``DEFAULT_LOCAL_MODEL``
  (``default_model``: the model asked when none is named),
  ``get_local_server`` (``local_server``)
"""

from __future__ import annotations

import importlib

_WHERE = {
    "configure_cache": "cache",
    "CallCounts": "call_counter", "call_counts": "call_counter", "counting_calls": "call_counter",
    "real_call_count": "call_counter",
    "LLMConfigError": "errors", "LLMError": "errors", "LocalModelError": "errors", "describe_lm_error": "errors",
    "lm_error_kind": "errors",
    "check_lm_config": "lm_check", "check_model_offline": "model_check",
    "make_lm": "lm_factory",
    "DEFAULT_LOCAL_MODEL": "default_model", "LOCAL_MODELS": "local_models", "is_local_model": "local_models",
    "register_local_model": "local_models",
    "register_local_provider": "local_provider",
    "LocalWeightsError": "local_weights", "ensure_local_weights": "local_weights",
    "TokenCounter": "token_counter", "context_window_of": "token_counter", "get_token_counter": "token_counter",
    "UsageLedger": "usage",
}

__all__ = sorted(_WHERE)


def __getattr__(name: str):
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted({*globals(), *_WHERE})
