"""Folds cut a split in two halves by document (cross-fitting on a pool alone): no document in both, every record
in one, the same on every machine, independent of the pool / eval cut."""

import pytest

from knapsack_dspy.docqa.data import load_examples
from knapsack_dspy.docqa.data.document_parts import FOLDS, document_fold, document_part, in_part


def test_a_document_is_in_exactly_one_fold_and_the_rule_is_fixed():
    ids = [f"doc-{k}" for k in range(400)]
    assert all(sum(in_part(d, fold) for fold in FOLDS) == 1 for d in ids)
    assert [document_fold(d) for d in ("a", "b", "c", "d")] == [document_fold(d) for d in ("a", "b", "c", "d")]
    share = sum(document_fold(d) == "fold0" for d in ids) / len(ids)
    assert 0.4 < share < 0.6
    # salted: the folds do not follow the pool / eval cut
    pool_docs = [d for d in ids if document_part(d) == "pool"]
    assert 0.35 < sum(document_fold(d) == "fold0" for d in pool_docs) / len(pool_docs) < 0.65
    with pytest.raises(ValueError, match="unknown part 'fold2'"):
        in_part("a", "fold2")


def test_the_tatqa_pool_halves_split_dev_pool_by_document():
    halves = [load_examples("tatqa", split=f"dev_pool_{fold}") for fold in FOLDS]
    whole = load_examples("tatqa", split="dev_pool")
    docs = [{ex.doc_id for ex in half} for half in halves]
    assert not docs[0] & docs[1]
    assert sorted(ex.id for half in halves for ex in half) == sorted(ex.id for ex in whole)
    assert (len(halves[0]), len(halves[1])) == (600, 564)
