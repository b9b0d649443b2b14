"""Process environment defaults that must be in place before a third-party runtime first loads.

Imported first by ``knapsack_dspy/__init__.py``. Every value is a *default* (``os.environ.setdefault``): a
user's own setting wins. Each one is read by its library once, when that library (or its native runtime)
is first loaded, so setting it later has no effect; that is the only reason this happens at import time.

- ``LITELLM_LOCAL_MODEL_COST_MAP=True``: LiteLLM reads its bundled price list instead of fetching it
  over the network at import time (which otherwise stalls ~10 s and logs warnings when offline).
- ``OMP_WAIT_POLICY=PASSIVE`` with ``GOMP_SPINCOUNT=1000``: the embedded model's runtime (xllamacpp) is an
  OpenMP build, and it shares one ``libgomp.so.1`` with torch (whichever loads first initialises it). With
  OpenMP's default waits its threads spin at every barrier (up to ~3 ms), and on a 2-core machine with any other
  work running decoding collapsed from ~6-10 to ~1-3 tokens/s; fully passive waits (sleep at once) fixed that
  but cost a third of the decode rate on a quiet machine. A short spin (1,000 iterations, a few microseconds)
  before sleeping keeps most of the quiet rate and none of the collapse (measured: docs/llm.md, "Threads").
  Both are set only when the user has set neither (``OMP_WAIT_POLICY=ACTIVE`` alone still means active).
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
OPENMP_WAIT_DEFAULTS = {"OMP_WAIT_POLICY": "PASSIVE", "GOMP_SPINCOUNT": "1000"}


def apply_offline_defaults() -> None:
    for key, value in OFFLINE_DEFAULTS.items():
        os.environ.setdefault(key, value)
    if not any(key in os.environ for key in OPENMP_WAIT_DEFAULTS):
        os.environ.update(OPENMP_WAIT_DEFAULTS)


apply_offline_defaults()
