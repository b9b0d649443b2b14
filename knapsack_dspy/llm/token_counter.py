"""Token counting with the target model's own tokenizer, as the model sees the prompt.

``get_token_counter(model)`` returns one shared ``TokenCounter`` per model string:

- ``local/...`` models: ``LocalTokenCounter`` (``local_token_counter.py``, loaded for the first local model) asks
  the model's running llama.cpp server (``/apply-template``,
  then ``/tokenize``), so a count covers the exact chat template (Qwen's adds a default system message when
  there is none, and ``<|im_start|>assistant`` for the reply). It equals the server's ``usage.prompt_tokens``.
  Models with the same tokenizer (``LocalModelSpec.tokenizer``) are counted by the smallest of them that is
  installed: the 0.5B counts for the 1.5B, which compile then never loads. A batch (``count_messages_batch``,
  a pool's costs) gets the same counts without a request per prompt: the prompts are built from the chat
  template's skeleton (``text_holes``: probed once per sequence of roles, one prompt per batch compared with the
  server's) and tokenized by the model's own BPE in process (``bpe_tokenizer``: tiktoken, its counts compared
  with the server's on a sample of every batch), else by the server in a few ``/tokenize`` requests.
- API models: ``LiteLLMTokenCounter`` uses ``litellm.token_counter`` (tiktoken files bundled with LiteLLM:
  no network), with OpenAI's chat overhead (3 tokens per message, 3 for the reply). OpenAI models LiteLLM
  knows get their own encoding (``o200k_base`` for gpt-4o*, ...); ``.exact`` is True for them.
- A model with a server (``api_base`` given, or noted for the model string by ``make_lm``: ``served_models``):
  ``ServedTokenCounter`` (``served_token_counter.py``) counts on the server when it can (llama.cpp's
  ``/apply-template`` + ``/tokenize``, vLLM's ``/tokenize``: exact for any model it serves), else estimates as
  below, calibrated by the prompt tokens the server reports.
- Anything else (Anthropic, Ollama without a server address, ...): the same counter on tiktoken's
  ``cl100k_base`` with a one-time warning that counts are approximate (``.exact`` False). A model string whose
  provider LiteLLM cannot tell (``DummyLM``'s ``"dummy"``) is counted so without asking LiteLLM about it, which
  would print its "Provider List" banner (``litellm_provider``).

Counts are memoised (LRU, thread-safe): the knapsack core counts thousands of exemplars, many repeatedly; a
local model's are also kept on disk across processes (``count_store``: a batch read and written at once).
``token_count_kind(counter)`` names which kind a count is ("exact" / "estimate"): selections, bench rows and
reports carry it, so a ``within_budget`` that rests on an estimate says so.
The context window comes from LiteLLM's bundled model map (``max_input_tokens``), the served ``n_ctx`` for
local models, or ``None`` when unknown.
"""

from __future__ import annotations

import importlib
import logging
from typing import Any

from knapsack_dspy.llm.errors import LLMConfigError
from knapsack_dspy.llm.token_count_base import DEFAULT_CACHE_SIZE, TokenCounter, shared_counter

logger = logging.getLogger(__name__)

# Providers whose models LiteLLM counts with their exact tiktoken encoding when it knows the model name.
_TIKTOKEN_PROVIDERS = ("openai", "azure", "text-completion-openai")


def _litellm():
    """LiteLLM, imported when an API model's tokens are counted (~2-4 s: a local model's counts never need it)."""
    import litellm

    return litellm


