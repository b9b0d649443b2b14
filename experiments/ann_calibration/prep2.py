import numpy as np

from knapsack_dspy.docqa.data import load_examples
from knapsack_dspy.docqa.pipelines.pipeline import PIPELINE_EMBED_FIELDS
from knapsack_dspy.docqa.tasks import build_pipeline
from knapsack_dspy.embeddings import TextEmbedder
from knapsack_dspy.modules.select_exemplars import query_text

student = build_pipeline("tatqa", "pot", route=None, model="openai/gpt-4o-mini")
name = student.demo_predictor_name
tune = list(load_examples("tatqa", split="dev_tune"))
keep = [
    i for i in range(len(tune)) if not (100 <= i < 200)
]  # dev_tune 101-200 (1-based): the final evaluation's unseen
texts = [
    query_text(student.inputs_for(name, tune[i]) or {"question": tune[i]["question"]}, PIPELINE_EMBED_FIELDS)
    for i in keep
]
emb = TextEmbedder().encode(texts)
mods = np.asarray([str(tune[i].get("modality") or "table") for i in keep])
dev = list(load_examples("tatqa", split="dev"))[:1000]
pool_ids = {e["id"] for e in load_examples("tatqa", split="dev_pool")}
print("first 1000 dev in pool:", sum(d["id"] in pool_ids for d in dev))
np.savez("tune.npz", queries=emb, qmods=mods)
print(emb.shape, np.unique(mods, return_counts=True))
