"""``LocalTokenCounter``: an embedded model's own tokenizer and chat template, via its in-process server.

``token_counter.get_token_counter`` builds one for a ``local/...`` model (see ``token_counter``'s docstring: exact
counts, the smallest model of the same tokenizer counting, batches by the chat template's skeleton and the model's
BPE in process, counts on disk across processes). Kept apart so that counting for an API model loads none of the
embedded runtime's modules.
"""

from __future__ import annotations

import hashlib
import logging
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from knapsack_dspy import paths, text_holes
from knapsack_dspy.llm import local_server
from knapsack_dspy.llm.bpe_tokenizer import bpe_encoding
from knapsack_dspy.llm.count_store import TokenCountStore
from knapsack_dspy.llm.cpu_load import usable_cores
from knapsack_dspy.llm.errors import LLMError
from knapsack_dspy.llm.local_models import local_context_window, local_model_spec, same_tokenizer
from knapsack_dspy.llm.local_weights import check_local_weights
from knapsack_dspy.llm.token_count_base import DEFAULT_CACHE_SIZE, TokenCounter, messages_key

__all__ = ["LocalTokenCounter"]

logger = logging.getLogger(__name__)

COUNT_THREADS = 4  # concurrent count requests to a local model's server (HTTP: the GIL is released while waiting)
TOKENIZE_CHARS = 1_000_000  # characters of prompts tokenized in one request (a batch of ~500 demos: a few)
BPE_FIRST_CHECKS = 16  # prompts of the first batch the in-process tokenizer's counts are compared on
BPE_CHECKS = 2  # ... and of every later batch (each ~3 ms of the server's CPU for a TAT-QA demo)


class LocalTokenCounter(TokenCounter):
    """The embedded model's own tokenizer and chat template, via its in-process server's HTTP endpoints."""

    def __init__(self, model: str, cache_dir: Any = None, cache_size: int = DEFAULT_CACHE_SIZE,
                 count_store: TokenCountStore | None = None):
        local_model_spec(model)  # unknown name -> LLMConfigError
        super().__init__(model, local_context_window(model), cache_size)
        self._cache_dir = cache_dir
        self._count_store = count_store  # None: <cache>/token_counts/<model>.sqlite3, opened on first use
        self._server: local_server.LocalServer | None = None
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
        key = hashlib.sha256(messages_key(messages).encode()).digest()
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
        digests = [hashlib.sha256(key.encode()).digest() for key in keys]
        disk = self.counts_on_disk()
        counts = disk.get_many(digests)  # one query per 500 keys
        missing = [i for i, count in enumerate(counts) if count is None]
        counted: dict[int, int] = {}
        if missing:
            server = self._get_server()
            texts = self._prompt_texts(server, [batch[i] for i in missing])
            fresh = self._bpe_counts(server, texts)
            if fresh is None:
                fresh = self._server_counts(server, texts)
            counted = {i: int(value) for i, value in zip(missing, fresh, strict=True)}
            disk.put_many((digests[i], value) for i, value in counted.items())  # one transaction
        return [counted[i] if count is None else int(count) for i, count in enumerate(counts)]

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
