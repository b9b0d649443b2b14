"""Errors of the LLM layer, and ``describe_lm_error``: one clear line for any exception an LM call raised.

The layer's own exceptions derive from ``LLMError`` and carry a message meant to be shown to a user as one
line (the CLI prints ``str(exc)``; no traceback is needed to understand what to do).

``describe_lm_error`` also handles DSPy 3.4.1's ``LMError`` family (what ``dspy.LM`` raises: ``LMAuthError``,
``LMRateLimitError``, ``LMTimeoutError``, ``LMServerError``, ``LMTransportError``,
``ContextWindowExceededError``, ...) and LiteLLM's exceptions (when ``litellm.completion`` is called directly).
The line names the model, the HTTP status when there is one, what happened and what to do.
"""

from __future__ import annotations

import re

from knapsack_dspy.errors import KnapsackDspyError


class LLMError(KnapsackDspyError, RuntimeError):
    """Base class of the LLM layer's own errors."""


class LLMConfigError(LLMError):
    """The LM cannot be used as configured: missing API key, unknown provider or model, unreachable server,
    local model not installed."""


class LocalModelError(LLMConfigError):
    """The embedded local model cannot be loaded (weights missing or corrupt, runtime not installed)."""


class ModelServerUnavailable(LLMError):
    """The server of a served model did not answer a token count (connection refused or dropped, a timeout, a
    5xx): like an LM call failing so, transient (``lm_error_kind``): asked again on resume."""

    transient = True


# -- describe_lm_error ---------------------------------------------------------------------------------------
_MAX_DETAIL = 160


def _one_line(text: str, limit: int = _MAX_DETAIL) -> str:
    text = re.sub(r"\s+", " ", str(text)).strip()
    return text if len(text) <= limit else text[: limit - 3].rstrip() + "..."


def cause_chain(exc: BaseException) -> list[BaseException]:
    """``exc`` and its explicit causes (``raise ... from``), outermost first. Implicit ``__context__`` links are
    not followed: inside retry loops they point at unrelated earlier failures."""
    out: list[BaseException] = []
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        out.append(current)
        seen.add(id(current))
        current = current.__cause__
    return out


def _detail(exc: BaseException) -> str:
    """The provider's own message without LiteLLM's / DSPy's prefixes and advice blocks."""
    text = str(getattr(exc, "message", None) or exc)
    text = text.split("\n\n  To fix:", 1)[0]
    text = re.sub(r"^\[[^\]]*\]\s*", "", text)  # DSPy's "[model] "
    text = re.sub(r"^(litellm\.\w+:\s*)+", "", text)
    text = re.sub(r"^(\w+Error|\w+Exception|APITimeoutError)\s*[-:]\s*", "", text)
    text = re.sub(r"^(OpenAIException|AnthropicException|\w+Exception)\s*-\s*", "", text)
    text = re.sub(r"^error\s*-\s*", "", text)
    text = text.split(", Received response", 1)[0]
    return _one_line(text)


_KINDS = (
    # (class names in the chain, kind) -- the first class of the chain that matches decides.
    (("ContextWindowExceededError", "ContextLengthError"), "context"),
    (("LMAuthError", "AuthenticationError", "AuthError", "PermissionDeniedError"), "auth"),
    (("LMBillingError", "BudgetExceededError", "BillingError"), "billing"),
    (("LMRateLimitError", "RateLimitError"), "rate"),
    (("LMTimeoutError", "Timeout", "APITimeoutError", "TimeoutError"), "timeout"),
    (("LMUnsupportedModelError", "NotFoundError", "UnsupportedModelError"), "model"),
    (("LMTransportError", "APIConnectionError", "TransportError", "ConnectionError"), "transport"),
    (("LMServerError", "InternalServerError", "ServiceUnavailableError", "BadGatewayError", "ServerError"), "server"),
    (("LMInvalidRequestError", "BadRequestError", "UnprocessableEntityError", "InvalidRequestError"), "request"),
    (("LMConfigurationError", "LMNotConfiguredError"), "config"),
)


def _class_names(exc: BaseException) -> set[str]:
    return {cls.__name__ for cls in type(exc).__mro__}


def _kind(chain: list[BaseException]) -> str | None:
    for exc in chain:
        names = _class_names(exc)
        for classes, kind in _KINDS:
            if names.intersection(classes):
                return kind
    return None


def _status(chain: list[BaseException]) -> int | None:
    for exc in chain:
        status = getattr(exc, "status", None) or getattr(exc, "status_code", None)
        if isinstance(status, int) and 100 <= status <= 599:
            return status
    return None


