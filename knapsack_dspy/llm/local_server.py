"""One in-process llama.cpp server (xllamacpp) per local model, loaded lazily and shared by the process.

``LocalServer`` owns an ``xllamacpp.Server``: completions go through ``handle_chat_completions``, at most
``slots`` at once (``KDSPY_LOCAL_SLOTS``, default 1: calls from several threads, e.g.
``dspy.Evaluate(num_threads=4)``, are serialised; ``kdspy bench --workers N`` with an embedded model asks for
``N`` slots, which llama.cpp decodes as one batch, each slot with the whole context), while tokenisation uses
the same server's HTTP endpoints on 127.0.0.1 (``/tokenize``, ``/apply-template``), which llama.cpp serves
from its own HTTP threads.

Threads: prompt processing uses every usable core (``KDSPY_LOCAL_BATCH_THREADS`` to change it); generation
uses the cores other processes leave free when the model loads (``cpu_load``: one busy-loop beside a 2-core run
means one decode thread, which decodes faster there than two waiting for each other at every barrier), unless
``KDSPY_LOCAL_THREADS`` gives a number. The choice is made once, when the model loads (docs/llm.md, "Threads").
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from knapsack_dspy import paths
from knapsack_dspy._env import apply_openmp_wait_defaults
from knapsack_dspy.llm.cpu_load import decode_threads_for, other_busy_cores, usable_cores
from knapsack_dspy.llm.errors import LocalModelError
from knapsack_dspy.llm.local_models import LocalModelSpec, local_model_spec, local_n_ctx
from knapsack_dspy.llm.local_weights import ensure_local_weights

logger = logging.getLogger(__name__)

THREADS_ENV = "KDSPY_LOCAL_THREADS"  # generation (decode) threads
#: "1": replies that are a function of the prompt: generation threads fixed (every usable core unless
#: KDSPY_LOCAL_THREADS says otherwise) and no prompt-cache reuse (each prompt processed whole), at the cost of the
#: prefix reuse (experiments/replay_determinism/)
REPRODUCIBLE_ENV = "KDSPY_LOCAL_REPRODUCIBLE"
BATCH_THREADS_ENV = "KDSPY_LOCAL_BATCH_THREADS"  # prompt-processing (prefill) threads
SLOTS_ENV = "KDSPY_LOCAL_SLOTS"  # completions decoded at once (llama.cpp parallel slots)
# The HTTP endpoints are on loopback: never route them through a proxy from the environment.
_LOOPBACK_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def _usable_cores() -> int:
    """The process's CPUs (affinity mask, capped by a cgroup CPU quota): ``cpu_load.usable_cores``."""
    return usable_cores()


def _count_from_env(name: str, default: int, what: str, unit: str) -> int:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise LocalModelError(f"{name}={raw!r} is not an integer ({what})") from None
    if value < 1:
        raise LocalModelError(f"{name}={value}: use at least 1 {unit}")
    return value


def _threads_from_env(name: str) -> int:
    return _count_from_env(name, _usable_cores(), "CPU threads", "thread")


_requested_slots = 1


def request_slots(count: int) -> None:
    """Serve local models loaded from now on with ``count`` parallel slots (``$KDSPY_LOCAL_SLOTS`` wins): what
    ``kdspy bench --workers N`` asks for. A model already loaded keeps its slots (a warning says so)."""
    global _requested_slots
    _requested_slots = max(1, int(count))
    for server in loaded_servers():
        if server.slots < count:
            logger.warning("%s is already loaded with %d slot(s): %d workers share them", server.spec.model,
                           server.slots, count)


def default_slots() -> int:
    """Parallel slots: ``$KDSPY_LOCAL_SLOTS``, else what ``request_slots`` asked for (1 unless asked)."""
    return _count_from_env(SLOTS_ENV, _requested_slots, "parallel slots", "slot")


def reproducible() -> bool:
    """``$KDSPY_LOCAL_REPRODUCIBLE`` is set (to anything but "", "0", "false", "no"): greedy replies must not
    depend on the machine's load or on what the prompt cache held (see :data:`REPRODUCIBLE_ENV`)."""
    return os.environ.get(REPRODUCIBLE_ENV, "").strip().lower() not in ("", "0", "false", "no")