class LiteLLMTokenCounter(TokenCounter):
    """``litellm.token_counter`` with the model's tiktoken encoding, or ``cl100k_base`` as an offline fallback."""

    def __init__(self, model: str, cache_size: int = DEFAULT_CACHE_SIZE):
        from knapsack_dspy.llm.litellm_provider import litellm_provider

        litellm = _litellm()
        bare, provider = litellm_provider(model) or (model, None)  # None: no provider LiteLLM can tell
        info = _model_info(model) if provider is not None else None
        super().__init__(model, _context_window(info), cache_size)
        self.provider = provider
        if provider in _TIKTOKEN_PROVIDERS and bare in litellm.model_cost:
            self._kwargs: dict[str, Any] = {"model": bare}
            self.exact = True
        else:
            from litellm.litellm_core_utils.default_encoding import encoding  # reads tiktoken's tables

            self._kwargs = {"custom_tokenizer": {"type": "openai_tokenizer", "tokenizer": encoding}}
            self.exact = False
            logger.warning("no tokenizer known for %s offline: counting tokens with tiktoken %s (approximate)",
                           model, encoding.name)

    def _count_messages(self, messages: list[dict]) -> int:
        return _litellm().token_counter(messages=messages, **self._kwargs)

    def _count_text(self, text: str) -> int:
        if not text:
            return 0
        return _litellm().token_counter(text=text, count_response_tokens=True, **self._kwargs)


def _model_info(model: str) -> dict | None:
    try:
        return dict(_litellm().get_model_info(model))
    except Exception:  # noqa: BLE001  (unmapped model: the context window is unknown)
        return None


def _context_window(info: dict | None) -> int | None:
    if not info:
        return None
    value = info.get("max_input_tokens") or info.get("max_tokens")
    return int(value) if value else None


def context_window_of(model: str) -> int | None:
    """Tokens the model accepts as input (LiteLLM's model map; served ``n_ctx`` for local models; None if unknown)."""
    from knapsack_dspy.llm.litellm_provider import litellm_provider
    from knapsack_dspy.llm.local_models import is_local_model, local_context_window

    if is_local_model(model):
        return local_context_window(model)
    if litellm_provider(model) is None:  # LiteLLM would print its provider-list banner, and know nothing
        return None
    return _context_window(_model_info(model))


#: how a selection's token counts were made (the selection info's ``token_count``, bench rows, reports)
EXACT, ESTIMATE = "exact", "estimate"


def token_count_kind(counter) -> str:
    """``"exact"`` when ``counter`` counts with the model's own tokenizer, ``"estimate"`` when it approximates
    (``TokenCounter.exact`` False: a model without a known tokenizer, counted with ``cl100k_base``). A counter
    that does not say (a user's own) is taken to be the model's tokenizer."""
    return EXACT if getattr(counter, "exact", True) else ESTIMATE


def _local_counter_class():
    """``local_token_counter.LocalTokenCounter``, imported for the first local model only: counting for an API model
    loads none of the embedded runtime's modules (server, weights, in-process BPE)."""
    return importlib.import_module("knapsack_dspy.llm.local_token_counter").LocalTokenCounter


def get_token_counter(model: str, api_base: str | None = None) -> TokenCounter:
    """The shared ``TokenCounter`` of ``model`` (a LiteLLM model string, e.g. ``openai/gpt-4o-mini`` or
    ``local/qwen2.5-coder-1.5b-instruct``), for its server ``api_base`` (default: the one noted for the model,
    ``served_models``; none, or inside ``served_models.without_servers``: counted without a server). Local models
    are loaded on the first count, not here; a server is asked what it counts on the first count."""
    if not isinstance(model, str) or not model.strip():
        raise LLMConfigError(f"model must be a LiteLLM model string such as 'openai/gpt-4o-mini', got {model!r}")
    from knapsack_dspy.llm.local_models import is_local_model  # the model's string is read when a counter is made

    model = model.strip()
    if is_local_model(model):
        return shared_counter(model, _local_counter_class())
    from knapsack_dspy.llm.served_models import server_of  # a model with a server: counted there

    api_base = server_of(model, api_base)
    if api_base:
        return _served_counter_function()(model, api_base, LiteLLMTokenCounter)
    return shared_counter(model, LiteLLMTokenCounter)


def _served_counter_function():
    """``served_token_counter.shared_served_counter``, imported for the first model with a server."""
    return importlib.import_module("knapsack_dspy.llm.served_token_counter").shared_served_counter
