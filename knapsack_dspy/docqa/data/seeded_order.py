"""A question order fixed by a seed: the same on every machine and Python version, whatever the file order.

``seeded_order(ids, seed, groups)`` sorts the groups (documents) by ``sha256(f"{seed}:{group}")`` and the ids of
one group by ``sha256(f"{seed}:{id}")``: a shuffle that depends only on the seed and the ids, not on ``random``'s
algorithm or the order the ids come in; adding or removing one id moves no other. The questions of one document
stay together, so a prefix of the order (questions 1-60) shares at most one document with the rest (61-150): the
rest stays unread when the prefix's documents are read. Without ``groups`` every id is its own group.

A suite uses it with ``order_seed`` (``RunSpec``): the eval split's questions in ``in_seeded_order`` (grouped by
``doc_id``), before ``example_ids`` and ``limit`` pick from them, so ``limit = 60`` is the first 60 of the order
and ``limit = 150`` the same 60 and 90 more.

The FinQA tuning questions (issue 26): ``dev_docs_tune`` (304 questions on 104 pages) in the order of seed
``FINQA_TUNING_SEED``, its first ``FINQA_TUNING_QUESTIONS`` (150) fixed before the first LM call; questions
1-``FINQA_TUNING_READ`` (60) may be read during development, 61-150 are kept unread (the clean result).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence

__all__ = ["FINQA_TUNING_QUESTIONS", "FINQA_TUNING_READ", "FINQA_TUNING_SEED", "in_seeded_order", "seeded_order"]

FINQA_TUNING_SEED = 26
FINQA_TUNING_QUESTIONS = 150
FINQA_TUNING_READ = 60


def _rank(seed: int, key: str) -> str:
    return hashlib.sha256(f"{int(seed)}:{key}".encode()).hexdigest()


def seeded_order(ids: Iterable[str], seed: int, groups: Iterable[str] | None = None) -> list[str]:
    """``ids`` (distinct) in the order fixed by ``seed``; ``groups[i]`` (e.g. the document of ``ids[i]``) keeps the
    ids of one group together."""
    ids = [str(i) for i in ids]
    if len(set(ids)) != len(ids):
        raise ValueError("seeded_order: the ids are not distinct")
    group_of = dict(zip(ids, ids, strict=True) if groups is None else zip(ids, map(str, groups), strict=True))
    return sorted(ids, key=lambda item_id: (_rank(seed, group_of[item_id]), group_of[item_id],
                                            _rank(seed, item_id), item_id))


def in_seeded_order(examples: Sequence, seed: int) -> list:
    """``examples`` (with distinct ``id``) in ``seeded_order``, the questions of one ``doc_id`` together."""
    by_id = {str(example.get("id")): example for example in examples}
    order = seeded_order([str(example.get("id")) for example in examples], seed,
                         [str(example.get("doc_id") or example.get("id")) for example in examples])
    return [by_id[item_id] for item_id in order]