def _model(chain: list[BaseException], model: str | None) -> str | None:
    if model:
        return model
    for exc in chain:
        value = getattr(exc, "model", None)
        if isinstance(value, str) and value:
            return value
    return None


_GARBAGE = re.compile(r"Expecting value|JSONDecodeError|Unterminated string|Extra data|not valid JSON", re.IGNORECASE)
_DISCONNECT = re.compile(r"Connection error|Connection refused|Server disconnected|RemoteProtocolError|"
                         r"connection reset|Name or service not known|nodename nor servname", re.IGNORECASE)


#: ``lm_error_kind`` values: may succeed if asked again / needs the user to change something.
TRANSIENT, CONFIG = "transient", "config"
_TRANSIENT_KINDS = ("rate", "timeout", "transport", "server")


def lm_error_kind(exc: BaseException) -> str | None:
    """How an LM call failed: ``"transient"`` (rate limit, 5xx, timeout, dropped connection, a reply that is
    not JSON or has no choices: asking again may work), ``"config"`` (credentials, quota, unknown model or
    provider, a rejected request, a prompt longer than the context window, a local model not installed:
    asking again fails the same way until something is changed), or ``None`` when ``exc`` is not an LM
    failure at all."""
    chain = cause_chain(exc)
    ours = [item for item in chain if isinstance(item, LLMError)]
    if ours:
        return TRANSIENT if any(getattr(item, "transient", False) for item in ours) else CONFIG
    kind = _kind(chain)
    if kind in _TRANSIENT_KINDS:
        return TRANSIENT
    if kind is not None:
        return CONFIG
    if any("LMError" in _class_names(e) for e in chain):  # DSPy's other LM errors (e.g. LMUnexpectedError)
        return TRANSIENT
    return None


def describe_lm_error(exc: BaseException, *, model: str | None = None, api_base: str | None = None) -> str:
    """One line saying what went wrong with an LM call and what to do about it."""
    chain = cause_chain(exc)
    for item in chain:  # our own errors already carry a user-facing message
        if isinstance(item, LLMError):
            return _one_line(str(item), 400)
    name = _model(chain, model)
    who = f"LM {name}" if name else "the LM"
    where = f" at {api_base}" if api_base else ""
    status = _status(chain)
    http = f" (HTTP {status})" if status else ""
    detail = _detail(chain[-1])
    full_text = " ".join(str(e) for e in chain)
    kind = _kind(chain)
    from knapsack_dspy.llm.empty_reply import EMPTY_REPLY_MESSAGE

    if EMPTY_REPLY_MESSAGE in full_text:
        return f"{who}: the server{where} sent replies with no answer (an empty 'choices' list) even after " \
               "retrying; try again later."
    if _GARBAGE.search(full_text):
        return (f"{who}: the server{where} sent a reply that is not valid JSON; is it really an OpenAI-compatible "
                f"endpoint (api_base usually ends in /v1)? [{detail}]")
    if kind == "context":
        return (f"{who}: the prompt is longer than the model's context window{http}; lower the token budget or "
                f"the number of exemplars. [{detail}]")
    if kind == "auth":
        return (f"{who}: the provider rejected the credentials{http}; check the API key (the provider's "
                f"*_API_KEY environment variable or --api-key). [{detail}]")
    if kind == "billing":
        return f"{who}: the account is out of quota or credit{http}. [{detail}]"
    if kind == "rate":
        return (f"{who}: rate limited{http} even after retrying; wait, lower the number of threads, or raise "
                f"num_retries. [{detail}]")
    if kind == "timeout":
        return (f"{who}: no answer{where} within the timeout, even after retrying; raise the timeout or check "
                f"the server's load. [{detail}]")
    if kind == "model":
        return f"{who}: the provider{where} does not know this model{http}; check the model name. [{detail}]"
    if kind == "transport" or (kind == "server" and _DISCONNECT.search(full_text)):
        return (f"{who}: cannot reach the server{where}, or it dropped the connection; is it running and is "
                f"the address right? [{detail}]")
    if kind == "server":
        return f"{who}: the server{where} failed{http} even after retrying; try again later. [{detail}]"
    if kind == "request":
        if re.search(r"LLM Provider NOT provided", full_text):
            return (f"{who}: LiteLLM does not know this provider; model strings look like 'openai/gpt-4o-mini', "
                    "'anthropic/claude-haiku-4-5', 'ollama_chat/llama3.1' or 'local/qwen2.5-coder-1.5b-instruct'.")
        return f"{who}: the provider rejected the request{http}. [{detail}]"
    if kind == "config":
        return f"{who}: not configured correctly. [{detail}]"
    return f"{who}: call failed ({type(exc).__name__}). [{_detail(exc)}]"