def _default_threads() -> int:
    """Generation threads: ``$KDSPY_LOCAL_THREADS``, else every usable core when :func:`reproducible`, else the
    usable cores other processes leave free now (the thread count changes a reply's numbers: a load-dependent
    choice is fast, not reproducible)."""
    if os.environ.get(THREADS_ENV, "").strip():
        return _threads_from_env(THREADS_ENV)
    cores = _usable_cores()
    if cores == 1 or reproducible():
        return cores
    other = other_busy_cores(cores=cores)
    threads = decode_threads_for(cores, other)
    if threads < cores:
        logger.warning("other processes keep %.1f of %d cores busy: the local model decodes with %d thread(s) "
                       "(chosen once, when it loads; %s=N to choose)", other, cores, threads, THREADS_ENV)
    return threads


def _default_batch_threads() -> int:
    """Prompt-processing threads: ``$KDSPY_LOCAL_BATCH_THREADS`` or every usable core."""
    return _threads_from_env(BATCH_THREADS_ENV)


def default_threads(threads: int | None = None, batch_threads: int | None = None) -> tuple[int, int]:
    """The (generation, prompt-processing) threads a model loaded now gets unless given: what ``get_local_server``
    chooses, and a served model (``http_model_server``) too (docs/llm.md, "Threads")."""
    return threads or _default_threads(), batch_threads or _default_batch_threads()


def _text_content(content: Any, index: int) -> str:
    if content is None or isinstance(content, str):
        return content or ""
    if isinstance(content, list):
        texts = []
        for part in content:
            if isinstance(part, dict) and part.get("type") == "text":
                texts.append(str(part.get("text", "")))
            else:
                kind = part.get("type") if isinstance(part, dict) else type(part).__name__
                raise ValueError(f"message {index}: the local models read text only, got a {kind!r} content part")
        return "".join(texts)
    return str(content)


def text_messages(messages: list[dict]) -> list[dict]:
    """Chat messages reduced to ``{"role", "content": str}`` (OpenAI content-part lists are joined)."""
    if not isinstance(messages, (list, tuple)):
        raise TypeError(f"messages must be a list of {{'role', 'content'}} dicts, got {type(messages).__name__}")
    out = []
    for index, message in enumerate(messages):
        if not isinstance(message, dict):
            raise TypeError(f"message {index} must be a dict with 'role' and 'content', got {type(message).__name__}")
        out.append({"role": message.get("role", "user"), "content": _text_content(message.get("content"), index)})
    return out


