"""Token counting with the target model's own tokenizer, as the model sees the prompt.

``get_token_counter(model)`` returns one shared ``TokenCounter`` per model string:

- ``local/...`` models: ``LocalTokenCounter`` asks the model's running llama.cpp server (``/apply-template``,
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
- Anything else (an ``openai/<name>`` served by vLLM, Anthropic, Ollama, ...): the same counter on tiktoken's
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

import hashlib
import json
import logging
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from knapsack_dspy import paths, text_holes
from knapsack_dspy.llm import local_server
from knapsack_dspy.llm.bpe_tokenizer import bpe_encoding
from knapsack_dspy.llm.count_store import TokenCountStore
from knapsack_dspy.llm.cpu_load import usable_cores
from knapsack_dspy.llm.errors import LLMConfigError, LLMError
from knapsack_dspy.llm.litellm_provider import litellm_provider
from knapsack_dspy.llm.local_models import is_local_model, local_context_window, local_model_spec, same_tokenizer
from knapsack_dspy.llm.local_weights import check_local_weights
from knapsack_dspy.memo import BoundedMemo

logger = logging.getLogger(__name__)

DEFAULT_CACHE_SIZE = 65536
COUNT_THREADS = 4  # concurrent count requests to a local model's server (HTTP: the GIL is released while waiting)
TOKENIZE_CHARS = 1_000_000  # characters of prompts tokenized in one request (a batch of ~500 demos: a few)
BPE_FIRST_CHECKS = 16  # prompts of the first batch the in-process tokenizer's counts are compared on
BPE_CHECKS = 2  # ... and of every later batch (each ~3 ms of the server's CPU for a TAT-QA demo)
# Providers whose models LiteLLM counts with their exact tiktoken encoding when it knows the model name.
_TIKTOKEN_PROVIDERS = ("openai", "azure", "text-completion-openai")


def _messages_key(messages: list[dict]) -> str:
    if not isinstance(messages, (list, tuple)):
        raise TypeError(f"messages must be a list of {{'role', 'content'}} dicts, got {type(messages).__name__}")
    try:
        return "m" + json.dumps(list(messages), sort_keys=True, ensure_ascii=False, default=str)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"messages are not JSON-like: {exc}") from exc


class TokenCounter:
    """Counts tokens for one model. Subclasses implement ``_count_messages`` and ``_count_text``."""

    model: str
    context_window: int | None
    exact: bool = True

    def __init__(self, model: str, context_window: int | None, cache_size: int = DEFAULT_CACHE_SIZE):
        self.model = model
        self.context_window = context_window
        self._cache = BoundedMemo(cache_size)

    def count_messages(self, messages: list[dict]) -> int:
        """Tokens of the chat-formatted prompt built from ``messages`` (ready for the reply)."""
        return self._cache.get_or_compute(_messages_key(messages), lambda: int(self._count_messages(list(messages))))

    def count_messages_batch(self, batch: Sequence[list[dict]]) -> list[int]:
        """``[count_messages(m) for m in batch]``, the same counts, with the ones not yet known counted together
        (``_count_messages_batch``: a local model's server tokenizes them in a few requests)."""
        keys = [_messages_key(messages) for messages in batch]
        counts: list[int | None] = [self._cache.get(key) for key in keys]
        todo: dict[str, int] = {}
        for i, (key, count) in enumerate(zip(keys, counts, strict=True)):
            if count is None:
                todo.setdefault(key, i)
        if todo:
            fresh = self._count_messages_batch([list(batch[i]) for i in todo.values()], list(todo))
            known = {}
            for key, count in zip(todo, fresh, strict=True):
                known[key] = int(count)
                self._cache.put(key, int(count))
            counts = [known[key] if count is None else count for key, count in zip(keys, counts, strict=True)]
        return [int(c) for c in counts]

    def _count_messages_batch(self, batch: list[list[dict]], keys: list[str]) -> list[int]:
        """The counts of ``batch`` (``keys``: each conversation's ``_messages_key``)."""
        return [int(self._count_messages(messages)) for messages in batch]

    def count_text(self, text: str) -> int:
        """Tokens of ``text`` on its own (no chat template)."""
        text = "" if text is None else str(text)
        return self._cache.get_or_compute("t" + text, lambda: int(self._count_text(text)))

    @property
    def cache_info(self) -> dict[str, int]:
        return self._cache.info

    def _count_messages(self, messages: list[dict]) -> int:  # pragma: no cover - abstract
        raise NotImplementedError

    def _count_text(self, text: str) -> int:  # pragma: no cover - abstract
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}(model={self.model!r}, context_window={self.context_window}, exact={self.exact})"

    def __reduce__(self):
        # Pickled as its model (a program saved with save_program=True): unpickling gives the process's shared
        # counter, with its own tokenizer handles and memo (locks and model-server handles are not pickled).
        return (get_token_counter, (self.model,))


