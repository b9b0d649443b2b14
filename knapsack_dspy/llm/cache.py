"""Where DSPy's LM response cache lives, and turning it off (``--no-cache``).

``configure_cache`` calls ``dspy.configure_cache`` (DSPy 3.4.1: a two-level cache, an in-memory LRU in front of
a diskcache ``FanoutCache``) with the disk part in ``<project cache>/lm`` instead of ``~/.dspy_cache``, and
installs the call and cache-hit counters of ``call_counter``. A cached answer is keyed on the request (model,
messages, temperature, max_tokens, ..., and the server: ``api_base`` / ``base_url``) except the ``api_key`` and
the transport settings ``timeout`` / ``max_retries``; a re-run of the same program on the same inputs makes no
LM call.

DSPy itself leaves ``api_base`` out of the key, so two servers behind one model string (``openai/my-model`` at
two addresses) would share answers, and keeps ``timeout`` in it, so raising a timeout would forget every
answer; ``key_cache_on_endpoint`` puts the server into the key and takes the transport settings out.
Otherwise the key is DSPy's own.
"""

from __future__ import annotations

import functools
import os
import threading
from pathlib import Path
from typing import Any

import dspy

from knapsack_dspy import paths
from knapsack_dspy.llm.call_counter import install_cache_hit_counter, install_call_counter

LM_CACHE_SUBDIR = "lm"
DEFAULT_DISK_LIMIT_BYTES = 10 * 1024**3
ENDPOINT_ARGS = ("api_base", "base_url")  # where a request goes: part of the cache key (DSPy ignores them)
TRANSPORT_ARGS = ("timeout", "max_retries")  # how long / how often to try: no part of the answer
_ENDPOINT_MARK = "_kdspy_endpoint_keyed"
_install_lock = threading.Lock()


def key_cache_on_endpoint(cache: Any = None) -> None:
    """Make DSPy's response cache (``dspy.cache`` unless given) key answers on the server they came from.

    Wraps the cache object's ``cache_key`` so that ``api_base`` / ``base_url`` are no longer dropped from the
    request before hashing (``api_key`` still is: a secret, and the same server answers every key alike), and
    ``timeout`` / ``max_retries`` are (they change how a call is tried, not its answer). Idempotent per cache
    object.
    """
    if cache is None:
        cache = dspy.cache
    with _install_lock:
        original = cache.cache_key
        if getattr(original, _ENDPOINT_MARK, False):
            return

        @functools.wraps(original)
        def cache_key(request: dict[str, Any], ignored_args_for_cache_key: list[str] | None = None) -> str:
            ignored = [arg for arg in (ignored_args_for_cache_key or []) if arg not in ENDPOINT_ARGS]
            return original(request, [*ignored, *(arg for arg in TRANSPORT_ARGS if arg not in ignored)])

        setattr(cache_key, _ENDPOINT_MARK, True)
        cache.cache_key = cache_key


def lm_cache_dir(cache_dir: str | os.PathLike | None = None) -> Path:
    """``<project cache>/lm`` (see ``knapsack_dspy.paths.cache_dir`` for how the project cache is found)."""
    return paths.cache_dir(cache_dir) / LM_CACHE_SUBDIR


def configure_cache(cache_dir: str | os.PathLike | None = None, enabled: bool = True, *,
                    memory: bool = True, disk_size_limit_bytes: int = DEFAULT_DISK_LIMIT_BYTES) -> Path | None:
    """Point DSPy's LM cache at ``<cache_dir>/lm`` (``cache_dir`` is the project cache: argument >
    ``$KDSPY_CACHE_DIR`` > ``~/.cache/knapsack-dspy``), or disable it entirely with ``enabled=False``.

    ``memory=False`` keeps only the disk level (useful to prove a second process would hit the disk cache).
    Returns the disk cache folder, or None when caching is disabled. Affects every ``dspy.LM`` in the
    process (the cache is global in DSPy); ``make_lm(cache=False)`` disables it for one LM only.
    """
    install_call_counter()  # so real calls are counted even for LMs not built by make_lm
    if not enabled:
        dspy.configure_cache(enable_disk_cache=False, enable_memory_cache=False, disk_cache_dir=None)
        install_cache_hit_counter(dspy.cache)
        return None
    folder = lm_cache_dir(cache_dir)
    folder.mkdir(parents=True, exist_ok=True)
    dspy.configure_cache(enable_disk_cache=True, enable_memory_cache=memory, disk_cache_dir=str(folder),
                         disk_size_limit_bytes=disk_size_limit_bytes)
    key_cache_on_endpoint(dspy.cache)
    install_cache_hit_counter(dspy.cache)
    return folder