class LocalServer:
    """A loaded local model. Create through ``get_local_server``; every method is thread-safe."""

    def __init__(self, spec: LocalModelSpec, model_path: Path, *, n_ctx: int, n_threads: int,
                 n_batch_threads: int | None = None, slots: int = 1, port: int = 0, cache_prompt: bool = True):
        self.spec = spec
        self.model_path = Path(model_path)
        self.n_ctx = n_ctx  # per slot
        self.n_threads = n_threads
        self.n_batch_threads = n_batch_threads or n_threads
        self.slots = slots
        self.port = port  # its HTTP endpoints' port on 127.0.0.1 (0: a free one; ``http_model_server`` chooses)
        self.cache_prompt = cache_prompt  # llama.cpp's default for requests that do not say (prefix reuse)
        self.load_seconds: float | None = None
        self._server: Any = None  # xllamacpp's server, once started
        self._address = ""  # its address, once started
        self._call_gate = threading.BoundedSemaphore(slots)

    # -- lifecycle -------------------------------------------------------------------------------------
    def start(self) -> LocalServer:
        if self._server is not None:
            return self
        apply_openmp_wait_defaults()  # libgomp reads its waits when it loads, with the runtime just below
        try:
            import xllamacpp  # the native runtime (and libgomp) loads only when a local model is served
        except ImportError as exc:
            raise LocalModelError(
                f"the local model runtime is not installed (xllamacpp); {self.spec.pip_install_all()}") from exc
        params = xllamacpp.CommonParams()
        params.model.path = str(self.model_path)
        params.n_ctx = self.n_ctx * self.slots  # llama.cpp shares n_ctx out between the slots
        params.n_parallel = self.slots  # at most this many calls at once (_call_gate)
        params.kv_unified = False
        params.cpuparams.n_threads = self.n_threads
        params.cpuparams_batch.n_threads = self.n_batch_threads
        params.verbosity = -1  # llama.cpp logs to stderr otherwise
        params.warmup = False
        # A trailing assistant message is a finished turn (OpenAI semantics), not text to continue: otherwise
        # the template drops its <|im_end|> and the generation prompt, and token counts stop being additive.
        params.prefill_assistant = False
        params.port = self.port
        params.model_alias = {self.spec.name}  # the model name the OpenAI endpoints answer with (a set of names)
        params.cache_prompt = self.cache_prompt
        started = time.perf_counter()
        try:
            server = xllamacpp.Server(params)
        except Exception as exc:
            raise LocalModelError(f"could not load {self.spec.model} from {str(self.model_path)!r}: {exc}") from exc
        self.load_seconds = time.perf_counter() - started
        self._address = server.listening_address
        self._server = server
        logger.info("loaded %s in %.1f s (n_ctx=%d, %d slots, %d generation / %d prompt threads)", self.spec.model,
                    self.load_seconds, self.n_ctx, self.slots, self.n_threads, self.n_batch_threads)
        return self

    @property
    def address(self) -> str:
        self.start()
        return self._address

    def stop(self) -> None:
        """Unload the model: its HTTP endpoints stop listening (a later call loads it again)."""
        self._server = None
        self._address = ""

    # -- completions -----------------------------------------------------------------------------------
    def chat(self, request: dict[str, Any]) -> dict[str, Any]:
        """One OpenAI-style chat completion (non-streaming). Returns the server's dict (may hold ``error``)."""
        self.start()
        with self._call_gate:
            return self._server.handle_chat_completions(dict(request))

    # -- tokenisation over HTTP ------------------------------------------------------------------------
    def _post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        url = self.address.rstrip("/") + path
        request = urllib.request.Request(url, data=json.dumps(body).encode("utf-8"),
                                         headers={"Content-Type": "application/json"}, method="POST")
        try:
            with _LOOPBACK_OPENER.open(request, timeout=60) as response:
                return json.loads(response.read())
        except urllib.error.HTTPError as exc:
            detail = exc.read().decode("utf-8", "replace")[:300]
            raise LocalModelError(f"local server {url} answered HTTP {exc.code}: {detail}") from exc
        except (urllib.error.URLError, OSError, ValueError) as exc:
            raise LocalModelError(f"local server {url} failed: {exc}") from exc

    def tokenize(self, text: str) -> list[int]:
        """Token ids of ``text`` (special tokens such as ``<|im_start|>`` are parsed as the server does)."""
        return list(self._post("/tokenize", {"content": text})["tokens"])

    def token_counts(self, texts: list[str]) -> list[int]:
        """How many tokens :meth:`tokenize` gives each of ``texts``, in one request: llama.cpp's ``/tokenize``
        tokenizes each string of a list on its own and passes numbers through, so a ``-1`` between the strings
        (never a token id) marks where one ends."""
        if not texts:
            return []
        content: list[Any] = []
        for k, text in enumerate(texts):
            content += [_TEXT_END, text] if k else [text]
        tokens = self._post("/tokenize", {"content": content})["tokens"]
        ends = [-1] + [k for k, token in enumerate(tokens) if token == _TEXT_END] + [len(tokens)]
        if len(ends) != len(texts) + 1:
            raise LocalModelError(f"local server tokenized {len(texts)} texts into {len(ends) - 1} parts")
        return [ends[k + 1] - ends[k] - 1 for k in range(len(texts))]

    def apply_template(self, messages: list[dict[str, Any]]) -> str:
        """The exact prompt the chat template builds from ``messages`` (ready for generation)."""
        return str(self._post("/apply-template", {"messages": text_messages(messages)})["prompt"])


_TEXT_END = -1  # between two texts of one /tokenize request (tokenize_many)
_servers: dict[tuple[str, str], LocalServer] = {}
_servers_lock = threading.Lock()


def get_local_server(model: str, cache_dir: str | os.PathLike | None = None, *, start: bool = True) -> LocalServer:
    """The process-wide server of ``local/<name>`` or ``local/<path>.gguf`` (joining its weights and loading it on
    first use; one per file, however its path is written)."""
    spec = local_model_spec(model)
    key = (spec.path or spec.name, str(paths.cache_dir(cache_dir)))
    with _servers_lock:
        server = _servers.get(key)
        if server is None:
            path = ensure_local_weights(spec, cache_dir)
            server = LocalServer(spec, path, n_ctx=local_n_ctx(), n_threads=_default_threads(),
                                 n_batch_threads=_default_batch_threads(), slots=default_slots())
            _servers[key] = server
        if start:
            server.start()
    return server


def loaded_servers() -> list[LocalServer]:
    """Servers created so far in this process (for reporting)."""
    with _servers_lock:
        return list(_servers.values())