def _litellm():
    """LiteLLM, imported when an API model's tokens are counted (~2-4 s: a local model's counts never need it)."""
    import litellm

    return litellm


class LiteLLMTokenCounter(TokenCounter):
    """``litellm.token_counter`` with the model's tiktoken encoding, or ``cl100k_base`` as an offline fallback."""

    def __init__(self, model: str, cache_size: int = DEFAULT_CACHE_SIZE):
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


class LocalTokenCounter(TokenCounter):
    """The embedded model's own tokenizer and chat template, via its in-process server's HTTP endpoints."""

    def __init__(self, model: str, cache_dir: Any = None, cache_size: int = DEFAULT_CACHE_SIZE,
                 count_store: TokenCountStore | None = None):
        local_model_spec(model)  # unknown name -> LLMConfigError
        super().__init__(model, local_context_window(model), cache_size)
        self._cache_dir = cache_dir
        self._count_store = count_store  # None: <cache>/token_counts/<model>.sqlite3, opened on first use
        self._server = None
        self._templates: dict[tuple[str, ...], text_holes.Template | None] = {}  # per sequence of roles
        self._bpe: Any = None  # the tokenizer in process (bpe_tokenizer), False: none or switched off
        self._bpe_checked = 0  # prompts it counted as the server did

    def counting_model(self) -> str:
        """The model whose server counts: the smallest catalogue model with the same tokenizer whose weights are
        available (the 0.5B counts for the 1.5B: loading it takes a fraction of the time and memory), else this
        model. Counts are identical (``LocalModelSpec.tokenizer``)."""
        for spec in same_tokenizer(self.model):
            if spec.model == self.model:
                return self.model
            try:
                check_local_weights(spec, self._cache_dir)
            except LLMError:
                continue
            return spec.model
        return self.model

    def _get_server(self):
        if self._server is None:
            self._server = local_server.get_local_server(self.counting_model(), self._cache_dir)
        return self._server

    def counts_on_disk(self) -> TokenCountStore:
        """Counts persist across processes (a count is a pure function of the verified weights' tokenizer and
        the messages), so a re-run compiles without asking the model server again (``count_store``)."""
        if self._count_store is None:
            root = paths.cache_dir(self._cache_dir) / "token_counts"
            self._count_store = TokenCountStore(root / f"{self.model.replace('/', '_')}.sqlite3")
        return self._count_store

    def _count_messages(self, messages: list[dict]) -> int:
        key = hashlib.sha256(_messages_key(messages).encode()).digest()
        cached = self.counts_on_disk().get(key)
        if cached is not None:
            return int(cached)
        server = self._get_server()
        count = len(server.tokenize(server.apply_template(messages)))
        self.counts_on_disk().put(key, count)
        return count

    def _count_text(self, text: str) -> int:
        return len(self._get_server().tokenize(text)) if text else 0

    def _count_messages_batch(self, batch: list[list[dict]], keys: list[str]) -> list[int]:
        """The counts on disk, then the others: their prompts built from the chat template's skeleton
        (:meth:`_prompt_texts`) and tokenized by the server in a few requests (``LocalServer.token_counts``:
        :data:`COUNT_THREADS` at once, up to :data:`TOKENIZE_CHARS` characters each) -- the same prompts and token
        ids as one at a time, so the same counts."""
        keys = [hashlib.sha256(key.encode()).digest() for key in keys]
        disk = self.counts_on_disk()
        counts = disk.get_many(keys)  # one query per 500 keys
        missing = [i for i, count in enumerate(counts) if count is None]
        if missing:
            server = self._get_server()
            texts = self._prompt_texts(server, [batch[i] for i in missing])
            fresh = self._bpe_counts(server, texts)
            if fresh is None:
                fresh = self._server_counts(server, texts)
            for i, value in zip(missing, fresh, strict=True):
                counts[i] = value
            disk.put_many((keys[i], int(value)) for i, value in zip(missing, fresh, strict=True))  # one transaction
        return [int(c) for c in counts]

    @staticmethod
    def _server_counts(server, texts: list[str]) -> list[int]:
        """The server's token counts of ``texts``: :data:`COUNT_THREADS` requests at a time, up to
        :data:`TOKENIZE_CHARS` characters each."""
        parts = _request_parts([len(t) for t in texts], COUNT_THREADS, TOKENIZE_CHARS)
        with ThreadPoolExecutor(COUNT_THREADS) as pool:
            return [count for part in pool.map(lambda p: server.token_counts(texts[p[0]:p[1]]), parts)
                    for count in part]

    def _bpe_counts(self, server, texts: list[str]) -> list[int] | None:
        """The token counts of ``texts`` by the model's tokenizer in process (``bpe_tokenizer``), checked against
        the server's on :data:`BPE_FIRST_CHECKS` of the first batch and :data:`BPE_CHECKS` of every later one;
        ``None`` when there is no such tokenizer or it has ever counted differently (then the server counts)."""
        if self._bpe is None:
            path = getattr(server, "model_path", None)
            self._bpe = (bpe_encoding(path) if path is not None else None) or False
            self._bpe_checked = 0
        if self._bpe is False or not texts:
            return None
        encode = self._bpe.encode  # releases the GIL: one thread per part of the batch
        parts = _request_parts([len(t) for t in texts], min(COUNT_THREADS, usable_cores()), sum(map(len, texts)))
        with ThreadPoolExecutor(len(parts)) as pool:
            counts = [count for part in pool.map(
                lambda p: [len(encode(t, allowed_special="all")) for t in texts[p[0]:p[1]]], parts) for count in part]
        wanted = BPE_FIRST_CHECKS if not self._bpe_checked else BPE_CHECKS
        sample = sorted({round(k * (len(texts) - 1) / max(1, wanted - 1)) for k in range(wanted)})
        expected = server.token_counts([texts[i] for i in sample])
        if [counts[i] for i in sample] != expected:
            logger.warning("%s: the in-process tokenizer counted a prompt differently from the model server; the "
                           "server counts from now on", self.model)
            self._bpe = False
            return None
        self._bpe_checked += len(sample)
        return counts

    def _prompt_texts(self, server, batch: list[list[dict]]) -> list[str]:
        """The server's prompt for each conversation of ``batch`` (``apply_template``), built without asking it:
        per sequence of roles, the template is probed once with marker contents (``text_holes.probe``, trimmed
        or escaped contents refused) and each conversation's contents are put in. The first conversation of
        each sequence in a batch is also asked of the server and compared: a template that treats some
        contents apart (it looks for a tag in them) stops being used, with a warning, and the server builds
        every prompt."""
        conversations = [local_server.text_messages(messages) for messages in batch]
        texts: list[str | None] = [None] * len(batch)
        checked: set[tuple[str, ...]] = set()
        for i, messages in enumerate(conversations):
            roles = tuple(m["role"] for m in messages)
            template = self._chat_template(server, roles)
            if template is None:
                continue
            text = text_holes.fill(template, [m["content"] for m in messages])[0]
            if roles not in checked:
                checked.add(roles)
                if text != server.apply_template(messages):
                    logger.warning("%s: the chat template treats some message contents apart; its prompts are "
                                   "built by the server one at a time", self.model)
                    self._templates[roles] = None
                    continue
            texts[i] = text
        todo = [i for i, text in enumerate(texts) if text is None]
        if todo:
            with ThreadPoolExecutor(COUNT_THREADS) as pool:
                for i, text in zip(todo, pool.map(lambda k: server.apply_template(conversations[k]), todo),
                                   strict=True):
                    texts[i] = text
        return [str(t) for t in texts]

    def _chat_template(self, server, roles: tuple[str, ...]) -> text_holes.Template | None:
        """The chat template's prompt for a conversation of ``roles``, each content a hole (``None``: the
        template does not put contents in verbatim)."""
        templates = self._templates
        if roles not in templates:
            templates[roles] = text_holes.probe(
                lambda contents: [server.apply_template([{"role": role, "content": content}
                                                         for role, content in zip(roles, contents, strict=True)])],
                len(roles), edges=True)
        return templates[roles]


