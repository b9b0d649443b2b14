
import pickle
import sys
import time

import numpy as np

sys.path.insert(0, "benchmarks")
import pool_scale as ps

from knapsack_dspy.selection import ann_index as ai

job = pickle.load(open("../research/ps_job.pkl", "rb"))
store, index, ann_pool, common = ps._pools(job)
emb = store.embeddings
cent = index.centroids.astype(np.float32)
order, offsets = index._cells_arrays()
assign = ai.cell_assignment(order, offsets)
sizes = np.diff(offsets)
Q = np.asarray(job["embeddings"], dtype=np.float32)
src = np.asarray(job["sources"])
rng = np.random.default_rng(7)
cq, owners, kinds = ai.calibration_queries(emb, rng, 1024)
allq = np.concatenate([Q, cq])
allowners = np.concatenate([np.full((len(Q), 2), -1), owners])
t = time.time()
truths_q = ai.pool_neighbours(emb, Q, np.zeros((len(Q), 0), dtype=np.int64), 200)
truths_c = ai.pool_neighbours(emb, cq, owners, 200, store.doc_ids)
print("truths", time.time() - t, flush=True)
np.savez("../research/adaptive_truths.npz", truths_q=truths_q, truths_c=truths_c, cq=cq, kinds=kinds, owners=owners)
