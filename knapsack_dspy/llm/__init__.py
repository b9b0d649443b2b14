"""The LLM layer: LiteLLM-backed ``dspy.LM`` construction, the embedded offline models (LiteLLM provider
``local``), token counting with the target model's tokenizer, the LM response cache and usage accounting.

Importing this package is cheap (no dspy / litellm / model import happens until a function needs it).

- ``make_lm`` (``lm_factory``), ``check_lm_config`` (``lm_check``), ``describe_lm_error`` / ``lm_error_kind``
  (``errors``)
- ``get_token_counter`` / ``TokenCounter`` / ``context_window_of`` (``token_counter``)
- ``configure_cache`` (``cache``); ``UsageLedger`` (``usage``); ``real_call_count`` / ``counting_calls``
  (``call_counter``)
- ``register_local_provider`` (``local_provider``), ``ensure_local_weights`` (``local_weights``),
  ``LOCAL_MODELS`` / ``DEFAULT_LOCAL_MODEL`` (``local_models``), ``get_local_server`` (``local_server``)
"""

from knapsack_dspy.llm.cache import configure_cache
from knapsack_dspy.llm.call_counter import CallCounts, call_counts, counting_calls, real_call_count
from knapsack_dspy.llm.errors import (
    LLMConfigError,
    LLMError,
    LocalModelError,
    describe_lm_error,
    lm_error_kind,
)
from knapsack_dspy.llm.lm_check import check_lm_config
from knapsack_dspy.llm.lm_factory import make_lm
from knapsack_dspy.llm.local_models import DEFAULT_LOCAL_MODEL, LOCAL_MODELS, is_local_model
from knapsack_dspy.llm.local_provider import register_local_provider
from knapsack_dspy.llm.local_weights import LocalWeightsError, ensure_local_weights
from knapsack_dspy.llm.token_counter import TokenCounter, context_window_of, get_token_counter
from knapsack_dspy.llm.usage import UsageLedger

__all__ = [
    "DEFAULT_LOCAL_MODEL",
    "LOCAL_MODELS",
    "CallCounts",
    "LLMConfigError",
    "LLMError",
    "LocalModelError",
    "LocalWeightsError",
    "TokenCounter",
    "UsageLedger",
    "call_counts",
    "check_lm_config",
    "configure_cache",
    "context_window_of",
    "counting_calls",
    "describe_lm_error",
    "ensure_local_weights",
    "get_token_counter",
    "is_local_model",
    "lm_error_kind",
    "make_lm",
    "real_call_count",
    "register_local_provider",
]
