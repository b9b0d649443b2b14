"""Pools of any size (issue 25): candidate retrieval, per-query selection, recall, objective, costs, memory, load.

Run on an idle machine (not while an LM evaluation runs); every ratio comes from one run:

    python benchmarks/pool_scale.py --sizes 1000,10000,100000,1000000 --queries 1000 --out benchmarks/results/pool_scale

Quick check that it runs (seconds to minutes; numbers meaningless on a busy machine):

    python benchmarks/pool_scale.py --sizes 1000,5000 --queries 20 --ann-min 2000 --cost-demos 20 \\
        --embed-texts 64 --counter openai/gpt-4o-mini --out pool_scale_quick

**Synthetic pools** are generated from the real TAT-QA pool (``dev_pool``, 1,164 questions; embedded with the
pipeline's embedder, over its ``embed_fields``) by this rule: exemplar ``j`` of a pool of ``N`` picks two real
exemplars ``a`` and ``b`` and a weight ``w`` (uniform in [0, 1], seeded), and embeds at
``normalise(w e_a + (1 - w) e_b + sigma g)``, ``g ~ N(0, I / d)`` (``--noise`` sigma, default 0.35); it takes
its demo, token cost and attributes (modality, answer type) from the nearer of ``a`` and ``b`` (``w >= 0.5``:
``a``), and its document id is ``j // 6`` (six questions a document, as TAT-QA). New points so lie between
real questions, not on them: the report gives the nearest-neighbour similarity distribution of every pool
(1,000 sampled exemplars each, against the whole pool) beside the real pool's, so a pool of near-duplicates,
which makes every prefilter look perfect, shows.

**Queries** (``--queries-from``): ``unseen`` (default), the first ``--queries`` of the financial questions no pool
holds: TAT-QA's 404 from documents no pool question is about (``dev_tune`` without its questions 101-200, the final
evaluation's unseen ones), then FinQA's train cases in order (the same domain, other reports, no document in any
pool; a question's modality from its gold evidence) -- 404 + 596 at 1,000; ``dev_tune``, those 404 alone; or
``dev``, the first ``--queries`` of TAT-QA ``dev``, which holds ``dev_pool``: 676 of its first 1,000 are the real
pool's questions, the vectors the synthetic exemplars are mixed from, so each is the hub of exemplars spread toward
random others (a harder query for the index than a new question, and with near-copies among its candidates).
Embedded beforehand: the query's embedding is excluded from every time below.
Each query aims at its gold modality (SEER's template) with a capacity of ``--capacity`` tokens (default 2,700: a
4,096 budget less a ~1,000-token query and the output reserve), and excludes its own document's exemplars.

**Measured**, per pool size: the exact candidate retrieval (today's path: one similarity per exemplar,
``--exact-max`` largest size it runs at), the index's retrieval (pools of at least ``--ann-min`` exemplars; the
backend: faiss's IVF when faiss is installed, else numpy's, ``--ann-backend`` to choose; every row and the
report name it),
the vectors a query's retrieval reads (``vectors_scanned``, machine-independent: exact search every exemplar,
the index every centroid and its probed cells' members, ``ann_index.vectors_scanned``; mean and share of the
pool), recall@k of the index's candidates against exact search (k = SEER's default ``knn_k``, 200), SEER's whole
per-query selection (``KnapsackSelector.select``: retrieval + ILP) on the path the pool uses, the same for the
selection-objective issue's selector (``case_coverage``, its kind classifier fitted once on the real pool: a
synthetic exemplar takes its program template and answer type from a real one; its first query, which reads the
pool's kind labels once, untimed), and the
objective (summed similarity of the chosen exemplars) of selections on the index's candidates over selections
on exact candidates (mean, 5th percentile); the index's build time; the program's state size (JSON; a store
reference past ``INLINE_POOL_LIMIT``); loading that state and its pool (``SelectExemplars.load_state`` + the
pool, the embedder's load excluded: a stub stands in) warm (store in the page cache) and cold (the store's
pages dropped with ``posix_fadvise(DONTNEED)`` first); and the peak resident memory (``peak_rss_mb``:
the process that loads the store and answers the queries on the pool's path, as a server would, one per size;
``comparison_peak_rss_mb``: the process of the exact comparison, which reads every embedding per query;
``build_peak_rss_mb``: the driver's, which generated the pools and built their stores). The serving process
times the index's path alone; the exact retrieval and selection beside it are timed in the comparison process.
At ``--incremental-at`` (10^5): 1,000 exemplars added to the pool's store (``pool_store.extend_store``; new
vectors by the rule above, new demos), the texts embedded and demos measured counted, the base's vectors and costs
checked unchanged, the seconds (the index rebuilt). A synthetic exemplar's embedded text names it (``[s<j>]``), so
each keeps its own vector when a store is extended from it.
Once per run: token costs of ``--cost-demos`` real demos one at a time (the adapter formats each demo, the counter
counts each prompt: for a local model two server requests) and batched (``PromptCostModel.demo_costs``: demos from
the signature's template, a local model's prompts from its chat template's skeleton, tokenized by its BPE in
process and checked against the server on a sample of every batch; the report says which path counted), fresh
counters with empty disk caches, the in-process tokenizer's one-time load (reading the GGUF's vocabulary) outside
the time, counts compared; and the batched rate at scale, on ``--batched-demos`` demos (the real ones, the k-th
copy's question ending in `` (copy k)``: distinct prompts of the real lengths), its counts compared with one at a
time on 200 of them; and embedding throughput with 1 and 2 local worker processes and in a local Ray cluster
(``--embed-texts`` texts, ``--ray-cpus``; the model's load reported apart, each worker loading its own).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import resource
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from knapsack_dspy.selection import ann_index, pool_store
from knapsack_dspy.selection.exemplar_pool import ExemplarPool, SelectionRequest
from knapsack_dspy.selection.pool_store import PoolRecord, write_store
from knapsack_dspy.selection.selectors.base import candidate_search, candidates
from knapsack_dspy.selection.selectors.case_coverage import CaseCoverageSelector
from knapsack_dspy.selection.selectors.seer import KnapsackSelector

K = 200  # SEER's default knn_k
DOC_SIZE = 6


def median(xs) -> float:
    return float(statistics.median(xs)) if xs else float("nan")


def pct(xs, q) -> float:
    return float(np.percentile(np.asarray(xs), q)) if len(xs) else float("nan")


def ms(seconds: float) -> float:
    return round(seconds * 1e3, 3)


def peak_rss_mb() -> float:
    """This process's peak resident memory: Linux's ``VmHWM`` (the high-water mark of its own address space; a
    spawned worker's ``ru_maxrss`` would start from its parent's at the fork, which survives the exec), else
    ``ru_maxrss``."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


