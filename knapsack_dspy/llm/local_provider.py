"""LiteLLM custom provider ``local``: the embedded models served in-process by xllamacpp.

``litellm.completion(model="local/qwen2.5-coder-0.5b-instruct", messages=[...])`` (and ``acompletion``, and
``dspy.LM("local/...")``) run the model in this process: no server to start, no network. The model is loaded
once per process on first use (see ``local_server.get_local_server``); calls from several threads are
serialised. ``max_tokens``, ``temperature``, ``stop``, ``top_p``, ``seed`` and a few other sampling options are
passed to llama.cpp; ``n > 1`` runs the request ``n`` times. The returned ``ModelResponse`` carries the
server's token usage: prompt and completion tokens, and how many prompt tokens llama.cpp took from its prompt
cache (``usage.prompt_tokens_details.cached_tokens``, its ``cache_n``: the prefix the previous prompt of the slot
shared with this one); its timings (prefill and decode milliseconds, tokens processed) ride along in
``response._hidden_params["timings"]`` (``call_counter`` sums them per example).

``timeout`` bounds the *generation* of each attempt: it is passed to llama.cpp as ``t_max_predict_ms``, which
stops decoding once that much time has passed since the first generated token (llama.cpp checks it after a
newline), and a reply cut that way raises ``litellm.Timeout`` like an API timeout would. Prompt processing
and the wait for a call from another thread to finish are not bounded (a running prefill cannot be
interrupted); ``max_tokens`` bounds the rest.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from typing import Any

import litellm
from litellm import CustomLLM
from litellm.types.utils import PromptTokensDetailsWrapper
from litellm.utils import custom_llm_setup

from knapsack_dspy.llm import local_server
from knapsack_dspy.llm.errors import LLMError
from knapsack_dspy.llm.local_models import LOCAL_PROVIDER
from knapsack_dspy.llm.local_server import reproducible, text_messages

logger = logging.getLogger(__name__)

# Options llama.cpp's chat endpoint understands; anything else LiteLLM hands over is dropped.
_PASSED_OPTIONS = ("temperature", "top_p", "top_k", "min_p", "stop", "max_tokens", "seed", "presence_penalty",
                   "frequency_penalty", "repeat_penalty", "response_format", "logit_bias")

_register_lock = threading.Lock()
_handler = None


def build_request(messages: list[dict], optional_params: dict) -> dict[str, Any]:
    """The xllamacpp request body for LiteLLM's ``messages`` + ``optional_params``."""
    request: dict[str, Any] = {"messages": text_messages(messages)}
    params = dict(optional_params or {})
    if params.get("max_completion_tokens") is not None and params.get("max_tokens") is None:
        params["max_tokens"] = params["max_completion_tokens"]
    for key in _PASSED_OPTIONS:
        if params.get(key) is not None:
            request[key] = params[key]
    if isinstance(request.get("stop"), str):
        request["stop"] = [request["stop"]]
    if reproducible():  # each prompt processed whole: the reply does not depend on what the cache held
        request["cache_prompt"] = False
    return request


def timeout_seconds(timeout) -> float | None:
    """Seconds of a LiteLLM ``timeout`` (a number, or an httpx-style object with ``read``), or None."""
    value = getattr(timeout, "read", timeout)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        return None
    return float(value)


def stopped_by_time_limit(result: dict, request: dict) -> bool:
    """Whether llama.cpp cut this reply at the request's ``t_max_predict_ms`` (not at a stop or max_tokens)."""
    limit = request.get("t_max_predict_ms")
    if not limit:
        return False
    choice = (result.get("choices") or [{}])[0]
    if choice.get("finish_reason") != "length":
        return False
    tokens = int((result.get("usage") or {}).get("completion_tokens") or 0)
    if request.get("max_tokens") is not None and tokens >= int(request["max_tokens"]):
        return False  # max_tokens ended it
    predicted_ms = float((result.get("timings") or {}).get("predicted_ms") or 0.0)
    return predicted_ms >= limit * 0.95


def _raise_server_error(result: dict, model: str) -> None:
    error = result.get("error") or {}
    message = error.get("message") if isinstance(error, dict) else str(error)
    code = error.get("code") if isinstance(error, dict) else None
    kind = error.get("type") if isinstance(error, dict) else None
    text = f"local model {model}: {message or error}"
    if kind == "exceed_context_size_error":
        raise litellm.ContextWindowExceededError(message=text, model=model, llm_provider=LOCAL_PROVIDER)
    if isinstance(code, int) and 400 <= code < 500:
        raise litellm.BadRequestError(message=text, model=model, llm_provider=LOCAL_PROVIDER)
    raise litellm.InternalServerError(message=text, model=model, llm_provider=LOCAL_PROVIDER)


#: llama.cpp's per-call timings kept in ``_hidden_params["timings"]`` (summed over the ``n`` samples).
TIMING_KEYS = ("prompt_n", "cache_n", "prompt_ms", "predicted_n", "predicted_ms")


