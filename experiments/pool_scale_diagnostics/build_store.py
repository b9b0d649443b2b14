
import argparse
import pickle
import sys

import numpy as np

sys.path.insert(0, "benchmarks")
from pathlib import Path

import pool_scale as ps

args = argparse.Namespace(
    queries_from="unseen",
    queries=1000,
    counter="local/qwen2.5-coder-1.5b-instruct",
    noise=0.35,
    seed=0,
    ann_backend=None,
    target_recall=0.97,
    nlist=None,
    capacity=2700.0,
)
real = ps.real_pool(args)
ps.measured_costs(real, args.counter, 5, 0)
emb, source = ps.synthetic(real, 1_000_000, args.noise, args.seed)
store, secs = ps.build_store(real, Path("../research/ps_store"), emb, source, args)
print("built", store.path, secs)
job = {
    "store": str(store.path),
    "ann_min": None,
    "embedder": real["embedder"].model_id,
    "counter": args.counter,
    "capacity": args.capacity,
    "case_coverage": real["case_coverage"],
    "modalities": [str(q.get("modality") or "table") for q in real["queries"]],
    "embeddings": np.asarray(real["query_embeddings"]),
    "sources": ["tatqa" if i < 404 else "finqa" for i in range(len(real["queries"]))],
}
pickle.dump(job, open("../research/ps_job.pkl", "wb"))