# -- the real pool --------------------------------------------------------------------------------------
def real_pool(args):
    """The real TAT-QA pool as the program-of-thought pipeline sees it: rendered demos, embedded texts, the
    attributes, the pipeline's embedder; and the query examples."""
    from knapsack_dspy.docqa.data import load_examples
    from knapsack_dspy.docqa.pipelines.pipeline import PIPELINE_EMBED_FIELDS
    from knapsack_dspy.docqa.tasks import build_pipeline
    from knapsack_dspy.embeddings import TextEmbedder
    from knapsack_dspy.modules.select_exemplars import query_text

    examples = list(load_examples("tatqa", split="dev_pool"))
    queries = query_examples(args.queries_from)[: args.queries]
    student = build_pipeline("tatqa", "pot", route=None, model=args.counter)
    name = student.demo_predictor_name
    demos = [dict(student.demo_for(name, ex)) for ex in examples]
    fields = PIPELINE_EMBED_FIELDS
    embedder = TextEmbedder()
    texts = [query_text(d, fields) for d in demos]
    embeddings = embedder.encode(texts)
    query_texts = [query_text(student.inputs_for(name, q) or {"question": q["question"]}, fields) for q in queries]
    query_embeddings = embedder.encode(query_texts)
    return {"examples": examples, "demos": demos, "texts": texts, "embeddings": embeddings, "student": student,
            "name": name, "queries": queries, "query_embeddings": query_embeddings, "embedder": embedder}


def query_examples(source: str) -> list:
    """The queries (module docstring): ``unseen`` (``dev_tune`` without its questions 101-200, then FinQA's train
    cases in order), ``dev_tune`` (those 404 alone) or TAT-QA ``dev`` in order."""
    from knapsack_dspy.docqa.data import load_examples

    if source == "dev":
        return list(load_examples("tatqa", split="dev"))
    examples = list(load_examples("tatqa", split="dev_tune"))
    examples = examples[:100] + examples[200:]
    if source == "unseen":
        examples += list(load_examples("finqa_cases", split="train"))
    return examples


