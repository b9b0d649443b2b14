"""``TokenCounter``: the interface every token counter has (memoised counts of chat messages and of text), apart
from the counters themselves (``token_counter``: API models through LiteLLM; ``local_token_counter``: the embedded
models), so that both import it and neither imports the other."""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence

from knapsack_dspy.memo import BoundedMemo

__all__ = ["DEFAULT_CACHE_SIZE", "TokenCounter", "messages_key", "shared_counter"]

DEFAULT_CACHE_SIZE = 65536


def messages_key(messages: list[dict]) -> str:
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
        return self._cache.get_or_compute(messages_key(messages), lambda: int(self._count_messages(list(messages))))

    def count_messages_batch(self, batch: Sequence[list[dict]]) -> list[int]:
        """``[count_messages(m) for m in batch]``, the same counts, with the ones not yet known counted together
        (``_count_messages_batch``: a local model's server tokenizes them in a few requests)."""
        keys = [messages_key(messages) for messages in batch]
        counts: list[int | None] = [self._cache.get(key) for key in keys]
        todo: dict[str, int] = {}
        for i, (key, count) in enumerate(zip(keys, counts, strict=True)):
            if count is None:
                todo.setdefault(key, i)
        known: dict[str, int] = {}
        if todo:
            fresh = self._count_messages_batch([list(batch[i]) for i in todo.values()], list(todo))
            for key, count in zip(todo, fresh, strict=True):
                known[key] = int(count)
                self._cache.put(key, int(count))
        return [known[key] if count is None else int(count) for key, count in zip(keys, counts, strict=True)]

    def _count_messages_batch(self, batch: list[list[dict]], keys: list[str]) -> list[int]:
        """The counts of ``batch`` (``keys``: each conversation's ``messages_key``)."""
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
        return (shared_counter, (self.model, type(self)))


_counters: dict[str, TokenCounter] = {}
_counters_lock = threading.Lock()


def shared_counter(model: str, make) -> TokenCounter:
    """The process's one counter of ``model`` (``make(model)`` the first time): ``token_counter.get_token_counter``,
    and what an unpickled counter becomes."""
    with _counters_lock:
        counter = _counters.get(model)
        if counter is None:
            counter = _counters[model] = make(model)
        return counter
