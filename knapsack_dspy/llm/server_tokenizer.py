"""Token counts from the server that runs a model: what it offers is asked once per server, then used.

- **llama.cpp** (``llama-server``, ``kdspy serve-model``): ``POST /apply-template`` builds the exact prompt its chat
  template makes of the messages, ``POST /tokenize`` counts it (``add_special``: what a completion adds, a BOS
  for models that want one), so a count is the ``usage.prompt_tokens`` the server reports for those messages. Its
  context per slot: ``GET /props`` (``default_generation_settings.n_ctx``).
- **vLLM** (``vllm serve``): ``POST /tokenize`` with the messages (``add_generation_prompt``) counts the templated
  prompt itself; its ``max_model_len`` is the context window.

Both endpoints sit at the server's root, not under ``/v1`` (``served_models.server_root``). :func:`server_tokenizer`
probes ``/apply-template``, then ``/tokenize`` with messages, and remembers the answer per server and model name
(``None``: the server counts nothing, e.g. Ollama or an API; the caller estimates). A server that does not answer
the probe (refused, reset, timed out, 5xx) raises ``ModelServerUnavailable`` (transient) and is probed again next
time; a 4xx / a reply of another shape means "not offered".
"""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from knapsack_dspy.llm.errors import ModelServerUnavailable
from knapsack_dspy.llm.served_models import server_root

__all__ = ["LLAMA_CPP", "VLLM", "LlamaCppTokenizer", "ServerTokenizer", "VLLMTokenizer", "forget_server_tokenizers",
           "served_model_name", "server_tokenizer"]

LLAMA_CPP, VLLM = "llama.cpp", "vLLM"
REQUEST_TIMEOUT_S = 60.0
COUNT_THREADS = 4  # concurrent count requests of a batch (HTTP: the GIL is released while waiting)
_PROBE = [{"role": "user", "content": "ping"}]
_TEXT_END = -1  # between two texts of one llama.cpp /tokenize request: never a token id
# the servers are addressed directly (usually on loopback): never through a proxy from the environment
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


class _NotOffered(Exception):
    """The server answered, but not with what was asked (a 4xx, a reply of another shape)."""


def _plain(messages: list[dict]) -> list[dict]:
    """The messages as a server's chat template reads them: role and content only."""
    if not isinstance(messages, (list, tuple)):
        raise TypeError(f"messages must be a list of {{'role', 'content'}} dicts, got {type(messages).__name__}")
    return [{"role": m.get("role", "user"), "content": m.get("content")} for m in messages]


class ServerTokenizer:
    """Counts one model's tokens on the server that runs it. ``kind``: ``LLAMA_CPP`` or ``VLLM``; ``root``: the
    server's address; ``context_window``: tokens a prompt and its reply may span there (None: not said)."""

    kind = ""

    def __init__(self, root: str, model_name: str, context_window: int | None = None):
        self.root = root
        self.model_name = model_name
        self.context_window = context_window

    def _post(self, path: str, body: dict[str, Any]) -> Any:
        return _request(self.root + path, body)

    def count_messages(self, messages: list[dict]) -> int:  # pragma: no cover - abstract
        raise NotImplementedError

    def count_text(self, text: str) -> int:  # pragma: no cover - abstract
        raise NotImplementedError

    def count_messages_batch(self, batch: list[list[dict]]) -> list[int]:
        """``[count_messages(m) for m in batch]``, a few requests at once."""
        if len(batch) <= 1:
            return [self.count_messages(messages) for messages in batch]
        with ThreadPoolExecutor(min(COUNT_THREADS, len(batch))) as pool:
            return list(pool.map(self.count_messages, batch))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.root!r}, {self.model_name!r}, context_window={self.context_window})"