def measured_costs(real, counter_model: str, limit: int, batched_demos: int = 0) -> dict:
    """Token costs of the real demos one at a time and batched (fresh counters: nothing memoised)."""
    from knapsack_dspy.llm.bpe_tokenizer import bpe_encoding
    from knapsack_dspy.llm.count_store import TokenCountStore
    from knapsack_dspy.llm.local_token_counter import LocalTokenCounter
    from knapsack_dspy.llm.token_counter import get_token_counter
    from knapsack_dspy.modules.compiled_programs import predictor_at
    from knapsack_dspy.modules.prompt_cost import PromptCostModel, pinned_adapter

    signature = predictor_at(real["student"], real["name"]).signature
    demos = real["demos"]
    adapter = pinned_adapter()
    out = {}
    counts = {}

    def fresh_model():
        counter = type(get_token_counter(counter_model))(counter_model)  # a fresh counter: an empty memo
        if isinstance(counter, LocalTokenCounter):  # a local model's counts on disk: a store of this run's own
            store = TokenCountStore(Path(tempfile.mkdtemp(prefix="counts-")) / "counts.sqlite3")
            counter = LocalTokenCounter(counter_model, count_store=store)
            server = counter._get_server()  # loaded outside the time, and the BPE's vocabulary read (once per file)
            bpe_encoding(server.model_path)
        model = PromptCostModel(signature, counter, adapter)
        model.demo_cost(demos[0])  # the tokenizer / server loaded outside the time
        return model

    for how in ("one_at_a_time", "batched"):
        model = fresh_model()
        sample = demos[1: 1 + limit]
        start = time.perf_counter()
        counts[how] = ([model.demo_cost(d) for d in sample] if how == "one_at_a_time"
                       else model.demo_costs(sample))
        seconds = time.perf_counter() - start
        out[how] = {"demos": len(sample), "seconds": round(seconds, 3),
                    "per_second": round(len(sample) / seconds, 1) if seconds else None}
        if how == "batched":
            out[how]["path"] = batched_path(model)
    out["identical"] = counts["one_at_a_time"] == counts["batched"]
    out["speedup"] = (round(out["batched"]["per_second"] / out["one_at_a_time"]["per_second"], 2)
                      if out["one_at_a_time"]["per_second"] else None)
    if batched_demos:
        copies = [{**d, "question": f"{d['question']} (copy {k // len(demos)})"}
                  for k, d in zip(range(batched_demos), itertools.cycle(demos))]
        model = fresh_model()
        start = time.perf_counter()
        at_scale = model.demo_costs(copies)
        seconds = time.perf_counter() - start
        check = fresh_model()
        step = max(1, len(copies) // 200)
        out["batched_at_scale"] = {
            "demos": len(copies), "seconds": round(seconds, 3),
            "per_second": round(len(copies) / seconds, 1) if seconds else None,
            "identical_on_200": [check.demo_cost(d) for d in copies[::step]] == at_scale[::step],
            "speedup": (round(len(copies) / seconds / out["one_at_a_time"]["per_second"], 2)
                        if seconds and out["one_at_a_time"]["per_second"] else None)}
    out["counter"] = counter_model
    full = PromptCostModel(signature, get_token_counter(counter_model), adapter)
    real["costs"] = np.asarray(full.demo_costs(demos), dtype=float)
    real["case_coverage"] = case_coverage_state(real)
    return out


def case_coverage_state(real) -> dict:
    """The selection-objective issue's selector fitted on the real pool (its kind classifier: the pool's
    embeddings and program templates / answer types), the state every synthetic pool's server loads: a synthetic
    exemplar takes its labels from a real one, so the kinds are the same; fitting on 10^6 exemplars is compile
    work, not a query's."""
    attrs = ("modality", "answer_type", "program_template")
    pool = ExemplarPool(ids=[ex["id"] for ex in real["examples"]], embeddings=real["embeddings"],
                        costs=np.ones(len(real["examples"])),
                        attributes={a: [str(ex.get(a) or "") for ex in real["examples"]] for a in attrs},
                        doc_ids=[str(ex.get("doc_id") or "") for ex in real["examples"]])
    return CaseCoverageSelector().fit(pool).get_state()


def batched_path(model) -> str:
    """How the batched costs were counted (what ``demo_costs`` used)."""
    from knapsack_dspy.llm.local_token_counter import LocalTokenCounter

    template = model._template is not None and model._template.active
    formatting = "demos from the signature's template" if template else "demos formatted by the adapter"
    counter = model.counter
    if not isinstance(counter, LocalTokenCounter):
        return f"{formatting}; {type(counter).__name__} per prompt"
    chat = "chat-template skeleton" if any(t is not None for t in counter._templates.values()) else "server templates"
    tokens = ("the model's BPE in process (tiktoken), checked against the server on "
              f"{counter._bpe_checked} prompts" if counter._bpe else "server /tokenize requests")
    return f"{formatting}; prompts from the {chat}; tokens by {tokens}"


def _embed_worker(texts):
    from knapsack_dspy.embeddings import TextEmbedder

    embedder = TextEmbedder(use_cache=False)
    start = time.perf_counter()
    embedder._load()
    loaded = time.perf_counter() - start
    start = time.perf_counter()
    embedder.encode(texts)
    return loaded, time.perf_counter() - start


def embedding_throughput(texts: list[str], ray_cpus: int = 0) -> dict:
    """Sentences per second encoding ``texts`` (uncached) in 1 and 2 local worker processes, and in
    ``ray_cpus`` tasks of a local Ray cluster (0: not measured)."""
    from concurrent.futures import ProcessPoolExecutor
    from multiprocessing import get_context

    out = {"texts": len(texts)}
    for workers in (1, 2):
        parts = [texts[k::workers] for k in range(workers)]
        start = time.perf_counter()
        with ProcessPoolExecutor(workers, mp_context=get_context("spawn")) as pool:
            results = list(pool.map(_embed_worker, parts))
        wall = time.perf_counter() - start
        load = max(r[0] for r in results)
        encode = max(r[1] for r in results)
        out[f"{workers}_workers"] = {"model_load_s": round(load, 2), "encode_s": round(encode, 2),
                                     "per_second": round(len(texts) / encode, 1) if encode else None,
                                     "wall_s": round(wall, 2)}
    if not ray_cpus:
        out["ray"] = "not measured (--ray-cpus 0)"
        return out
    import ray  # the bench's scale-out extra

    ray.init(num_cpus=ray_cpus, include_dashboard=False, log_to_driver=False)
    try:
        task = ray.remote(num_cpus=1)(_embed_worker)
        start = time.perf_counter()
        results = ray.get([task.remote(texts[k::ray_cpus]) for k in range(ray_cpus)])
        wall = time.perf_counter() - start
    finally:
        ray.shutdown()
    encode = max(r[1] for r in results)
    out["ray"] = {"cpus": ray_cpus, "model_load_s": round(max(r[0] for r in results), 2),
                  "encode_s": round(encode, 2), "per_second": round(len(texts) / encode, 1) if encode else None,
                  "wall_s": round(wall, 2)}
    return out


def ann_backend(args) -> str:
    """The index's backend, as the report states it."""
    if args.ann_backend == "faiss":
        return (f"faiss {ann_index.faiss_module().__version__} (IndexIVFScalarQuantizer 8-bit, inner product; "
                "exact re-rank)")
    why = "chosen" if ann_index.faiss_module() is not None else f"faiss not installed: {ann_index.INSTALL_HINT}"
    return f"numpy ({why})"


# -- synthetic pools ------------------------------------------------------------------------------------
def synthetic(real, n: int, noise: float, seed: int):
    """A pool of ``n`` from the real one by the rule of the module docstring: (embeddings, source index)."""
    rng = np.random.default_rng([seed, n])
    e = real["embeddings"]
    if n == len(e):
        return e.copy(), np.arange(n)
    a, b = rng.integers(len(e), size=n), rng.integers(len(e), size=n)
    w = rng.random(n, dtype=np.float32)[:, None]
    out = np.empty((n, e.shape[1]), dtype=np.float32)
    for start in range(0, n, 65_536):
        s = slice(start, start + 65_536)
        x = w[s] * e[a[s]] + (1 - w[s]) * e[b[s]]
        x += noise * rng.standard_normal(x.shape, dtype=np.float32) / np.sqrt(e.shape[1])
        out[s] = x / np.linalg.norm(x, axis=1, keepdims=True)
    return out, np.where(w[:, 0] >= 0.5, a, b)


def nn_similarity(embeddings: np.ndarray, seed: int, sample: int = 1000) -> dict:
    """The distribution of each sampled exemplar's similarity to its nearest other exemplar."""
    rng = np.random.default_rng(seed)
    rows = rng.choice(len(embeddings), min(sample, len(embeddings)), replace=False)
    best = np.full(rows.size, -np.inf)
    for start in range(0, len(embeddings), 65_536):
        block = np.asarray(embeddings[start:start + 65_536])
        sims = np.asarray(embeddings[rows]) @ block.T
        inside = (rows >= start) & (rows < start + len(block))
        sims[np.flatnonzero(inside), rows[inside] - start] = -np.inf
        best = np.maximum(best, sims.max(axis=1))
    return {q: round(float(np.percentile(best, p)), 4) for q, p in
            (("p5", 5), ("p25", 25), ("median", 50), ("p75", 75), ("p95", 95))}


ATTRIBUTES = ("modality", "answer_type", "program_template")


def synthetic_record(real, j: int, r: int, demo: dict | None = None) -> PoolRecord:
    """Synthetic exemplar ``j`` from real exemplar ``r``: its demo (or ``demo``) and attributes; its embedded text
    names ``j`` (a synthetic exemplar has its own vector, so a store extended from this one must keep each)."""
    ex = real["examples"][r]
    return PoolRecord(f"s{j}", demo or real["demos"][r], f"doc{j // DOC_SIZE}", f"{real['texts'][r]} [s{j}]",
                      str(ex.get("program") or ""), {a: str(ex.get(a) or "") for a in ATTRIBUTES})


def incremental(real, store, source, args, added: int = 1_000) -> dict:
    """Adding ``added`` exemplars to ``store`` (``pool_store.extend_store``): how many texts are embedded and demos
    measured (a counting embedder and measure: the new exemplars' vectors by the synthetic rule, their demos'
    questions ending in `` (added k)``: demos the base does not hold), and the seconds (the index rebuilt)."""
    from knapsack_dspy.selection.pool_store import extend_store

    n = len(store)
    more, more_source = synthetic(real, added, args.noise, args.seed + 1)
    records = [synthetic_record(real, j, r) for j, r in enumerate(source.tolist())]
    new = [synthetic_record(real, n + k, r, {**real["demos"][r], "question": f"{real['demos'][r]['question']} "
                                                                            f"(added {k})"})
           for k, r in enumerate(more_source.tolist())]
    vector_of = {record.embed_text: more[k] for k, record in enumerate(new)}
    cost_of = {id(record.demo): real["costs"][r] for record, r in zip(new, more_source.tolist(), strict=True)}
    asked = {"texts": 0, "demos": 0}

    def embed(texts):
        asked["texts"] += len(texts)
        return np.stack([vector_of[t] for t in texts])

    def measure(demos):
        asked["demos"] += len(demos)
        return [float(cost_of[id(d)]) for d in demos]

    start = time.perf_counter()
    grown, _done = extend_store(Path(store.path).parent, store, records + new, embed=embed, measure=measure,
                               embedder=store.embedder, prompt_format=store.prompt_format)
    seconds = time.perf_counter() - start
    kept = bool(np.array_equal(np.asarray(grown.embeddings[:n]), np.asarray(store.embeddings))
                and np.array_equal(np.asarray(grown.costs[:n]), np.asarray(store.costs)))
    out = {"base": n, "added": added, "embedded": asked["texts"], "measured": asked["demos"],
           "seconds": round(seconds, 2), "base_vectors_and_costs_kept": kept, "size": len(grown)}
    if not args.keep:
        shutil.rmtree(grown.path, ignore_errors=True)
    return out


def build_store(real, root: Path, embeddings, source, args):
    records = []
    for j, r in enumerate(source.tolist()):
        records.append(synthetic_record(real, j, r))
    start = time.perf_counter()
    store = write_store(root, records, embeddings, real["costs"][source], embedder=real["embedder"].model_id,
                        prompt_format=json.dumps({"benchmark": "pool_scale", "counter": args.counter}),
                        index=len(records) >= ann_index.ANN_MIN_POOL,
                        index_options={"backend": args.ann_backend, "target_recall": args.target_recall,
                                       **({"nlist": args.nlist} if args.nlist else {})})
    return store, time.perf_counter() - start


def state_and_load(store, embedder_id: str, counter: str) -> dict:
    """The program state (JSON) referencing ``store`` and loading it back with its pool, warm and cold."""
    from knapsack_dspy.modules.select_exemplars import SelectExemplars
    from knapsack_dspy.selection.config import SelectionConfig

    class StubEmbedder:  # the embedder's own load is not the program's: excluded
        model_id = embedder_id

        def encode(self, texts):
            raise AssertionError("not called")

    select = SelectExemplars(SelectionConfig(selector="seer", embed_fields=("question",)), embedder=StubEmbedder())
    select._attach_store(store)
    select.resolved_budget = 4096
    select.token_model = counter
    text = json.dumps(select.dump_state())

    def load():
        start = time.perf_counter()
        with pool_store.searching(store.path.parent):
            fresh = SelectExemplars(embedder=StubEmbedder()).load_state(json.loads(text))
            pool = fresh.pool()
        return time.perf_counter() - start, pool

    def drop_page_cache():
        for path in store.path.iterdir():
            fd = os.open(path, os.O_RDONLY)
            try:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)

    drop_page_cache()
    cold, _ = load()
    load()
    warm = [load()[0] for _ in range(3)]
    return {"state_bytes": len(text.encode()), "load_cold_s": round(cold, 3), "load_warm_s": round(median(warm), 3)}


