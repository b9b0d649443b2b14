"""Environment defaults for the runtimes our code loads, applied right before it loads them, never at import.

``import knapsack_dspy`` changes nothing in ``os.environ`` (``tests/optimizer/test_process_environment.py``). Each value
below is a *default*: a user's own setting wins. Each is read by its runtime when that runtime loads (or first
decides), so it is applied by the function that loads it, just before:

- ``GOMP_SPINCOUNT=1000`` with ``OMP_WAIT_POLICY=ACTIVE`` (:func:`apply_openmp_wait_defaults`), before the first
  load of a runtime that brings OpenMP's ``libgomp.so.1`` in through our code: the embedded model's runtime
  xllamacpp (``llm/local_server.py``) and torch when our embedder loads sentence-transformers
  (``embeddings.py``). Both share the one ``libgomp``, which reads the variables once, when it loads. The
  ``faiss-cpu`` wheel (the ``ann`` extra, ``selection/ann_index.py``) brings a ``libgomp`` of its own: the same
  defaults are applied before it loads. OpenMP
  threads then spin ~1,000 iterations (~10 us) at a barrier, then sleep. With OpenMP's default waits (a ~3 ms
  spin) the model's threads kept spinning whenever other work took the cores, and on a 2-core machine decoding
  collapsed from ~6-10 to ~1-3 tokens/s; waits that sleep at once (``PASSIVE``) fixed that but cost a third of
  the decode rate on a quiet machine. The short spin keeps the quiet rate and none of the collapse (docs/llm.md,
  "Threads"). ``ACTIVE`` is there only for libgomp's *other* spin count, the one it uses once a process has
  more OpenMP threads than cores (as soon as torch has embedded something beside the model): that one is 0 with
  ``PASSIVE`` and is capped at ``GOMP_SPINCOUNT`` with ``ACTIVE``, so the explicit count applies in both cases.
  Both are set together, and only when the user has set neither to a non-empty value (``OMP_WAIT_POLICY=ACTIVE``
  or ``PASSIVE`` alone keeps its OpenMP meaning). A ``libgomp`` something else loaded first (the user's own
  ``import torch``) has already read its waits: set the variables yourself for that case.
- ``TOKENIZERS_PARALLELISM=false`` (:func:`apply_tokenizers_default`), when our embedder loads: Hugging Face
  tokenizers stay single-threaded (no warning, and no deadlock, when a process that used them forks).
  ``tokenizers`` reads only this variable (no API), so it is set in the process, from that moment on.
- ``LITELLM_LOCAL_MODEL_COST_MAP=True`` (:func:`apply_litellm_cost_map_default`), right before LiteLLM's module
  code runs (``llm/provider_hook.py``, the finder ``import knapsack_dspy`` installs): LiteLLM reads its bundled
  price and context-window map instead of fetching it at import (offline that stalls ~7 s over three retries
  and logs warnings), and DSPy's model metadata, read later in the process, follows the same variable. Our
  token counts, context windows (a budget of ``None`` is the model's window) and "is this model known" checks
  come from that map, so they do not change with the network. Set it to ``False`` yourself to fetch the
  current map. A process that never imports LiteLLM is left alone; one that imported it before
  ``knapsack_dspy`` has already chosen.

Hugging Face's offline flags are not set at all: our embedder loads its model from the pip-packaged folder
with ``local_files_only=True`` (no hub access, whatever the environment says), and ``datasets`` is used only
when a hub source is asked for (``load_examples(..., source="hub:<id>")``), which means downloading.
"""

import os

__all__ = ["LITELLM_COST_MAP_DEFAULT", "OPENMP_WAIT_DEFAULTS", "TOKENIZERS_DEFAULT", "apply_litellm_cost_map_default",
           "apply_openmp_wait_defaults", "apply_tokenizers_default"]

#: OpenMP waits: set together, and only when the user has set neither (libgomp reads them when it loads)
OPENMP_WAIT_DEFAULTS = {"OMP_WAIT_POLICY": "ACTIVE", "GOMP_SPINCOUNT": "1000"}
TOKENIZERS_DEFAULT = {"TOKENIZERS_PARALLELISM": "false"}
LITELLM_COST_MAP_DEFAULT = {"LITELLM_LOCAL_MODEL_COST_MAP": "True"}


def apply_openmp_wait_defaults() -> bool:
    """Set ``OMP_WAIT_POLICY=ACTIVE`` and ``GOMP_SPINCOUNT=1000`` unless the user set either; call it right before
    loading a runtime that loads ``libgomp`` (xllamacpp, torch). Returns whether they were set now."""
    if any(os.environ.get(key, "").strip() for key in OPENMP_WAIT_DEFAULTS):
        return False
    os.environ.update(OPENMP_WAIT_DEFAULTS)
    return True


def apply_tokenizers_default() -> None:
    """``TOKENIZERS_PARALLELISM=false`` unless the user set it; call it where the embedder loads."""
    for key, value in TOKENIZERS_DEFAULT.items():
        os.environ.setdefault(key, value)


def apply_litellm_cost_map_default() -> None:
    """``LITELLM_LOCAL_MODEL_COST_MAP=True`` unless the user set it; call it right before LiteLLM loads."""
    for key, value in LITELLM_COST_MAP_DEFAULT.items():
        os.environ.setdefault(key, value)
