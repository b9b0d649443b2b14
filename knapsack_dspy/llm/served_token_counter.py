"""``ServedTokenCounter``: a served model's prompt tokens, counted where the model lives when the server can.

``token_counter.get_token_counter`` builds one for a model string with a server (``api_base`` given, or noted
for the model: ``served_models``). On its first count it asks the server what it offers (``server_tokenizer``,
once per server):

- a server that counts (llama.cpp, vLLM): every count is the server's own, chat template included, so it is the
  ``usage.prompt_tokens`` the server reports for the same messages (``exact``), and the context window is the
  server's (llama.cpp: the context of a slot; vLLM: ``max_model_len``);
- a server that does not (Ollama, an API, a proxy): the estimate the model string gets without a server
  (``LiteLLMTokenCounter``: the model's tiktoken encoding for OpenAI models LiteLLM knows, exact; else
  ``cl100k_base``), and when that is an estimate, calibrated by the prompt tokens the server reports on the calls
  this process makes to it (``token_calibration``; a listener of ``call_counter``).

A server that does not answer the question raises ``ModelServerUnavailable`` (transient: a bench row that meets
it is asked again on resume) and is asked again at the next count.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from typing import Any

from knapsack_dspy.llm.call_counter import add_call_listener
from knapsack_dspy.llm.served_models import server_root
from knapsack_dspy.llm.server_tokenizer import ServerTokenizer, server_tokenizer
from knapsack_dspy.llm.token_calibration import PromptTokenCalibration
from knapsack_dspy.llm.token_count_base import DEFAULT_CACHE_SIZE, TokenCounter, shared_counter

__all__ = ["ServedTokenCounter", "shared_served_counter"]

logger = logging.getLogger(__name__)

_UNKNOWN = object()


def _usage_prompt_tokens(response: Any) -> int | None:
    usage = response.get("usage") if isinstance(response, dict) else getattr(response, "usage", None)
    value = usage.get("prompt_tokens") if isinstance(usage, dict) else getattr(usage, "prompt_tokens", None)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


class ServedTokenCounter(TokenCounter):
    """``model`` (a LiteLLM model string) served at ``api_base``; ``estimate(model)`` builds the counter used when
    the server counts nothing (``token_counter.LiteLLMTokenCounter``)."""

    def __init__(self, model: str, api_base: str, estimate: Callable[[str], TokenCounter],
                 cache_size: int = DEFAULT_CACHE_SIZE):
        self.api_base = str(api_base).strip().rstrip("/")
        self.root = server_root(self.api_base)
        self._make_estimate = estimate
        self._source: Any = _UNKNOWN  # a ServerTokenizer, or the estimate's TokenCounter
        self._calibration: PromptTokenCalibration | None = None
        self._detect_lock = threading.Lock()
        super().__init__(model, None, cache_size)

    # -- what the server offers (asked once) -------------------------------------------------------------
    def _counting(self):
        if self._source is _UNKNOWN:
            with self._detect_lock:
                if self._source is _UNKNOWN:
                    tokenizer = server_tokenizer(self.api_base, self.model)  # may raise ModelServerUnavailable
                    if tokenizer is not None:
                        logger.info("%s: prompt tokens counted by the %s server at %s", self.model, tokenizer.kind,
                                    self.root)
                        self._source = tokenizer
                    else:
                        estimate = self._make_estimate(self.model)
                        if not getattr(estimate, "exact", True):
                            self._calibration = PromptTokenCalibration(estimate.count_messages)
                            add_call_listener(self._observe_call)
                            logger.warning("%s: the server at %s counts no tokens: estimated, and calibrated by "
                                           "the prompt tokens it reports", self.model, self.root)
                        self._source = estimate
        return self._source

    @property
    def server_tokenizer(self) -> ServerTokenizer | None:
        """How the server counts (None: it does not; the counts are the estimate's)."""
        source = self._counting()
        return source if isinstance(source, ServerTokenizer) else None

    @property
    def counted_by(self) -> str:
        """Who counts: ``"llama.cpp server"`` / ``"vLLM server"``, ``"estimate (calibrated)"`` or ``"estimate"``."""
        tokenizer = self.server_tokenizer
        if tokenizer is not None:
            return f"{tokenizer.kind} server"
        return "estimate (calibrated)" if self._calibration is not None else "estimate"

    # TokenCounter declares exact a plain attribute; here it is read from the counting source, so a read-only
    # property (mypy: a writable attribute overridden by a read-only one)
    @property
    def exact(self) -> bool:  # type: ignore[override]
        source = self._counting()
        return True if isinstance(source, ServerTokenizer) else bool(getattr(source, "exact", False))

    @property
    def context_window(self) -> int | None:
        source = self._counting()
        return source.context_window if source.context_window else self._given_window

    @context_window.setter
    def context_window(self, value: int | None) -> None:
        self._given_window = value  # TokenCounter.__init__'s (None): the server's, once asked

    @property
    def calibration(self) -> PromptTokenCalibration | None:
        """The running calibration of an estimate (None: the server counts, or the estimate is exact)."""
        self._counting()
        return self._calibration

    # -- counting --------------------------------------------------------------------------------------
    def _count_messages(self, messages: list[dict]) -> int:
        return int(self._counting().count_messages(messages))

    def _count_messages_batch(self, batch: list[list[dict]], keys: list[str]) -> list[int]:
        source = self._counting()
        many = getattr(source, "count_messages_batch", None)
        return [int(c) for c in (many(batch) if callable(many) else [source.count_messages(m) for m in batch])]

    def _count_text(self, text: str) -> int:
        return int(self._counting().count_text(text))

    def count_messages(self, messages: list[dict]) -> int:
        count = super().count_messages(messages)
        return count if self._calibration is None else self._calibration.scale(count)

    def count_messages_batch(self, batch: Sequence[list[dict]]) -> list[int]:
        counts = super().count_messages_batch(batch)
        return counts if self._calibration is None else [self._calibration.scale(c) for c in counts]

    def count_text(self, text: str) -> int:
        count = super().count_text(text)
        return count if self._calibration is None else self._calibration.scale(count)

    def _observe_call(self, request: dict, response: Any) -> None:
        """A completed LM call of this process: one of this model at this server feeds the calibration."""
        if self._calibration is None or str(request.get("model", "")).strip() != self.model:
            return
        base = request.get("api_base") or request.get("base_url")
        if not base or server_root(str(base)) != self.root:
            return
        reported = _usage_prompt_tokens(response)
        if reported is not None:
            self._calibration.observe(list(request.get("messages") or []), reported)

    def __repr__(self) -> str:
        return f"ServedTokenCounter(model={self.model!r}, api_base={self.api_base!r})"

    def __reduce__(self):
        # the process's shared counter of this model at this server (its handles and memo are not pickled)
        return (shared_served_counter, (self.model, self.api_base, self._make_estimate))


def shared_served_counter(model: str, api_base: str, estimate: Callable[[str], TokenCounter]) -> ServedTokenCounter:
    """The process's one counter of ``model`` at ``api_base`` (``token_counter.get_token_counter``'s)."""
    counter = shared_counter(f"{model} @ {server_root(api_base)}",
                             lambda _key: ServedTokenCounter(model, api_base, estimate))
    assert isinstance(counter, ServedTokenCounter)
    return counter
