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

**Folds** cut one split in two halves by document for cross-fitting on a pool alone (a setting chosen on one half's
questions against the other half as their pool, and the other way round): a record is in ``fold0`` when
``int(sha256("fold:" + doc_id), 16) % 2 == 0``, else in ``fold1`` (salted, so that it is independent of the
pool / eval cut). TAT-QA offers ``dev_pool_fold0`` / ``dev_pool_fold1``.
"""

from __future__ import annotations

import hashlib

__all__ = ["EVAL_SHARE", "FOLDS", "PARTS", "document_fold", "document_part", "in_part"]

EVAL_SHARE = 30  # percent of documents in the eval part
PARTS = ("pool", "eval")
FOLDS = ("fold0", "fold1")


def document_part(doc_id: str) -> str:
    """``"eval"`` or ``"pool"`` for a document id (deterministic, the same on every machine)."""
    bucket = int(hashlib.sha256(str(doc_id).encode("utf-8")).hexdigest(), 16) % 100
    return "eval" if bucket < EVAL_SHARE else "pool"


def document_fold(doc_id: str) -> str:
    """``"fold0"`` or ``"fold1"`` for a document id (see the module docstring)."""
    return FOLDS[int(hashlib.sha256(f"fold:{doc_id}".encode()).hexdigest(), 16) % 2]


def in_part(doc_id: str, part: str) -> bool:
    """Whether a document is in ``part`` (``"pool"`` / ``"eval"``, or a fold)."""
    if part in FOLDS:
        return document_fold(doc_id) == part
    if part not in PARTS:
        raise ValueError(f"unknown part {part!r}; parts: {', '.join(PARTS + FOLDS)}")
    return document_part(doc_id) == part
