import sys
import types
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import pool_scale

from knapsack_dspy.llm.token_counter import get_token_counter
from knapsack_dspy.modules.compiled_programs import predictor_at
from knapsack_dspy.modules.prompt_cost import PromptCostModel, pinned_adapter

args = types.SimpleNamespace(queries=1000, counter="openai/gpt-4o-mini")
real = pool_scale.real_pool(args)
sig = predictor_at(real["student"], real["name"]).signature
costs = np.asarray(
    PromptCostModel(sig, get_token_counter(args.counter), pinned_adapter()).demo_costs(real["demos"]), float
)
mods = np.asarray([str(q.get("modality") or "table") for q in real["queries"]])
pool_mods = np.asarray([str(e.get("modality") or "") for e in real["examples"]])
pool_docs = np.asarray([str(e.get("doc_id") or e.get("document_id") or "") for e in real["examples"]])
print(real["examples"][0].keys() if hasattr(real["examples"][0], "keys") else dir(real["examples"][0]))
np.savez(
    "real.npz",
    pool=real["embeddings"],
    queries=real["query_embeddings"],
    costs=costs,
    qmods=mods,
    pool_mods=pool_mods,
    pool_docs=pool_docs,
)
print(
    real["embeddings"].shape,
    real["query_embeddings"].shape,
    costs[:5],
    np.unique(mods, return_counts=True),
    pool_docs[:8],
)
