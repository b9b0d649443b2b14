"""One pool specification for ``SelectExemplars.fit`` and ``update_pool``: a ``PoolSpec`` and the short keyword form
build the same selection; a spec that does not hold together is one ``ValueError`` naming the field."""

import dspy
import pytest
from helpers import HashingEmbedder

from knapsack_dspy.modules.pool_spec import PoolSpec, as_pool_spec
from knapsack_dspy.modules.select_exemplars import SelectExemplars

FIELDS = dict(input_fields=["question"], signature_fields=["question", "answer"])


def qa(start: int, n: int, prefix: str = "q"):
    examples = [dspy.Example(id=f"{prefix}{i}", doc_id=f"d{i // 3}", answer=str(i),
                             question=f"what is item {i} worth in {i % 7} units",
                             label="even" if i % 2 == 0 else "odd").with_inputs("question")
                for i in range(start, start + n)]
    return examples, [{"question": e.question, "answer": e.answer} for e in examples]


def by_label(example):
    return example.label.upper()


def fitted(*args, **keywords) -> SelectExemplars:
    select = SelectExemplars(selector="kate", max_exemplars=2, attributes=("label",), attribute_source="gold",
                             embedder=HashingEmbedder())
    return select.fit(*args, budget=1000, **FIELDS, **keywords)


def test_a_spec_and_the_short_form_fit_and_update_the_same_pool():
    examples, demos = qa(0, 12)
    costs = [10.0 + i for i in range(12)]
    inputs = [{"question": f"asked as {e.id}"} for e in examples]
    ids = [f"p{i}" for i in range(12)]
    short = fitted(examples, demos, costs, ids=ids, attributes={"label": by_label}, query_inputs=inputs)
    spec = fitted(PoolSpec(examples, demos, costs, ids=ids, attributes={"label": by_label}, query_inputs=inputs))
    assert spec.dump_state() == short.dump_state()
    assert spec.pool_ids == ids and list(spec.pool_attributes["label"][:2]) == ["EVEN", "ODD"]

    added, added_demos = qa(12, 3, prefix="n")
    asked = [{"question": f"asked as {e.id}"} for e in added]
    done_short = short.update_pool(added, added_demos, ["p1"], measure=lambda d: [7.0] * len(d),
                                   attributes={"label": by_label}, add_inputs=asked)
    done_spec = spec.update_pool(PoolSpec(added, added_demos, attributes={"label": by_label}, query_inputs=asked),
                                 remove_ids=["p1"], measure=lambda d: [7.0] * len(d))
    assert done_spec == done_short == {"embedded": 3, "measured": 3, "size": 14}
    assert spec.dump_state() == short.dump_state()
    assert spec.pool_ids[-3:] == ["n12", "n13", "n14"] and spec.pool_attributes["label"][-1] == "EVEN"
    # the query that is an added exemplar (its inputs as a query give them) never selects it
    assert "n13" not in spec(question="asked as n13", label="odd").ids


def test_a_spec_is_a_frozen_copy_checked_field_by_field():
    examples, demos = qa(0, 3)
    spec = PoolSpec(examples, demos, [1, 2, 3], ids=[7, 8, 9])
    assert spec.costs == (1.0, 2.0, 3.0) and spec.ids == ("7", "8", "9") and len(spec) == 3
    demos[0]["answer"] = "changed later"
    assert spec.demos[0]["answer"] == "0"
    with pytest.raises(AttributeError):
        spec.costs = ()
    with pytest.raises(ValueError, match="the pool's costs has 2 entries for 3 examples"):
        PoolSpec(examples, demos, [1.0, 2.0])
    with pytest.raises(ValueError, match="the pool's query_inputs has 1 entries for 3 examples"):
        PoolSpec(examples, demos, query_inputs=[None])
    with pytest.raises(TypeError, match="give a PoolSpec alone"):
        as_pool_spec(spec, demos)


def test_fit_and_update_pool_say_what_their_spec_lacks_or_has_too_much():
    examples, demos = qa(0, 6)
    with pytest.raises(ValueError, match="fit needs the pool's token costs"):
        fitted(PoolSpec(examples, demos))
    with pytest.raises(ValueError, match="the exemplar pool is empty"):
        fitted(PoolSpec([], [], []))
    select = fitted(examples, demos, [5.0] * 6)
    added, added_demos = qa(6, 1)
    with pytest.raises(ValueError, match="update_pool measures the added demos itself"):
        select.update_pool(PoolSpec(added, added_demos, [3.0]), measure=lambda d: [1.0] * len(d))
    with pytest.raises(TypeError, match="after a PoolSpec, name remove_ids"):
        select.update_pool(PoolSpec(added, added_demos), ["q0"], measure=lambda d: [1.0] * len(d))
    with pytest.raises(TypeError, match="add_inputs or query_inputs, not both"):
        select.update_pool(added, added_demos, measure=lambda d: [1.0] * len(d), add_inputs=[None],
                           query_inputs=[None])
    with pytest.raises(TypeError):
        fitted(examples, demos, [5.0] * 6, unknown_field=1)