def _requests(job: dict, n: int):
    for q, (modality, embedding) in enumerate(zip(job["modalities"], job["embeddings"], strict=True)):
        yield embedding, SelectionRequest(embedding, capacity=job["capacity"], target_attributes={"modality": modality},
                                          doc_id=f"doc{(q * 7919) % max(1, n // DOC_SIZE)}")


def _pools(job: dict):
    if job["ann_min"] is not None:
        ann_index.ANN_MIN_POOL = job["ann_min"]
    store = pool_store.open_store(job["store"])
    index = store.index()
    common = dict(ids=store.ids.tolist(), embeddings=store.embeddings, costs=store.costs,
                  attributes=store.attributes, doc_ids=store.doc_ids)
    return store, index, ExemplarPool(**common, index=index) if index is not None else None, common


def serve_phase(job: dict) -> dict:
    """Load the store and answer the queries on the path the pool uses, as a server would (a process of its own:
    its peak memory is what selecting from the pool takes, not what building the pool or the exact comparison
    took). Returns the row's serving fields and, per query, the index's candidates and the chosen set."""
    store, index, ann_pool, common = _pools(job)
    n = len(store)
    row = state_and_load(store, job["embedder"], job["counter"])
    if index is not None:
        row["index"] = {"backend": index.backend, "nlist": index.nlist, "nprobe": index.nprobe,
                        "delta": index.delta, "floor": index.floor, "calibration": index.calibration}
    pool = ann_pool or ExemplarPool(**common)
    seer = KnapsackSelector()
    coverage = CaseCoverageSelector().set_state(job["case_coverage"])
    coverage.select(pool, next(_requests(job, n))[1])  # the pool's kind labels, read once per pool (not a query's)
    times = {"exact_retrieval_ms": [], "ann_retrieval_ms": [], "selection_ms": [], "case_coverage_selection_ms": []}
    scanned, found, chosen = [], [], []
    for embedding, request in _requests(job, n):
        start = time.perf_counter()
        idx, _ = candidates(pool, request, K)
        times["ann_retrieval_ms" if ann_pool is not None else "exact_retrieval_ms"].append(
            ms(time.perf_counter() - start))
        if ann_pool is not None:
            scanned.append(index.vectors_scanned(embedding))
        start = time.perf_counter()
        selection = seer.select(pool, request)
        times["selection_ms"].append(ms(time.perf_counter() - start))
        start = time.perf_counter()
        coverage.select(pool, request)
        times["case_coverage_selection_ms"].append(ms(time.perf_counter() - start))
        found.append(idx.tolist())
        chosen.append(list(selection.indices))
    for key, values in times.items():
        if values:
            row[key] = {"median": round(median(values), 3), "p95": round(pct(values, 95), 3)}
    row["path"] = f"ann ({index.backend})" if ann_pool is not None else "exact"
    mean_scanned = float(np.mean(scanned)) if scanned else float(n)  # exact search reads every exemplar
    row["vectors_scanned"] = {"mean": round(mean_scanned, 1), "share": round(mean_scanned / n, 4)}
    row["candidate_search"] = candidate_search(seer, pool)
    row["peak_rss_mb"] = peak_rss_mb()
    return {"row": row, "found": found, "chosen": chosen}


