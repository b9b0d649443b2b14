"""Register the ``local`` LiteLLM provider as soon as LiteLLM is imported, without importing it.

``import knapsack_dspy`` calls :func:`register_local_provider_when_litellm_loads`, so that a plain
``dspy.LM("local/qwen2.5-coder-0.5b-instruct")`` works with no project factory in between. Importing LiteLLM
takes ~2 s, which ``import knapsack_dspy`` does not pay: when LiteLLM is already imported the provider is
registered at once; otherwise a finder at the front of ``sys.meta_path`` waits for ``litellm`` to be imported,
registers the provider right after LiteLLM's own module code has run, and removes itself (DSPy resolving
LiteLLM's spec for its lazy import, without importing it, leaves the finder in place). Registering loads no
model (the model loads on its first call). Right before LiteLLM's module code runs, the finder also sets
``LITELLM_LOCAL_MODEL_COST_MAP=True`` unless the user set it (LiteLLM reads it there: ``knapsack_dspy._env``).
"""

from __future__ import annotations

import sys
import threading

from knapsack_dspy._env import apply_litellm_cost_map_default

__all__ = ["register_local_provider_when_litellm_loads"]

# Standard-library imports that cost milliseconds (logging, importlib.util / abc) happen in the functions that
# need them, when LiteLLM is being imported anyway: ``import knapsack_dspy`` stays at ~1-2 ms.
_LITELLM = "litellm"
_lock = threading.Lock()


_PROVIDER_MODULE = "knapsack_dspy.llm.local_provider"
#: set on the provider module when LiteLLM was first imported by that module itself, mid-import: the module
#: registers the provider when it has finished (its last line)
REGISTER_WHEN_LOADED = "_register_when_loaded"


def _register() -> None:
    partial = sys.modules.get(_PROVIDER_MODULE)
    if partial is not None and not hasattr(partial, "register_local_provider"):
        # the provider module is importing LiteLLM (its first import): it cannot be imported again now
        setattr(partial, REGISTER_WHEN_LOADED, True)
        return
    # Imported here, not at the top: the provider module imports LiteLLM, which this module must not do. (The
    # provider module does not import this one: it reads the REGISTER_WHEN_LOADED mark by its name.)
    from knapsack_dspy.llm.local_provider import register_local_provider

    register_local_provider()


def _register_quietly() -> None:
    try:
        _register()
    except Exception as exc:  # noqa: BLE001 - importing LiteLLM must not fail because of this package
        import logging

        logging.getLogger(__name__).warning("could not register the 'local' LiteLLM provider: %s", exc)


class _AfterLiteLLMImport:
    """A ``sys.meta_path`` finder that finds nothing itself: it hands LiteLLM's own spec back with a loader that
    registers the provider (and removes this finder) after LiteLLM's module code has run. It stays in place
    until then: DSPy looks LiteLLM's spec up at its own import (``importlib.util.find_spec``, for a lazy
    proxy) long before it imports it."""

    def __init__(self):
        self._busy = threading.local()

    def find_spec(self, fullname, path=None, target=None):
        if fullname != _LITELLM or getattr(self._busy, "active", False):
            return None
        import importlib.util

        self._busy.active = True
        try:
            spec = importlib.util.find_spec(fullname)  # the other finders' answer
        finally:
            self._busy.active = False
        loader = getattr(spec, "loader", None)
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        run_module = loader.exec_module
        finder = self

        def exec_module(module):
            apply_litellm_cost_map_default()  # read by LiteLLM's module code, just below (``_env``)
            run_module(module)
            with _lock:
                if finder in sys.meta_path:
                    sys.meta_path.remove(finder)
            _register_quietly()

        loader.exec_module = exec_module
        return spec


def register_local_provider_when_litellm_loads() -> None:
    """Register the ``local`` provider now if LiteLLM is imported, else right after it is (idempotent)."""
    if _LITELLM in sys.modules:
        _register_quietly()
        return
    with _lock:
        if not any(isinstance(finder, _AfterLiteLLMImport) for finder in sys.meta_path):
            sys.meta_path.insert(0, _AfterLiteLLMImport())