def _request_parts(sizes: list[int], parts: int, most: int) -> list[tuple[int, int]]:
    """``[start, end)`` ranges cutting texts of ``sizes`` characters into at least ``parts`` pieces of similar size
    (fewer when there are fewer texts), none above ``most`` characters unless it is a single text."""
    total = sum(sizes)
    target = min(most, max(1, -(-total // max(1, parts))))
    out, start, size = [], 0, 0
    for end, length in enumerate(sizes):
        if end > start and size + length > target:
            out.append((start, end))
            start, size = end, 0
        size += length
    if start < len(sizes):
        out.append((start, len(sizes)))
    return out


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


_counters: dict[str, TokenCounter] = {}
_counters_lock = threading.Lock()


def get_token_counter(model: str) -> TokenCounter:
    """The shared ``TokenCounter`` of ``model`` (a LiteLLM model string, e.g. ``openai/gpt-4o-mini`` or
    ``local/qwen2.5-coder-1.5b-instruct``). Local models are loaded on the first count, not here."""
    if not isinstance(model, str) or not model.strip():
        raise LLMConfigError(f"model must be a LiteLLM model string such as 'openai/gpt-4o-mini', got {model!r}")
    model = model.strip()
    with _counters_lock:
        counter = _counters.get(model)
        if counter is None:
            counter = LocalTokenCounter(model) if is_local_model(model) else LiteLLMTokenCounter(model)
            _counters[model] = counter
        return counter