def compare_phase(job: dict, served: dict) -> dict:
    """Exact search beside the index's answers (a pool with an index, up to ``--exact-max``): exact retrieval and
    selection times, recall@k of the index's candidates, and the objective of its chosen sets over exact
    candidates'. Its own process: reading every embedding per query is not the server's memory."""
    store, _index, _ann_pool, common = _pools(job)
    exact_pool = ExemplarPool(**common)
    seer = KnapsackSelector()
    times = {"exact_retrieval_ms": [], "exact_selection_ms": []}
    recalls, ratios = [], []
    for (embedding, request), found, chosen in zip(_requests(job, len(store)), served["found"], served["chosen"],
                                                  strict=True):
        start = time.perf_counter()
        exact_idx, _ = candidates(exact_pool, request, K)
        times["exact_retrieval_ms"].append(ms(time.perf_counter() - start))
        start = time.perf_counter()
        exact_sel = seer.select(exact_pool, request)
        times["exact_selection_ms"].append(ms(time.perf_counter() - start))
        recalls.append(len(set(exact_idx.tolist()) & set(found)) / K)
        sims = np.asarray(exact_pool.embeddings @ np.asarray(embedding, dtype=np.float32), dtype=float)
        exact_value = sims[list(exact_sel.indices)].sum()
        ratios.append(float(sims[chosen].sum() / exact_value) if exact_value > 0 else 1.0)
    row = {key: {"median": round(median(values), 3), "p95": round(pct(values, 95), 3)}
           for key, values in times.items()}
    row["recall_at_k"] = {"k": K, "mean": round(float(np.mean(recalls)), 4), "min": round(min(recalls), 4)}
    row["objective_ratio"] = {"mean": round(float(np.mean(ratios)), 4), "p5": round(pct(ratios, 5), 4)}
    sources = job.get("sources") or ["all"] * len(recalls)
    row["by_source"] = {}
    for source in sorted(set(sources)):
        mine = [i for i, s in enumerate(sources) if s == source]
        row["by_source"][source] = {
            "queries": len(mine), "recall_at_k": round(float(np.mean([recalls[i] for i in mine])), 4),
            "objective_mean": round(float(np.mean([ratios[i] for i in mine])), 4),
            "objective_p5": round(pct([ratios[i] for i in mine], 5), 4)}
    row["comparison_peak_rss_mb"] = peak_rss_mb()
    return row


