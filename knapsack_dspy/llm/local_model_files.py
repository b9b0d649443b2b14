"""A GGUF file of one's own as an embedded model: where ``local/<path>.gguf`` points, what is checked and read in
the file, and its sha256.

``local_models.local_model_spec`` turns a model string into a spec; a name ending in ``.gguf`` is a file, found so
(:func:`resolve_model_file`):

- ``local//models/q.gguf``: an absolute path (the text after ``local/`` starts with ``/``);
- ``local/~/models/q.gguf``: from the home folder;
- ``local/./q.gguf``, ``local/../models/q.gguf``: relative to the current directory;
- any other relative path (``local/q.gguf``, ``local/qwen/q.gguf``): relative to ``$KDSPY_LOCAL_MODEL_DIR`` when
  that is set, else to the current directory. A model string that names the file under that folder is the same
  on every machine, so results rows that record it (and suites that name it) can be committed.

:func:`inspect_model_file` checks the file, each failure one line (``LocalModelError``): it exists, starts with
GGUF's magic bytes, and its metadata holds a tokenizer (``tokenizer.ggml.model`` and ``tokenizer.ggml.tokens``),
which token budgets are counted with (``local_token_counter``: the in-process server's ``/tokenize`` and the
GGUF's BPE in process, as for the catalogue's models). What the file says (size, trained context, the tokenizer's
fingerprint with its chat template) is read once per (path, size, mtime). :func:`model_file_sha256` is the
weights' digest that results rows record (``bench/results/provenance.py``): hashed once per (path, size, mtime) and
kept in ``<project cache>/models/file_sha256/`` for later processes.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
from dataclasses import dataclass
from pathlib import Path

from knapsack_dspy import paths
from knapsack_dspy.llm.errors import LocalModelError
from knapsack_dspy.llm.gguf_tokenizer import (
    TOKENIZER_KEYS_PREFIX,
    GGUFError,
    metadata_fingerprint,
    read_metadata,
)

__all__ = ["MODEL_DIR_ENV", "ModelFile", "inspect_model_file", "is_model_file", "model_file_sha256",
           "resolve_model_file", "sha256_of_file"]

logger = logging.getLogger(__name__)

MODEL_DIR_ENV = "KDSPY_LOCAL_MODEL_DIR"  # where a relative local/<path>.gguf is looked up
GGUF_SUFFIX = ".gguf"
_MAGIC = b"GGUF"
_CHUNK = 8 << 20
#: what a tokenizer needs to be read: its kind and its vocabulary
_TOKENIZER_KEYS = ("tokenizer.ggml.model", "tokenizer.ggml.tokens")


@dataclass(frozen=True)
class ModelFile:
    """What a checked GGUF file says. ``context_length``: the trained context (``<architecture>.context_length``;
    None when the file does not say); ``tokenizer``: sha256 of its ``tokenizer.*`` metadata, chat template
    included (``gguf_tokenizer.metadata_fingerprint``): equal values, equal token counts."""

    path: Path
    size: int
    mtime_ns: int
    context_length: int | None
    tokenizer: str


def is_model_file(name: str) -> bool:
    """True when the text after ``local/`` names a GGUF file (it ends in ``.gguf``, any case)."""
    return isinstance(name, str) and name.lower().endswith(GGUF_SUFFIX) and len(name) > len(GGUF_SUFFIX)


def resolve_model_file(name: str) -> Path:
    """The file ``local/<name>`` names (see the module docstring); not checked."""
    path = Path(name).expanduser()
    if path.is_absolute() or name.startswith(("./", "../")):
        return path.resolve()
    folder = os.environ.get(MODEL_DIR_ENV, "").strip()
    return (Path(folder).expanduser() / path).resolve() if folder else path.resolve()


_files: dict[tuple[str, int, int], ModelFile] = {}
_files_lock = threading.Lock()


def inspect_model_file(path: str | os.PathLike, model: str) -> ModelFile:
    """The checked GGUF file at ``path`` (``model``: the model string the messages name); ``LocalModelError`` in one
    line when it is missing, not a GGUF file or has no readable tokenizer."""
    path = Path(path)
    try:
        stat = path.stat()
    except FileNotFoundError:
        raise LocalModelError(f"{model}: no GGUF file at {str(path)!r}{_where_relative_paths_go(model)}") from None
    except OSError as exc:
        raise LocalModelError(f"{model}: cannot read {str(path)!r} ({exc.strerror or exc})") from None
    if not path.is_file():
        raise LocalModelError(f"{model}: {str(path)!r} is not a file")
    key = (str(path), stat.st_size, stat.st_mtime_ns)
    with _files_lock:
        known = _files.get(key)
    if known is not None:
        return known
    checked = _read_model_file(path, model, stat)
    with _files_lock:
        _files[key] = checked
    return checked


def _where_relative_paths_go(model: str) -> str:
    name = model.split("/", 1)[-1]
    if not is_model_file(name) or Path(name).expanduser().is_absolute() or name.startswith(("./", "../")):
        return ""
    folder = os.environ.get(MODEL_DIR_ENV, "").strip()
    return (f" (a relative path is read from ${MODEL_DIR_ENV}, {folder!r})" if folder else
            f" (a relative path is read from the current directory, or from ${MODEL_DIR_ENV} when set)")


def _read_model_file(path: Path, model: str, stat: os.stat_result) -> ModelFile:
    try:
        with open(path, "rb") as handle:
            head = handle.read(len(_MAGIC))
    except OSError as exc:
        raise LocalModelError(f"{model}: cannot read {str(path)!r} ({exc.strerror or exc})") from None
    if head != _MAGIC:
        raise LocalModelError(f"{model}: {str(path)!r} is not a GGUF file (it starts with {head!r}, not {_MAGIC!r})")
    try:
        metadata = read_metadata(path, lambda key: key.startswith(TOKENIZER_KEYS_PREFIX)
                                 or key == "general.architecture" or key.endswith(".context_length"))
    except GGUFError as exc:
        raise LocalModelError(f"{model}: cannot read the tokenizer of {str(path)!r} ({_reason(exc, path)})") from None
    except OSError as exc:
        raise LocalModelError(f"{model}: cannot read {str(path)!r} ({exc.strerror or exc})") from None
    missing = [key for key in _TOKENIZER_KEYS if not metadata.get(key)]
    if missing:
        raise LocalModelError(f"{model}: cannot read the tokenizer of {str(path)!r} (its metadata has no "
                              f"{' or '.join(missing)})")
    context = metadata.get(f"{metadata.get('general.architecture')}.context_length")
    return ModelFile(path=path, size=stat.st_size, mtime_ns=stat.st_mtime_ns,
                     context_length=int(context) if isinstance(context, int) and context > 0 else None,
                     tokenizer=metadata_fingerprint(metadata, with_chat_template=True))


def _reason(exc: GGUFError, path: Path) -> str:
    """The reader's message without the file's name, which ours gives already."""
    text = str(exc)
    prefix = f"{str(path)!r}: "
    return text[len(prefix):] if text.startswith(prefix) else text


def sha256_of_file(path: str | os.PathLike) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(_CHUNK):
            digest.update(block)
    return digest.hexdigest()


_digests: dict[tuple[str, int, int], str] = {}
_digest_lock = threading.Lock()  # one hashing at a time: a second caller of the same file waits for the first


def model_file_sha256(path: str | os.PathLike, cache_dir: str | os.PathLike | None = None) -> str:
    """The sha256 of the file at ``path``: hashed once per (path, size, mtime), remembered in this process and in
    ``<project cache>/models/file_sha256/`` (an unwritable cache only costs the hashing again)."""
    path = Path(path).resolve()
    stat = path.stat()
    key = (str(path), stat.st_size, stat.st_mtime_ns)
    with _digest_lock:
        digest = _digests.get(key)
        if digest is None:
            digest = _recorded_digest(path, key, cache_dir) or _hash_and_record(path, key, cache_dir)
            _digests[key] = digest
    return digest


def _record_path(path: Path, cache_dir) -> Path:
    name = hashlib.sha256(str(path).encode("utf-8", "surrogateescape")).hexdigest()[:32]
    return paths.cache_dir(cache_dir) / "models" / "file_sha256" / f"{name}.json"


def _recorded_digest(path: Path, key: tuple[str, int, int], cache_dir) -> str | None:
    try:
        record = json.loads(_record_path(path, cache_dir).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict) or [record.get("path"), record.get("size"), record.get("mtime_ns")] != list(key):
        return None
    digest = record.get("sha256")
    return digest if isinstance(digest, str) and len(digest) == 64 else None


def _hash_and_record(path: Path, key: tuple[str, int, int], cache_dir) -> str:
    digest = sha256_of_file(path)
    record = {"path": key[0], "size": key[1], "mtime_ns": key[2], "sha256": digest}
    try:
        target = _record_path(path, cache_dir)
        target.parent.mkdir(parents=True, exist_ok=True)
        scratch = target.with_name(f".{target.name}.{os.getpid()}.{threading.get_ident()}")
        scratch.write_text(json.dumps(record))
        os.replace(scratch, target)
    except OSError as exc:
        logger.warning("could not record the sha256 of %s in the project cache (%s); it is hashed again next time",
                       path, exc)
    return digest