def _timings(results: list[dict]) -> dict:
    totals: dict[str, int | float] = dict.fromkeys(TIMING_KEYS, 0)
    for result in results:
        timings = result.get("timings") or {}
        for key in TIMING_KEYS:
            value = timings.get(key)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                totals[key] += value
    return totals


def _fill_response(model_response, results: list[dict], model: str):
    choices = []
    prompt_tokens = completion_tokens = 0
    cached = int(((results[0].get("usage") or {}).get("prompt_tokens_details") or {}).get("cached_tokens")
                 or 0) if results else 0  # the first sample's: the same prompt is counted once
    for index, result in enumerate(results):
        choice = (result.get("choices") or [{}])[0]
        message = choice.get("message") or {}
        choices.append(litellm.Choices(index=index, finish_reason=choice.get("finish_reason") or "stop",
                                       message=litellm.Message(role="assistant", content=message.get("content") or "")))
        usage = result.get("usage") or {}
        prompt_tokens = int(usage.get("prompt_tokens") or prompt_tokens)  # the same prompt for every sample
        completion_tokens += int(usage.get("completion_tokens") or 0)
    model_response.choices = choices
    model_response.model = f"{LOCAL_PROVIDER}/{model}"
    model_response.created = int(time.time())
    model_response.usage = litellm.Usage(prompt_tokens=prompt_tokens, completion_tokens=completion_tokens,
                                         total_tokens=prompt_tokens + completion_tokens,
                                         prompt_tokens_details=PromptTokensDetailsWrapper(cached_tokens=cached))
    model_response._hidden_params["timings"] = _timings(results)
    return model_response


def _local_model_error(exc: Exception, model: str):
    """A configuration problem (weights missing, runtime absent) as a non-retryable LiteLLM error."""
    return litellm.BadRequestError(message=f"local model {model}: {exc}", model=model, llm_provider=LOCAL_PROVIDER)


def _complete(model: str, messages: list, optional_params: dict, model_response, api_base: str | None,
              timeout=None):
    try:
        server = local_server.get_local_server(f"{LOCAL_PROVIDER}/{model}")
        request = build_request(messages, optional_params)
    except (LLMError, ValueError, TypeError) as exc:
        raise _local_model_error(exc, model) from exc
    seconds = timeout_seconds(timeout)
    if seconds is not None:
        request["t_max_predict_ms"] = max(1, int(seconds * 1000))
    n = int((optional_params or {}).get("n") or 1)
    results = []
    for _ in range(max(1, n)):
        result = server.chat(request)
        if not isinstance(result, dict) or "error" in result:
            _raise_server_error(result if isinstance(result, dict) else {"error": str(result)}, model)
        if stopped_by_time_limit(result, request):
            tokens = (result.get("usage") or {}).get("completion_tokens")
            raise litellm.Timeout(message=f"local model {model}: generation stopped by the timeout of {seconds:g} s "
                                          f"after {tokens} tokens; raise the timeout or lower max_tokens",
                                  model=model, llm_provider=LOCAL_PROVIDER)
        results.append(result)
    return _fill_response(model_response, results, model)


class LocalLLM(CustomLLM):
    """LiteLLM handler of provider ``local`` (see the module docstring)."""

    def completion(self, model, messages, api_base, custom_prompt_dict, model_response, print_verbose,
                   encoding, api_key, logging_obj, optional_params, acompletion=None, litellm_params=None,
                   logger_fn=None, headers=None, timeout=None, client=None):
        return _complete(model, messages, optional_params, model_response, api_base, timeout)

    async def acompletion(self, model, messages, api_base, custom_prompt_dict, model_response, print_verbose,
                          encoding, api_key, logging_obj, optional_params, acompletion=None, litellm_params=None,
                          logger_fn=None, headers=None, timeout=None, client=None):
        # The model runs on this process's CPU: hand the blocking call to a worker thread.
        return await asyncio.to_thread(_complete, model, messages, optional_params, model_response, api_base,
                                       timeout)


def register_local_provider() -> None:
    """Register provider ``local`` with LiteLLM (idempotent, thread-safe; loads no model)."""
    global _handler
    with _register_lock:
        if _handler is None:
            _handler = LocalLLM()
        entries = [e for e in litellm.custom_provider_map if e.get("provider") == LOCAL_PROVIDER]
        if not entries:
            litellm.custom_provider_map.append({"provider": LOCAL_PROVIDER, "custom_handler": _handler})
        elif entries[0]["custom_handler"] is not _handler:
            logger.warning("LiteLLM provider %r is already registered by someone else; keeping theirs", LOCAL_PROVIDER)
        custom_llm_setup()


def is_local_provider_registered() -> bool:
    return any(e.get("provider") == LOCAL_PROVIDER for e in litellm.custom_provider_map)


# LiteLLM may have been imported for the first time by this module (above): the import hook (provider_hook.py)
# could not import this module mid-import, so it marked it; register now that the module is complete.
if globals().pop("_register_when_loaded", False):
    register_local_provider()
