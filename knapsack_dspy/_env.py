"""Process environment defaults that must be in place before a third-party runtime first loads.

Imported first by ``knapsack_dspy/__init__.py``. Every value is a *default*: a user's own setting wins. Each one
is read by its library once, when that library (or its native runtime) is first loaded, so setting it later has
no effect; that is the only reason this happens at import time.

- ``LITELLM_LOCAL_MODEL_COST_MAP=True``: LiteLLM reads its bundled price list instead of fetching it
  over the network at import time (which otherwise stalls ~10 s and logs warnings when offline).
- ``GOMP_SPINCOUNT=1000`` with ``OMP_WAIT_POLICY=ACTIVE``: OpenMP threads spin ~1,000 iterations (~10 us) at a
  barrier, then sleep. The embedded model's runtime (xllamacpp) is an OpenMP build sharing one ``libgomp.so.1``
  with torch. With OpenMP's default waits (a ~3 ms spin) its threads kept spinning whenever other work took the
  cores, and on a 2-core machine decoding collapsed from ~6-10 to ~1-3 tokens/s; waits that sleep at once
  (``PASSIVE``) fixed that but cost a third of the decode rate on a quiet machine. The short spin keeps the
  quiet rate and none of the collapse (docs/llm.md, "Threads"). ``ACTIVE`` is there only for libgomp's *other*
  spin count, the one it uses once a process has more OpenMP threads than cores (as soon as torch has embedded
  something beside the model): that one is 0 with ``PASSIVE`` and is capped at ``GOMP_SPINCOUNT`` with
  ``ACTIVE``, so the explicit count applies in both cases. Both are set together, and only when the user has
  set neither to a non-empty value (``OMP_WAIT_POLICY=ACTIVE`` or ``PASSIVE`` alone keeps its OpenMP meaning).
- ``HF_HUB_OFFLINE=1`` / ``HF_DATASETS_OFFLINE=1``: models and data sets load from local files. Set
  them to ``0`` to let sentence-transformers or ``datasets`` reach the Hugging Face hub.
- ``TOKENIZERS_PARALLELISM=false``: Hugging Face tokenizers stay single-threaded (no warning, and no
  deadlock, when a process that used them forks).

Besides these defaults, ``import knapsack_dspy`` only arranges for the ``local/`` LiteLLM provider to be
registered when LiteLLM is imported (``llm/provider_hook.py``; DEVELOPERS.md): nothing is patched or filtered;
LiteLLM / DSPy hooks (call counting, the response-cache key) are installed when an LM or the cache is configured.
"""

import os

OFFLINE_DEFAULTS = {
    "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    "HF_HUB_OFFLINE": "1",
    "HF_DATASETS_OFFLINE": "1",
    "TOKENIZERS_PARALLELISM": "false",
}
#: OpenMP waits: set together, and only when the user has set neither (libgomp reads them when it loads)
OPENMP_WAIT_DEFAULTS = {"OMP_WAIT_POLICY": "ACTIVE", "GOMP_SPINCOUNT": "1000"}


def apply_offline_defaults() -> None:
    for key, value in OFFLINE_DEFAULTS.items():
        os.environ.setdefault(key, value)
    if not any(os.environ.get(key, "").strip() for key in OPENMP_WAIT_DEFAULTS):
        os.environ.update(OPENMP_WAIT_DEFAULTS)


apply_offline_defaults()
