"""Splitting one file of records into two parts by document, so that no document is in both.

``finqa/train_docs.json.gz`` is one file; a suite that draws its exemplar pool and its questions from it needs
two parts with no document in common (a question's own page must not be shown as an exemplar's). As the data
directory's TAT-QA ``dev_pool`` / ``dev_tune`` were cut by table (``int(sha256(table uid)) % 100 < 30`` ->
``dev_tune``), a record goes to the **eval** part when ``int(sha256(doc_id), 16) % 100 < 30``, else to the
**pool** part. ``doc_id`` is the source page (FinQA: ``filename``, ``"BKR/2018/page_51.pdf"``), so every
question about one page lands in the same part. The loader offers the parts as splits (``DatasetSpec.parts``):
``train_docs_pool`` / ``train_docs_eval``, ``dev_docs_pool`` / ``dev_docs_tune`` (the eval part of
``finqa/dev_docs.json.gz``, named as TAT-QA's ``dev_tune``: it is for tuning) and ``docs_pool`` (all of
``train_docs`` and ``dev_docs_pool``: every FinQA page with a document that no tuning question is about).
"""

from __future__ import annotations

import hashlib

__all__ = ["EVAL_SHARE", "PARTS", "document_part"]

EVAL_SHARE = 30  # percent of documents in the eval part
PARTS = ("pool", "eval")


def document_part(doc_id: str) -> str:
    """``"eval"`` or ``"pool"`` for a document id (deterministic, the same on every machine)."""
    bucket = int(hashlib.sha256(str(doc_id).encode("utf-8")).hexdigest(), 16) % 100
    return "eval" if bucket < EVAL_SHARE else "pool"
