# ruff: noqa: E402, E741  (diagnostic scripts as they were run; see README.md)
import glob
import time

import numpy as np

from knapsack_dspy.selection import ann_index, pool_store

faiss = ann_index.faiss_module()
path = glob.glob("../research/ps_store/*")[0]
store = pool_store.open_store(path)
flat = store.index()
emb = np.asarray(store.embeddings)
cent = flat.centroids.astype(np.float32)
order, offsets = flat._cells_arrays()
d = emb.shape[1]
q = faiss.IndexFlatIP(d)
q.add(cent)
idx = faiss.IndexIVFScalarQuantizer(q, d, len(cent), faiss.ScalarQuantizer.QT_8bit, faiss.METRIC_INNER_PRODUCT, False)
idx.own_fields = True
q.this.disown()
rng = np.random.default_rng(0)
sample = emb[rng.choice(len(emb), 100_000, replace=False)]
t = time.time()
idx.sq.train(sample)
print("sq train", time.time() - t, idx.code_size)
idx.is_trained = True
lists = idx.invlists
t = time.time()
for cell in range(len(cent)):
    s, e = int(offsets[cell]), int(offsets[cell + 1])
    if e > s:
        ids = np.ascontiguousarray(order[s:e], dtype=np.int64)
        codes = idx.sq.compute_codes(np.ascontiguousarray(emb[ids]))
        lists.add_entries(cell, e - s, faiss.swig_ptr(ids), faiss.swig_ptr(codes))
idx.ntotal = len(emb)
print("add", time.time() - t)
qs = emb[rng.choice(len(emb), 300)] + 0.3 * rng.standard_normal((300, d)).astype(np.float32) / np.sqrt(d) * 10
qs /= np.linalg.norm(qs, axis=1, keepdims=True)
for name, index in (("flat", flat.index), ("sq8", idx)):
    params = faiss.SearchParametersIVF(nprobe=41)
    ts = []
    res = []
    for qq in qs:
        s = time.perf_counter()
        D, I = index.search(qq.reshape(1, -1).astype(np.float32), 400, params=params)
        ts.append(time.perf_counter() - s)
        res.append(I[0])
    print(name, "median ms", round(1e3 * np.median(ts), 3))
    if name == "flat":
        ref = res
    else:
        # exact rerank of sq8 400 -> top200 vs flat top200
        rec = []
        for qq, a, b in zip(qs, ref, res, strict=False):
            ta = a[:200]
            b = b[b >= 0]
            v = emb[b] @ qq
            tb = b[np.argsort(-v)[:200]]
            rec.append(len(set(ta) & set(tb)) / 200)
        print("sq8+rerank vs flat top200 agreement", np.mean(rec), np.min(rec))
faiss.write_index(idx, "../research/sq8.faiss")
import os

print("file MB", os.path.getsize("../research/sq8.faiss") / 1e6)
