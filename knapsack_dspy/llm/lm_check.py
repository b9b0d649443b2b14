"""``check_lm_config``: catch configuration mistakes before the first LM call, with one-line messages.

Checked, in order, without contacting any public API (and without LiteLLM's "Provider List" banner:
``litellm_provider``):
1. the model string parses and LiteLLM knows its provider (``local/...`` models: the name is in the catalogue,
   the runtime is installed and the weights are available);
2. the model name: an unknown name that is close to a known one is a typo (error); an unknown name with no
   close match only logs a warning (LiteLLM's bundled map lags new releases); ``strict_model=True`` makes
   every unknown name an error. Skipped for self-hosted servers (``api_base`` given, Ollama, vLLM);
3. the API key, when the provider needs one: the ``api_key`` argument or the provider's usual environment
   variable (not required for an OpenAI-compatible server given by ``api_base``);
4. a server given by ``api_base`` (or Ollama's default address) accepts TCP connections.

1-2 are ``model_check`` (``check_model_offline`` is the part that needs nothing but the model string, which
``KnapsackFewShot.compile`` asks: there an unknown model name is only a warning).
"""

from __future__ import annotations

import importlib.util
import logging
import os
import socket
from urllib.parse import urlparse

import litellm

from knapsack_dspy.llm.errors import LLMConfigError
from knapsack_dspy.llm.lm_factory import OPENAI_COMPATIBLE_PROVIDERS
from knapsack_dspy.llm.local_models import is_local_model, local_model_spec
from knapsack_dspy.llm.local_weights import check_local_weights
from knapsack_dspy.llm.model_check import SELF_HOSTED_PROVIDERS, model_name_problem, provider_for

logger = logging.getLogger(__name__)

DEFAULT_LOCAL_ADDRESSES = {"ollama": "http://localhost:11434", "ollama_chat": "http://localhost:11434",
                           "lm_studio": "http://localhost:1234/v1"}
NEEDS_API_BASE = ("hosted_vllm", "openai_like", "custom_openai", "vllm")


def _check_local(model: str, cache_dir=None) -> None:
    spec = local_model_spec(model)
    # installed, not loaded: loading it would load libgomp, which reads its waits then (``knapsack_dspy._env``)
    if importlib.util.find_spec("xllamacpp") is None:
        raise LLMConfigError(
            f"{model} needs the embedded runtime xllamacpp, which is not installed: {spec.pip_install_all()}")
    check_local_weights(spec, cache_dir)


def _check_model_name(model: str, bare: str, provider: str, strict: bool) -> None:
    problem = model_name_problem(model, bare, provider)
    if problem is None:
        return
    message, typo = problem
    if typo:
        raise LLMConfigError(message)
    if strict:
        raise LLMConfigError(f"{message}; check the name")
    logger.warning("%s; calls will be tried anyway (context window unknown)", message)


def _check_key(model: str, provider: str, api_key: str | None, api_base: str | None) -> None:
    if api_key or (api_base and provider in OPENAI_COMPATIBLE_PROVIDERS):
        return
    try:
        result = litellm.validate_environment(model=model, api_key=api_key, api_base=api_base)
    except Exception:  # noqa: BLE001  # pragma: no cover - LiteLLM cannot tell: let the call decide
        return
    missing = [k for k in result.get("missing_keys") or [] if not k.endswith(("_API_BASE", "_BASE_URL"))]
    if missing:
        names = " or ".join(missing)
        raise LLMConfigError(f"no API key for {model}: set {names} in the environment or pass an API key")


def probe_server(address: str, timeout: float = 3.0) -> None:
    """Raise ``LLMConfigError`` unless ``address`` (a URL) accepts a TCP connection within ``timeout``."""
    parsed = urlparse(address if "://" in address else f"http://{address}")
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        raise LLMConfigError(f"api_base {address!r} is not an http(s) URL such as http://127.0.0.1:8000/v1")
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    try:
        with socket.create_connection((parsed.hostname, port), timeout=timeout):
            return
    except TimeoutError:
        reason = f"no answer within {timeout:g} s"
    except OSError as exc:
        reason = exc.strerror or str(exc)
    raise LLMConfigError(f"cannot reach the LM server at {address} ({reason}); is it running?")


def check_lm_config(model: str, api_base: str | None = None, *, api_key: str | None = None,
                    strict_model: bool = False, probe_timeout: float = 3.0, cache_dir=None) -> None:
    """Raise ``LLMConfigError`` (one-line message) if ``model`` cannot work as configured; see module docstring."""
    if not isinstance(model, str) or not model.strip() or model.strip().endswith("/"):
        raise LLMConfigError(f"model must be a LiteLLM model string such as 'openai/gpt-4o-mini', got {model!r}")
    model = model.strip()
    if is_local_model(model):
        _check_local(model, cache_dir)
        return
    bare, provider = provider_for(model)
    api_base = api_base or os.environ.get(f"{provider.upper()}_API_BASE") or None
    if provider in NEEDS_API_BASE and not api_base:
        raise LLMConfigError(f"{model} needs the server's address: pass api_base (e.g. http://localhost:8000/v1) "
                             f"or set {provider.upper()}_API_BASE")
    if not api_base and provider not in SELF_HOSTED_PROVIDERS:
        _check_model_name(model, bare, provider, strict_model)
    _check_key(model, provider, api_key, api_base)
    address = api_base or DEFAULT_LOCAL_ADDRESSES.get(provider)
    if address:
        probe_server(address, probe_timeout)