def run_size(real, n: int, args, root: Path) -> dict:
    from concurrent.futures import ProcessPoolExecutor
    from multiprocessing import get_context

    embeddings, source = synthetic(real, n, args.noise, args.seed)
    row: dict = {"size": n, "nn_similarity": nn_similarity(embeddings, args.seed)}
    store, seconds = build_store(real, root, embeddings, source, args)
    del embeddings
    row["store_build_s"] = round(seconds, 2)  # with the index's k-means and calibration when it has one
    row["store_bytes"] = sum(p.stat().st_size for p in store.path.iterdir())
    row["build_peak_rss_mb"] = peak_rss_mb()
    job = {"store": str(store.path), "ann_min": ann_index.ANN_MIN_POOL, "embedder": real["embedder"].model_id,
           "counter": args.counter, "capacity": args.capacity, "case_coverage": real["case_coverage"],
           "modalities": [str(q.get("modality") or "table") for q in real["queries"]],
           "sources": [str(q.get("dataset") or "") for q in real["queries"]],
           "embeddings": np.asarray(real["query_embeddings"])}
    with ProcessPoolExecutor(1, mp_context=get_context("spawn")) as worker:
        served = worker.submit(serve_phase, job).result()
    row.update(served["row"])
    if row["path"] != "exact" and n <= args.exact_max:
        with ProcessPoolExecutor(1, mp_context=get_context("spawn")) as worker:
            row.update(worker.submit(compare_phase, job, served).result())
    if n == args.incremental_at:
        row["incremental"] = incremental(real, store, source, args)
    if not args.keep:
        shutil.rmtree(store.path, ignore_errors=True)
    return row


