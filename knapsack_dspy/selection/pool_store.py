"""The pool store: a large exemplar pool kept in files beside a compiled program, referenced by a content hash.

A compiled program with a small pool holds it inline (its JSON lists the demos, costs, ...; re-embedded through
the embedding cache on load). A pool of more than :data:`INLINE_POOL_LIMIT` exemplars is written once to a
*store*, a directory named by its content hash, and the program's JSON names only the hash and the size: the
program file's size does not grow with the pool's.

A store directory ``<root>/<hash>/`` holds (all written once, never changed; a new pool is a new store):

- ``records.jsonl`` — one JSON object per exemplar, in pool order: ``id``, ``demo`` (the predictor's fields),
  ``doc_id``, ``embed_text``, ``program``, ``attributes``, ``group``, ``inputs_digest`` (its demo's inputs) and,
  when they differ, ``query_digest`` (its inputs as a query gives them); ``inputs_digests.sorted.npy`` /
  ``inputs_digests.order.npy``: every such digest sorted, and its record's row (a query that is an exemplar finds
  it by binary search: ``PoolStore.ids_with_inputs``); ``record_offsets.npy`` (``n + 1`` byte
  offsets) lets a record be read alone, so a program loads without parsing the demos (a demo is read when
  selected);
- ``ids.npy``, ``doc_ids.npy``, ``attribute.<name>.npy`` — the columns selection scans, as fixed-width
  unicode arrays (memory-mapped);
- ``embeddings.npy`` (``n x d`` float32 unit rows) and ``costs.npy`` (float64 tokens each exemplar adds),
  ``group_costs.npy`` — memory-mapped: the pages are read when touched and shared by every process on the
  machine (the page cache), so a load costs no parse and no copy;
- an approximate nearest-neighbour index (``ivf.json``, ``ivf.*.npy`` and, built with faiss, ``ivf.faiss``;
  :mod:`knapsack_dspy.selection.ann_index`) when the pool has at least
  :data:`~knapsack_dspy.selection.ann_index.ANN_MIN_POOL` exemplars;
- ``manifest.json`` — the format, the hash, the size and dimension, the embedder's identity, the prompt format,
  and each file's byte size and sha256.

Why files and not an embedded database: the columns selection needs are numeric arrays, read whole and
scanned; ``.npy`` files memory-map with numpy alone (no new dependency), load in microseconds, and stay
readable by anything. The records are read one at a time, by offset.

**The hash** is the sha256 of the store format, the embedder's identity (``TextEmbedder.model_id``), the prompt
format (the token model, the signature's fields, the adapter) and the sha256 of every file (the records, and the
costs, embeddings and index measured and built from them): the same pool measured and embedded the same way (and
indexed with the same backend: faiss's file differs from numpy's) has the same hash, wherever it is built; measured
another way, it is another store.

**Where stores are looked for** (:func:`find_store`): the directories of :func:`store_search_dirs` (a program
loaded from a file: the ``pools/`` folder beside it), then :func:`default_store_root` (``<project
cache>/pool_stores``), where a compile writes them. ``save_program`` links (or copies) a program's stores into
``pools/`` beside the program file, so a program directory copied elsewhere loads with an empty cache.

**Checks on open**: the manifest must name the referenced hash and recompute to it, every file must have the
size the manifest records, and, for stores up to :data:`FULL_CHECK_BYTES`, every file's sha256 must match (a
larger store checks the sha256 of each file's first and last MiB, so a load stays fast; :meth:`PoolStore.verify`
checks every byte). A missing or altered store is one :class:`PoolStoreError` (a ``ValueError``) naming the
hash, the directories searched and what to do.
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from knapsack_dspy import paths
from knapsack_dspy.errors import KnapsackDspyError
from knapsack_dspy.messages import one_line
from knapsack_dspy.selection import ann_index

#: Pools of at most this many exemplars stay inline in the program's JSON (every pool of the real suites:
#: TAT-QA 1,164, FinQA 6,251, SEER's 13,215), so their programs and selections are exactly as before.
INLINE_POOL_LIMIT = 20_000
STORE_FORMAT = 1
#: Stores up to this many bytes have every file's sha256 checked when opened (~0.2 s per 100 MB here).
FULL_CHECK_BYTES = 256 * 2**20
_EDGE_BYTES = 2**20  # a larger store: the sha256 of each file's first and last MiB
STORES_FOLDER = "pools"  # beside a saved program

_search_dirs: contextvars.ContextVar[tuple[Path, ...]] = contextvars.ContextVar("pool_store_dirs", default=())


class PoolStoreError(KnapsackDspyError, ValueError):
    """A pool store is missing, altered or not a store (the message says which and what to do)."""


def default_store_root() -> Path:
    """Where compiles write pool stores: ``<project cache>/pool_stores``."""
    return paths.cache_dir() / "pool_stores"


def store_search_dirs() -> tuple[Path, ...]:
    """The directories searched for a store before :func:`default_store_root`."""
    return _search_dirs.get()


@contextlib.contextmanager
def searching(*dirs: str | os.PathLike) -> Iterator[None]:
    """Look for pool stores in ``dirs`` first while the block runs (loading a program file: its ``pools/``)."""
    token = _search_dirs.set(tuple(Path(d) for d in dirs) + _search_dirs.get())
    try:
        yield
    finally:
        _search_dirs.reset(token)


def stores_beside(program_path: str | os.PathLike) -> Path:
    """The folder of the stores saved beside a program file."""
    return Path(program_path).parent / STORES_FOLDER


@dataclass(frozen=True)
class PoolRecord:
    """One exemplar as a store holds it."""

    id: str
    demo: dict
    doc_id: str = ""
    embed_text: str = ""
    program: str = ""
    attributes: Mapping[str, str] | None = None
    group: int = -1
    inputs_digest: str = ""  # a digest of the demo's inputs (a query with the same inputs never selects it)
    query_digest: str = ""  # ... and of its inputs as a query gives them, when they differ ("": they do not)

    def as_json(self) -> dict:
        return {"id": self.id, "demo": self.demo, "doc_id": self.doc_id, "embed_text": self.embed_text,
                "program": self.program, "attributes": dict(self.attributes or {}), "group": int(self.group),
                "inputs_digest": self.inputs_digest, **({"query_digest": self.query_digest} if self.query_digest
                                                        else {})}


def _record_line(record: PoolRecord) -> bytes:
    return (json.dumps(record.as_json(), sort_keys=True, ensure_ascii=False) + "\n").encode()


def _sha256_file(path: Path, edges_only: bool = False) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        if edges_only and path.stat().st_size > 2 * _EDGE_BYTES:
            digest.update(f.read(_EDGE_BYTES))
            f.seek(-_EDGE_BYTES, os.SEEK_END)
            digest.update(f.read(_EDGE_BYTES))
        else:
            for block in iter(lambda: f.read(2**22), b""):
                digest.update(block)
    return digest.hexdigest()


def store_hash(files_sha256: Mapping[str, str], embedder: str, prompt_format: str) -> str:
    """The content hash of a store: its format, the embedder's identity, the prompt format and the sha256 of every
    file it holds (the records, and what was measured and built from them: embeddings, token costs, the index)."""
    text = json.dumps({"format": STORE_FORMAT, "embedder": embedder, "prompt_format": prompt_format,
                       "files": dict(files_sha256)}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()


class _RecordColumn(Sequence):
    """One field of every record (``demo``, ``embed_text``, ``program``), read from the store when indexed."""

    def __init__(self, store: PoolStore, field: str):
        self._store, self._field = store, field

    def __len__(self) -> int:
        return len(self._store)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(len(self)))]
        return self._store.record(int(i))[self._field]

    def __iter__(self):
        for record in self._store.iter_records():
            yield record[self._field]


class PoolStore:
    """An opened store (read-only; arrays memory-mapped). Open with :func:`open_store` / :func:`find_store`."""

    def __init__(self, path: Path, manifest: dict):
        self.path = Path(path)
        self.manifest = manifest
        self.hash: str = manifest["hash"]
        self._offsets = np.load(self.path / "record_offsets.npy", mmap_mode="r")
        self._records: np.memmap | None = None  # records.jsonl, mapped when a record is first read

    def __len__(self) -> int:
        return int(self.manifest["size"])

    def __repr__(self) -> str:
        return f"PoolStore({str(self.path)!r}, size={len(self)})"

    # columns
    def _array(self, name: str) -> np.ndarray:
        return np.load(self.path / name, mmap_mode="r")

    @property
    def ids(self) -> np.ndarray:
        return self._array("ids.npy")

    @property
    def doc_ids(self) -> np.ndarray:
        return self._array("doc_ids.npy")

    @property
    def embeddings(self) -> np.ndarray:
        return self._array("embeddings.npy")

    @property
    def costs(self) -> np.ndarray:
        return self._array("costs.npy")

    @property
    def group_costs(self) -> np.ndarray:
        return self._array("group_costs.npy")

    @property
    def groups(self) -> np.ndarray:
        return self._array("groups.npy")

    @property
    def attributes(self) -> dict[str, np.ndarray]:
        return {name: self._array(f"attribute.{name}.npy") for name in self.manifest["attributes"]}

    @property
    def embedder(self) -> str:
        return self.manifest["embedder"]

    @property
    def prompt_format(self) -> str:
        return self.manifest["prompt_format"]

    def ids_with_inputs(self, digest: str) -> list[str]:
        """The ids of the exemplars whose ``inputs_digest`` or ``query_digest`` is ``digest`` (a binary search: no
        pass over the pool)."""
        if not self.manifest.get("inputs_digests"):
            return []
        keys = self._array("inputs_digests.sorted.npy")
        lo, hi = np.searchsorted(keys, digest, "left"), np.searchsorted(keys, digest, "right")
        if lo == hi:
            return []
        rows = self._array("inputs_digests.order.npy")[lo:hi]
        return list(dict.fromkeys(str(self.ids[int(r)]) for r in rows))

    def column(self, field: str) -> Sequence:
        """A record field of every exemplar, read lazily (``demo``, ``embed_text``, ``program``)."""
        return _RecordColumn(self, field)

    def record(self, i: int) -> dict:
        if not 0 <= i < len(self):
            raise IndexError(f"record {i} outside a pool of {len(self)}")
        if self._records is None:
            self._records = np.memmap(self.path / "records.jsonl", dtype=np.uint8, mode="r")
        start, end = int(self._offsets[i]), int(self._offsets[i + 1])
        return json.loads(self._records[start:end].tobytes())

    def iter_records(self) -> Iterator[dict]:
        with open(self.path / "records.jsonl", encoding="utf-8") as f:
            for line in f:
                yield json.loads(line)

    def index(self):
        """The approximate nearest-neighbour index saved with the store (its backend's, or numpy's over the same
        cells where faiss is missing: ``ann_index.load_index``), or ``None``."""
        return ann_index.load_index(self.path, self.embeddings) if self.manifest.get("index") else None

    def verify(self, full: bool = True) -> None:
        """Check the store against its manifest (every byte when ``full``); :class:`PoolStoreError` when not."""
        _check(self.path, self.manifest, self.hash, full)

    def __getstate__(self):  # pickled with a program (dspy.save(save_program=True)): reopened from its path
        return {"path": str(self.path), "manifest": self.manifest}

    def __setstate__(self, state):  # unpickled (dspy.load, Ray): opened again, with open_store's checks
        opened = open_store(Path(state["path"]), state["manifest"].get("hash"))
        PoolStore.__init__(self, opened.path, opened.manifest)


def _error(hash_: str, what: str) -> PoolStoreError:
    return PoolStoreError(one_line(f"pool store {hash_[:16]}: {what}"))


def _check(path: Path, manifest: dict, hash_: str, full: bool) -> None:
    if manifest.get("format") != STORE_FORMAT:
        raise _error(hash_, f"{path} has store format {manifest.get('format')!r}, this version reads "
                            f"{STORE_FORMAT}")
    files = manifest.get("files") or {}
    if "records.jsonl" not in files:
        raise _error(hash_, f"{path}/manifest.json lists no records.jsonl: not a pool store")
    expected = store_hash({name: entry.get("sha256", "") for name, entry in files.items()},
                          manifest.get("embedder", ""), manifest.get("prompt_format", ""))
    if manifest.get("hash") != hash_ or expected != hash_:
        raise _error(hash_, f"{path}/manifest.json was altered (its content hash is {expected[:16]}): copy the "
                            "store again from where the program was saved")
    sizes = {name: (path / name).stat().st_size if (path / name).is_file() else None for name in files}
    total = sum(s or 0 for s in sizes.values())
    edges_only = not full and total > FULL_CHECK_BYTES
    for name, expect in files.items():
        if sizes[name] is None:
            raise _error(hash_, f"{path}/{name} is missing: copy the whole store folder")
        if sizes[name] != expect["bytes"]:
            raise _error(hash_, f"{path}/{name} has {sizes[name]} bytes, the store wrote {expect['bytes']}: it "
                                "was altered or cut short; copy the store again")
        key = "edges_sha256" if edges_only else "sha256"
        if _sha256_file(path / name, edges_only) != expect[key]:
            raise _error(hash_, f"{path}/{name} was altered (its sha256 differs from the manifest's): copy the "
                                "store again from where the program was saved")


def open_store(path: str | os.PathLike, hash_: str | None = None) -> PoolStore:
    """The store in directory ``path``, checked (``hash_``: the hash the program references)."""
    path = Path(path)
    manifest_path = path / "manifest.json"
    try:
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise _error(hash_ or path.name, f"{path} has no manifest.json: not a pool store") from None
    except (OSError, ValueError) as exc:
        raise _error(hash_ or path.name, f"{manifest_path} cannot be read ({exc})") from None
    if not isinstance(manifest, dict):
        raise _error(hash_ or path.name, f"{manifest_path} is not a store manifest")
    hash_ = hash_ or str(manifest.get("hash"))
    _check(path, manifest, hash_, full=False)
    return PoolStore(path, manifest)


def find_store(hash_: str, extra_dirs: Sequence[str | os.PathLike] = ()) -> PoolStore:
    """The store ``hash_`` from the first directory that holds it (``extra_dirs``, :func:`store_search_dirs`,
    then :func:`default_store_root`)."""
    dirs = [Path(d) for d in extra_dirs] + list(store_search_dirs()) + [default_store_root()]
    for root in dirs:
        if (root / hash_).is_dir():
            return open_store(root / hash_, hash_)
    searched = ", ".join(dict.fromkeys(str(d) for d in dirs))
    raise _error(hash_, f"not found (searched {searched}): copy the '{STORES_FOLDER}' folder saved beside the "
                        "program file along with it, or compile the program again")


def demo_key(demo: Mapping) -> str:
    """What a token cost belongs to: the demo as measured (ids may be reused for another demo)."""
    return json.dumps(demo, sort_keys=True, ensure_ascii=False, default=str)


def write_store(root: str | os.PathLike, records: Sequence[PoolRecord], embeddings: np.ndarray,
                costs: Sequence[float] | np.ndarray, *, embedder: str, prompt_format: str,
                group_costs: Sequence[float] = (), index: bool | None = None,
                index_options: Mapping[str, Any] | None = None) -> PoolStore:
    """Write a store of ``records`` (with their ``embeddings`` and token ``costs``) under ``root`` and open it; a
    store of the same content already there is opened instead. ``index``: build the nearest-neighbour index
    (default: when the pool has at least ``ANN_MIN_POOL`` exemplars; its calibration's queries exclude their own
    documents, the records' ``doc_id``; ``index_options``: ``ann_index.build_index``'s keywords, e.g. ``nlist``,
    ``backend``: faiss when installed, else numpy)."""
    root = Path(root)
    n = len(records)
    embeddings = np.asarray(embeddings, dtype=np.float32)
    cost_column = np.asarray(costs, dtype=np.float64)
    if embeddings.ndim != 2 or embeddings.shape[0] != n or cost_column.shape != (n,):
        raise ValueError(f"a store of {n} records needs ({n}, d) embeddings and {n} costs, got "
                         f"{embeddings.shape} and {cost_column.shape}")
    root.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".partial-", dir=root))
    try:
        offsets = np.zeros(n + 1, dtype=np.int64)
        with open(tmp / "records.jsonl", "wb") as f:
            for k, record in enumerate(records):
                line = _record_line(record)
                f.write(line)
                offsets[k + 1] = offsets[k] + len(line)
        names = sorted({k for r in records for k in (r.attributes or {})})
        np.save(tmp / "record_offsets.npy", offsets)
        np.save(tmp / "ids.npy", np.asarray([r.id for r in records], dtype=str))
        np.save(tmp / "doc_ids.npy", np.asarray([r.doc_id for r in records], dtype=str))
        for name in names:
            np.save(tmp / f"attribute.{name}.npy",
                    np.asarray([str((r.attributes or {}).get(name, "")) for r in records], dtype=str))
        np.save(tmp / "groups.npy", np.asarray([r.group for r in records], dtype=np.int64))
        # every digest that names a record (its demo's inputs, and its query's when they differ) -> its row
        extra = [k for k, r in enumerate(records) if r.query_digest]
        digests = np.asarray([r.inputs_digest for r in records] + [records[k].query_digest for k in extra],
                             dtype=str)
        rows = np.concatenate([np.arange(n, dtype=np.int64), np.asarray(extra, dtype=np.int64)])
        has_digests = bool(n and (digests != "").any())
        if has_digests:
            order = np.argsort(digests, kind="stable")
            np.save(tmp / "inputs_digests.sorted.npy", digests[order])
            np.save(tmp / "inputs_digests.order.npy", rows[order])
        np.save(tmp / "group_costs.npy", np.asarray(group_costs, dtype=np.float64))
        np.save(tmp / "embeddings.npy", embeddings)
        np.save(tmp / "costs.npy", cost_column)
        built = (n >= ann_index.ANN_MIN_POOL) if index is None else bool(index)
        backend = None
        if built:
            doc_ids = [r.doc_id for r in records]  # the calibration's queries exclude their own documents
            options = {"doc_ids": np.asarray(doc_ids, dtype=str) if any(doc_ids) else None, **(index_options or {})}
            ivf = ann_index.build_index(embeddings, **options)
            ivf.save(tmp)
            backend = ivf.backend
        files: dict[str, dict[str, Any]] = {}
        for path in sorted(tmp.iterdir()):
            files[path.name] = {"bytes": path.stat().st_size, "sha256": _sha256_file(path),
                                "edges_sha256": _sha256_file(path, edges_only=True)}
        hash_ = store_hash({name: entry["sha256"] for name, entry in files.items()}, embedder, prompt_format)
        final = root / hash_
        if final.is_dir():  # the same content, written before
            shutil.rmtree(tmp, ignore_errors=True)
            return open_store(final, hash_)
        manifest = {"kind": "knapsack-dspy pool store", "format": STORE_FORMAT, "hash": hash_, "size": n,
                    "dim": int(embeddings.shape[1]) if n else 0, "embedder": embedder,
                    "prompt_format": prompt_format, "attributes": names, "index": built, "index_backend": backend,
                    "inputs_digests": has_digests,
                    "files": files}
        (tmp / "manifest.json").write_text(json.dumps(manifest, indent=1, sort_keys=True), encoding="utf-8")
        try:
            tmp.rename(final)
        except OSError:  # another process wrote the same store meanwhile
            if not final.is_dir():
                raise
            shutil.rmtree(tmp, ignore_errors=True)
        return open_store(final, hash_)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def copy_store(store: PoolStore, root: str | os.PathLike) -> Path:
    """``store`` under ``root`` (hard links where the file system allows, else copies); returns its directory."""
    target = Path(root) / store.hash
    if target.is_dir():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".partial-", dir=target.parent))
    try:
        for path in store.path.iterdir():
            try:
                os.link(path, tmp / path.name)
            except OSError:
                shutil.copy2(path, tmp / path.name)
        try:
            tmp.rename(target)
        except OSError:
            if not target.is_dir():
                raise
            shutil.rmtree(tmp, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return target


def extend_store(root: str | os.PathLike, base: PoolStore | None, records: Sequence[PoolRecord], *,
                 embed: Callable[[list[str]], np.ndarray], measure: Callable[[list[dict]], Sequence[float]],
                 embedder: str, prompt_format: str, group_costs: Sequence[float] = (),
                 index: bool | None = None) -> tuple[PoolStore, dict[str, int]]:
    """A store of ``records`` built from ``base`` (a store of the same embedder and prompt format): a record whose
    embedded text is in ``base`` keeps its embedding, one whose demo is in ``base`` keeps its cost; only the
    others are embedded (``embed(texts)``) and measured (``measure(demos)``). Adding or removing exemplars so
    re-embeds and re-measures only what changed. Returns ``(store, {"embedded": k, "measured": m})``."""
    if base is not None and (base.embedder != embedder or base.prompt_format != prompt_format):
        base = None  # another embedder or prompt format: nothing carries over
    known_vectors: dict[str, int] = {}
    known_costs: dict[str, int] = {}
    if base is not None:
        for k, saved in enumerate(base.iter_records()):
            known_vectors.setdefault(saved["embed_text"], k)
            known_costs.setdefault(demo_key(saved["demo"]), k)
    # the base's columns (memory-mapped; empty without a base: nothing is known then)
    base_costs = base.costs if base is not None else np.zeros(0)
    base_vectors = base.embeddings if base is not None else np.zeros((0, 0), dtype=np.float32)
    n = len(records)
    dim = int(base.manifest["dim"]) if base is not None else None
    costs = np.zeros(n)
    new_texts: dict[str, int] = {}
    new_text_rows: list[int] = []
    new_demos: list[dict] = []
    new_demo_rows: list[int] = []
    vector_source = np.full(n, -1, dtype=np.int64)
    for i, record in enumerate(records):
        row = known_vectors.get(record.embed_text)
        if row is not None:
            vector_source[i] = row
        else:
            new_text_rows.append(i)
            new_texts.setdefault(record.embed_text, len(new_texts))
        row = known_costs.get(demo_key(record.demo))
        if row is not None:
            costs[i] = float(base_costs[row])
        else:
            new_demo_rows.append(i)
            new_demos.append(record.demo)
    fresh = np.asarray(embed(list(new_texts)), dtype=np.float32) if new_texts else None
    if dim is None:
        dim = int(fresh.shape[1]) if fresh is not None else 0
    embeddings = np.zeros((n, dim), dtype=np.float32)
    kept = np.flatnonzero(vector_source >= 0)
    if kept.size:
        embeddings[kept] = base_vectors[vector_source[kept]]
    if fresh is not None:
        for i in new_text_rows:
            embeddings[i] = fresh[new_texts[records[i].embed_text]]
    if new_demos:
        costs[new_demo_rows] = np.asarray(measure(new_demos), dtype=np.float64)
    store = write_store(root, records, embeddings, costs, embedder=embedder, prompt_format=prompt_format,
                        group_costs=group_costs, index=index)
    return store, {"embedded": len(new_texts), "measured": len(new_demos)}


def records_of(store: PoolStore) -> list[PoolRecord]:
    """Every record of ``store`` as :class:`PoolRecord` s (to build a changed pool from)."""
    return [PoolRecord(r["id"], r["demo"], r.get("doc_id", ""), r.get("embed_text", ""), r.get("program", ""),
                       r.get("attributes") or {}, int(r.get("group", -1)), r.get("inputs_digest", ""),
                       r.get("query_digest", ""))
            for r in store.iter_records()]


def as_record(value: Any) -> PoolRecord:
    return value if isinstance(value, PoolRecord) else PoolRecord(**value)


__all__ = ["FULL_CHECK_BYTES", "INLINE_POOL_LIMIT", "STORES_FOLDER", "PoolRecord", "PoolStore", "PoolStoreError",
           "copy_store", "default_store_root", "extend_store", "find_store", "open_store", "records_of",
           "searching", "store_hash", "store_search_dirs", "stores_beside", "write_store"]
