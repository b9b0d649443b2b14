"""Process-wide caches that keep compiles and benchmarks cheap: the embedding model is loaded once, vectors
are served from memory before the disk cache, demo costs are formatted and counted once per counter."""

import dspy
import numpy as np
import pytest
from helpers import HashingEmbedder, WordCounter

from knapsack_dspy import embeddings
from knapsack_dspy.embeddings import TextEmbedder
from knapsack_dspy.memo import BoundedMemo
from knapsack_dspy.modules.prompt_cost import PromptCostModel


class RecordingModel:
    def __init__(self):
        self.batches = []
        self._vectors = HashingEmbedder()

    def encode(self, texts, **_kwargs):
        self.batches.append(list(texts))
        return self._vectors.encode(texts)


@pytest.fixture()
def fresh_process_caches(monkeypatch):
    monkeypatch.setattr(embeddings, "_models", {})
    monkeypatch.setattr(embeddings, "_memo", BoundedMemo(embeddings.MEMORY_CACHE_ENTRIES))


def test_every_embedder_of_a_process_shares_one_loaded_model(tmp_path, monkeypatch, fresh_process_caches):
    loads = []
    monkeypatch.setattr(TextEmbedder, "_load_source", lambda self, source: loads.append(source) or RecordingModel())
    first = TextEmbedder(model=str(tmp_path), cache_dir=tmp_path / "a")
    second = TextEmbedder(model=str(tmp_path), cache_dir=tmp_path / "b")
    first.encode(["alpha"])
    second.encode(["beta"])
    assert loads == [str(tmp_path)]
    assert first._model is second._model


def test_vectors_are_served_from_memory_before_the_disk_cache(tmp_path, fresh_process_caches):
    model = RecordingModel()
    embedder = TextEmbedder(model="recording", cache_dir=tmp_path / "emb")
    embedder._model = model
    first = embedder.encode(["net income", "total assets"])

    def disk_is_gone(*_args, **_kwargs):
        raise AssertionError("the disk cache was consulted")

    embedder._get_cache().get = disk_is_gone
    again = TextEmbedder(model="recording", cache_dir=tmp_path / "emb")  # e.g. another pipeline's embedder
    again._cache = embedder._get_cache()
    np.testing.assert_array_equal(again.encode(["total assets", "net income"]), first[::-1])
    assert model.batches == [["net income", "total assets"]]


def test_the_memory_layer_is_keyed_on_the_model_too(tmp_path, fresh_process_caches):
    one, other = RecordingModel(), RecordingModel()
    a = TextEmbedder(model="model-a", cache_dir=tmp_path / "emb")
    b = TextEmbedder(model="model-b", cache_dir=tmp_path / "emb")
    a._model, b._model = one, other
    a.encode(["revenue"])
    b.encode(["revenue"])
    assert one.batches == [["revenue"]] and other.batches == [["revenue"]]


class CountingCounter(WordCounter):
    def __init__(self, per_message=4):
        self.calls = 0
        self.per_message = per_message

    def count_messages(self, messages):
        self.calls += 1
        return 3 + sum(self.per_message + len(str(m.get("content", "")).split()) for m in messages)


class QA(dspy.Signature):
    """Answer."""

    question: str = dspy.InputField()
    answer: str = dspy.OutputField()


def test_demo_costs_are_counted_once_per_counter_across_cost_models():
    demo = {"question": "What was the revenue in 2019 and 2018?", "answer": "12"}
    counter = CountingCounter()
    first = PromptCostModel(QA, counter).demo_cost(demo)
    calls = counter.calls
    assert PromptCostModel(QA, counter).demo_cost(dict(demo)) == first  # a new compile, the same pool
    assert counter.calls == calls + 1  # only the new cost model's anchor was counted
    other = CountingCounter(per_message=10)  # another tokenizer: its own count, never the cached one
    assert PromptCostModel(QA, other).demo_cost(demo) == first + 2 * 6
    assert PromptCostModel(QA, counter).demo_cost({**demo, "answer": "13 14"}) == first + 1


def test_bounded_memo_drops_the_least_recently_used_and_counts():
    memo = BoundedMemo(2)
    assert memo.get_or_compute("a", lambda: 1) == 1
    memo.put("b", 2)
    assert memo.get("a") == 1  # "a" is now the most recent
    memo.put("c", 3)  # evicts "b"
    assert memo.get("b") is None and memo.get("c") == 3
    assert memo.get_or_compute("a", lambda: pytest.fail("recomputed")) == 1
    assert memo.info == {"hits": 3, "misses": 2, "size": 2}
    with pytest.raises(ValueError):
        BoundedMemo(0)


def test_query_prompt_sizes_are_remembered_per_counter():
    counter = CountingCounter()
    inputs = {"question": "How many employees were there?"}
    first = PromptCostModel(QA, counter).base_tokens(inputs)
    calls = counter.calls
    assert PromptCostModel(QA, counter).base_tokens(dict(inputs)) == first
    assert counter.calls == calls + 1  # the anchor of the new cost model only
    assert PromptCostModel(QA, CountingCounter(per_message=10)).base_tokens(inputs) > first


def test_rendered_demos_are_shared_by_pipelines_with_the_same_settings(monkeypatch, tmp_path):
    from knapsack_dspy.disk_memo import DiskMemo
    from knapsack_dspy.docqa import tasks
    from knapsack_dspy.docqa.pipelines import pipeline

    monkeypatch.setenv("KDSPY_CACHE_DIR", str(tmp_path / "cache"))  # nothing rendered by an earlier test or run
    monkeypatch.setattr(pipeline, "_rendered_demos", BoundedMemo(100))
    monkeypatch.setattr(pipeline, "_rendered_demos_on_disk", DiskMemo("rendered_demos"))
    rendered = []
    original = pipeline._Pipeline.render_demo

    def counting(self, example, solver=None):
        rendered.append(example["id"])
        return original(self, example, solver)

    monkeypatch.setattr(pipeline._Pipeline, "render_demo", counting)
    example = dspy.Example(id="e1", question="What was revenue in 2019?", table=[["", "2019"], ["Revenue", "5"]],
                           paragraphs=["a", "b", "c", "d"], answer=["5"], answer_type="span", scale="",
                           derivation="", modality="table")
    embedder = HashingEmbedder()
    make = lambda top_n, selector="seer": tasks.build_pipeline(  # noqa: E731
        "tatqa", "few_shot", selector=selector, embedder=embedder, token_counter=WordCounter(), top_n_paragraphs=top_n)
    first = make(3).render_demo(example)
    second = make(3, selector="kate").render_demo(example)  # a suite's next selector: the same demos
    assert first == second and rendered == ["e1"]
    second["answer"] = "changed"  # callers get their own copy
    assert make(3).render_demo(example)["answer"] != "changed"
    make(1).render_demo(example)  # other retrieval settings: rendered anew
    assert rendered == ["e1", "e1"]