def markdown(result: dict) -> str:
    lines = ["# Pool scale", "", f"Machine: {result['machine']}; queries: {result['queries']} "
             f"({result.get('queries_from', 'dev')}); "
             f"synthetic rule: {result['rule']}", "",
             f"Nearest-neighbour index backend: {result['ann_backend']}; cells to probe calibrated for recall@200 >= "
             f"{result['target_recall']} at 95 % confidence on pool vectors and midpoints of two, without their "
             "documents", "",
             "| pool | path | NN sim p5 / median / p95 | exact retrieval ms | index retrieval ms | vectors scanned "
             "/ query (share) | selection ms (x smallest) | case_coverage ms (x smallest) | recall@200 | "
             "objective mean / p5 | state bytes | "
             "load warm / cold s | serving peak RSS MB |",
             "|---:|---|---|---:|---:|---:|---:|---:|---:|---|---:|---|---:|"]
    base = result["sizes"][0].get("selection_ms", {}).get("median")
    real_nn = result["real_pool_nn_similarity"]
    lines.insert(6, f"Real TAT-QA pool NN similarity: p5 {real_nn['p5']}, median {real_nn['median']}, "
                    f"p95 {real_nn['p95']}\n")
    for row in result["sizes"]:
        nn = row["nn_similarity"]
        sel = row.get("selection_ms", {}).get("median")
        ratio = f" ({sel / base:.2f}x)" if sel and base else ""
        cc = row.get("case_coverage_selection_ms", {}).get("median")
        cc_base = result["sizes"][0].get("case_coverage_selection_ms", {}).get("median")
        cc = f"{cc} ({cc / cc_base:.2f}x)" if cc and cc_base else ""
        rec = row.get("recall_at_k", {}).get("mean", "")
        obj = row.get("objective_ratio", {})
        scan = row.get("vectors_scanned", {})
        scan = f"{scan['mean']:,.0f} ({scan['share']:.1%})" if scan else ""
        lines.append(f"| {row['size']:,} | {row['path']} | {nn['p5']} / {nn['median']} / {nn['p95']} | "
                     f"{row.get('exact_retrieval_ms', {}).get('median', '')} | "
                     f"{row.get('ann_retrieval_ms', {}).get('median', '')} | {scan} | {sel}{ratio} | {cc} | {rec} | "
                     f"{obj.get('mean', '')} / {obj.get('p5', '')} | {row['state_bytes']:,} | "
                     f"{row['load_warm_s']} / {row['load_cold_s']} | {row['peak_rss_mb']} |")
    lines += ["", "Peak RSS of the exact comparison's process (every embedding read per query): " + ", ".join(
        f"{row['size']:,}: {row['comparison_peak_rss_mb']} MB" for row in result["sizes"]
        if "comparison_peak_rss_mb" in row)]
    for row in result["sizes"]:
        if row.get("by_source"):
            lines += ["", f"By query source at {row['size']:,}: " + "; ".join(
                f"{source} ({v['queries']}): recall@200 {v['recall_at_k']}, objective mean {v['objective_mean']} "
                f"/ p5 {v['objective_p5']}" for source, v in row["by_source"].items())]
    lines += ["", "Candidates per size (SEER's knn_k):"] + [f"- {row['size']:,}: {row['candidate_search']}"
                                                           for row in result["sizes"]]
    for row in result["sizes"]:
        inc = row.get("incremental")
        if inc:
            lines += ["", f"Adding {inc['added']:,} exemplars to the pool of {inc['base']:,}: {inc['embedded']:,} "
                          f"texts embedded, {inc['measured']:,} demos measured, the base's vectors and costs kept: "
                          f"{inc['base_vectors_and_costs_kept']} ({inc['seconds']} s, the index rebuilt)"]
    costs = result.get("token_costs")
    if costs:
        lines += ["", f"Token costs ({costs['counter']}): one at a time {costs['one_at_a_time']['per_second']}/s, "
                      f"batched {costs['batched']['per_second']}/s ({costs['speedup']}x), identical: "
                      f"{costs['identical']}", "", f"Batched path: {costs['batched'].get('path', '')}"]
        scale = costs.get("batched_at_scale")
        if scale:
            lines += ["", f"Batched at scale ({scale['demos']:,} demos, copies of the real ones): "
                          f"{scale['per_second']}/s ({scale['speedup']}x one at a time), identical on 200 of them "
                          f"counted one at a time: {scale['identical_on_200']}"]
    emb = result.get("embedding")
    if emb:
        lines += ["", f"Embedding ({emb['texts']} texts): 1 worker {emb['1_workers']['per_second']}/s, 2 workers "
                      f"{emb['2_workers']['per_second']}/s (model load {emb['1_workers']['model_load_s']} s, "
                      f"excluded); Ray: {emb['ray'] if isinstance(emb['ray'], str) else emb['ray']['per_second']}"
                      + ("" if isinstance(emb["ray"], str) else "/s")]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1000,10000,100000,1000000")
    parser.add_argument("--queries", type=int, default=1000)
    parser.add_argument("--queries-from", choices=("unseen", "dev_tune", "dev"), default="unseen",
                        help="questions no pool holds: TAT-QA dev_tune without 101-200 (404), then FinQA train "
                             "cases (unseen); those 404 alone (dev_tune); or TAT-QA dev (holds the pool's questions)")
    parser.add_argument("--noise", type=float, default=0.35)
    parser.add_argument("--capacity", type=float, default=2700.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--exact-max", type=int, default=1_000_000, help="largest pool the exact path runs at")
    parser.add_argument("--ann-min", type=int, default=None,
                        help=f"index pools from this size (default ANN_MIN_POOL = {ann_index.ANN_MIN_POOL})")
    parser.add_argument("--ann-backend", choices=ann_index.BACKENDS, default=None,
                        help="the index's backend (default: faiss when installed, else numpy)")
    parser.add_argument("--target-recall", type=float, default=ann_index.TARGET_RECALL,
                        help="the recall@200 on pool vectors nprobe is calibrated for, at 95 %% confidence "
                             "(default %(default)s, the package's)")
    parser.add_argument("--nlist", type=int, default=None,
                        help="the index's cells (default: ann_index's rule, CELLS_PER_SQRT_N sqrt(n))")
    parser.add_argument("--counter", default="local/qwen2.5-coder-1.5b-instruct",
                        help="the model whose tokenizer measures the demos (a local model: its 0.5B twin counts)")
    parser.add_argument("--cost-demos", type=int, default=1000, help="demos timed one at a time and batched")
    parser.add_argument("--batched-demos", type=int, default=20_000,
                        help="demos (copies of the real ones) the batched rate at scale is measured on (0: skip)")
    parser.add_argument("--embed-texts", type=int, default=4000, help="texts for embedding throughput (0: skip)")
    parser.add_argument("--ray-cpus", type=int, default=2,
                        help="embedding throughput in a local Ray cluster of this many CPUs (0: skip)")
    parser.add_argument("--store-dir", default=None, help="where the stores are written (default: a temp dir)")
    parser.add_argument("--keep", action="store_true", help="keep the stores")
    parser.add_argument("--incremental-at", type=int, default=100_000,
                        help="the pool size at which 1,000 exemplars are added (pool_store.extend_store)")
    parser.add_argument("--out", default=None, help="directory for pool_scale.json and pool_scale.md")
    args = parser.parse_args(argv)
    if args.ann_min is not None:
        ann_index.ANN_MIN_POOL = args.ann_min
    args.ann_backend = args.ann_backend or ann_index.default_backend()
    sizes = sorted(int(s) for s in args.sizes.split(","))
    root = Path(args.store_dir or tempfile.mkdtemp(prefix="pool_scale-"))
    real = real_pool(args)
    result = {"machine": f"{os.cpu_count()} cpus, load {os.getloadavg()[0]:.2f}", "queries": len(real["queries"]),
              "queries_from": args.queries_from,
              "rule": "w e_a + (1 - w) e_b + sigma g, normalised (module docstring)", "noise": args.noise,
              "capacity": args.capacity, "ann_min_pool": ann_index.ANN_MIN_POOL, "ann_backend": ann_backend(args),
              "target_recall": args.target_recall,
              "inline_pool_limit": pool_store.INLINE_POOL_LIMIT,
              "real_pool_nn_similarity": nn_similarity(real["embeddings"], args.seed)}
    print(f"real pool: {len(real['demos'])} demos; {len(real['queries'])} queries", file=sys.stderr)
    result["token_costs"] = measured_costs(real, args.counter, args.cost_demos, args.batched_demos)
    print(f"token costs: {result['token_costs']}", file=sys.stderr)
    if args.embed_texts:
        texts = [f"{t} #{k}" for k, t in enumerate((real["texts"] * (args.embed_texts // len(real["texts"]) + 1))
                                                   [: args.embed_texts])]
        result["embedding"] = embedding_throughput(texts, args.ray_cpus)
    result["sizes"] = []
    for n in sizes:
        row = run_size(real, n, args, root)
        print(json.dumps(row), file=sys.stderr)
        result["sizes"].append(row)
    if not args.keep and args.store_dir is None:
        shutil.rmtree(root, ignore_errors=True)
    base = result["sizes"][0].get("selection_ms", {}).get("median")
    for row in result["sizes"]:
        sel = row.get("selection_ms", {}).get("median")
        row["selection_vs_smallest"] = round(sel / base, 3) if sel and base else None
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "pool_scale.json").write_text(text)
        (out / "pool_scale.md").write_text(markdown(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