class LlamaCppTokenizer(ServerTokenizer):
    """llama.cpp's ``/apply-template`` then ``/tokenize`` (see the module docstring)."""

    kind = LLAMA_CPP

    def __init__(self, root: str, model_name: str, context_window: int | None = None):
        super().__init__(root, model_name, context_window)
        self._special: int | None = None  # tokens a completion adds around a prompt (a BOS), counted once

    def special_tokens(self) -> int:
        if self._special is None:
            self._special = len(self._post("/tokenize", {"content": "", "add_special": True})["tokens"])
        return self._special

    def template(self, messages: list[dict]) -> str:
        return str(self._post("/apply-template", {"messages": _plain(messages)})["prompt"])

    def count_messages(self, messages: list[dict]) -> int:
        return self.count_text(self.template(messages)) + self.special_tokens()

    def count_text(self, text: str) -> int:
        return len(self._post("/tokenize", {"content": str(text), "add_special": False})["tokens"])

    def count_messages_batch(self, batch: list[list[dict]]) -> list[int]:
        """The prompts built a few at once, then tokenized in one request (a ``-1`` between two texts: llama.cpp
        tokenizes the strings of a list one by one and passes numbers through)."""
        if len(batch) <= 1:
            return [self.count_messages(messages) for messages in batch]
        with ThreadPoolExecutor(min(COUNT_THREADS, len(batch))) as pool:
            prompts = list(pool.map(self.template, batch))
        content: list[Any] = []
        for k, prompt in enumerate(prompts):
            content += [_TEXT_END, prompt] if k else [prompt]
        tokens = self._post("/tokenize", {"content": content, "add_special": False})["tokens"]
        ends = [-1] + [k for k, token in enumerate(tokens) if token == _TEXT_END] + [len(tokens)]
        if len(ends) != len(prompts) + 1:  # a server that tokenizes lists otherwise: one prompt at a time
            return [self.count_text(prompt) + self.special_tokens() for prompt in prompts]
        return [ends[k + 1] - ends[k] - 1 + self.special_tokens() for k in range(len(prompts))]


class VLLMTokenizer(ServerTokenizer):
    """vLLM's ``/tokenize`` (see the module docstring)."""

    kind = VLLM

    def count_messages(self, messages: list[dict]) -> int:
        return int(self._post("/tokenize", {"model": self.model_name, "messages": _plain(messages),
                                            "add_generation_prompt": True})["count"])

    def count_text(self, text: str) -> int:
        return int(self._post("/tokenize", {"model": self.model_name, "prompt": str(text),
                                            "add_special_tokens": False})["count"])


def _request(url: str, body: dict[str, Any] | None = None) -> Any:
    """The JSON a server answers to ``POST url`` (``GET`` without a body). ``ModelServerUnavailable`` when it does
    not answer; ``_NotOffered`` for a 4xx or a reply that is not JSON."""
    data = None if body is None else json.dumps(body).encode("utf-8")
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"},
                                     method="GET" if body is None else "POST")
    try:
        with _OPENER.open(request, timeout=REQUEST_TIMEOUT_S) as response:
            raw = response.read()
    except urllib.error.HTTPError as exc:
        if 400 <= exc.code < 500 or exc.code == 501:
            raise _NotOffered(f"HTTP {exc.code}") from None
        raise ModelServerUnavailable(f"the model server at {url} answered HTTP {exc.code} to a token count; "
                                     "try again when it is back") from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", None) or exc
        raise ModelServerUnavailable(f"the model server at {url} did not answer a token count ({reason}); is it "
                                     "running?") from None
    try:
        return json.loads(raw)
    except ValueError:
        raise _NotOffered("not JSON") from None


def _llama_cpp(root: str, name: str) -> LlamaCppTokenizer | None:
    reply = _request(root + "/apply-template", {"messages": _PROBE})
    if not isinstance(reply, dict) or not isinstance(reply.get("prompt"), str):
        return None
    window = None
    try:
        props = _request(root + "/props")
        window = int(props["default_generation_settings"]["n_ctx"]) or None
    except (_NotOffered, KeyError, TypeError, ValueError):
        pass
    return LlamaCppTokenizer(root, name, window)


def _vllm(root: str, name: str) -> VLLMTokenizer | None:
    reply = _request(root + "/tokenize", {"model": name, "messages": _PROBE, "add_generation_prompt": True})
    count = reply.get("count") if isinstance(reply, dict) else None
    if isinstance(count, bool) or not isinstance(count, int):
        return None
    window = reply.get("max_model_len")
    return VLLMTokenizer(root, name, int(window) if isinstance(window, int) and window > 0 else None)


_found: dict[tuple[str, str], ServerTokenizer | None] = {}
_found_lock = threading.Lock()


def served_model_name(model: str) -> str:
    """The name a server knows ``model`` by: the LiteLLM string without its provider (``openai/<name>``)."""
    return model.split("/", 1)[1] if "/" in model else model


def server_tokenizer(api_base: str, model: str) -> ServerTokenizer | None:
    """How the server at ``api_base`` counts ``model``'s tokens, or None when it does not (asked once per server
    and model; ``ModelServerUnavailable`` when it does not answer, and then asked again next time)."""
    root = server_root(api_base)
    key = (root, model)
    with _found_lock:
        if key in _found:
            return _found[key]
    found: ServerTokenizer | None = None
    for probe in (_llama_cpp, _vllm):
        try:
            found = probe(root, served_model_name(model))
        except _NotOffered:
            found = None
        if found is not None:
            break
    with _found_lock:
        return _found.setdefault(key, found)


def forget_server_tokenizers() -> None:
    """Forget what the servers offered (they are asked again; tests, or a server replaced by another kind)."""
    with _found_lock:
        _found.clear()
