"""Measuring a pool at scale (issue 25): token costs counted in batches give the one-at-a-time counts, a local
model's batch asks its server only for unknown counts, and embedding caches each chunk as it goes (an
interrupted run resumes)."""

import os
from pathlib import Path

import numpy as np
import pytest

from knapsack_dspy import embeddings as embeddings_module
from knapsack_dspy.data import load_examples
from knapsack_dspy.embeddings import TextEmbedder
from knapsack_dspy.llm.token_counter import LiteLLMTokenCounter, LocalTokenCounter
from knapsack_dspy.modules.compiled_programs import predictor_at
from knapsack_dspy.modules.pipeline import build_pipeline
from knapsack_dspy.modules.prompt_cost import PromptCostModel, pinned_adapter

FIXTURE = Path(__file__).parent / "fixtures" / "data_tatqa_small.json"


def real_demos():
    """TAT-QA demos (the fixture's six real questions, tables and paragraphs) as the program-of-thought solver
    shows them."""
    examples = list(load_examples("tatqa", path=FIXTURE))
    student = build_pipeline("tatqa", "pot", route=None, model="openai/gpt-4o-mini")
    name = student.demo_predictor_name
    demos = [d for d in (student.demo_for(name, ex) for ex in examples) if d is not None]
    return predictor_at(student, name).signature, [dict(d) for d in demos]


def test_batched_costs_equal_the_one_at_a_time_costs_on_real_demos():
    signature, demos = real_demos()
    assert len(demos) >= 6
    adapter = pinned_adapter()
    # two counters: separate memos, so the batched path counts everything itself
    one = PromptCostModel(signature, LiteLLMTokenCounter("openai/gpt-4o-mini"), adapter)
    many = PromptCostModel(signature, LiteLLMTokenCounter("openai/gpt-4o-mini"), adapter)
    expected = [one.demo_cost(d) for d in demos]
    assert many.demo_costs(demos, batch_size=4) == expected
    assert many.demo_costs(demos) == expected  # now from the memo
    assert len(set(expected)) > 1


class StubServer:
    """A local model server's counting endpoints (characters as tokens), counting requests."""

    def __init__(self):
        self.requests = 0

    def apply_template(self, messages):
        self.requests += 1
        return "".join(f"<{m['role']}>{m['content']}" for m in messages)

    def tokenize(self, text):
        return list(range(len(text)))


def test_a_local_models_batch_counts_as_one_at_a_time_and_asks_only_for_unknown_counts(tmp_path, monkeypatch):
    server = StubServer()
    counter = LocalTokenCounter("local/qwen2.5-coder-0.5b-instruct", cache_dir=tmp_path)
    monkeypatch.setattr(counter, "_get_server", lambda: server)
    batch = [[{"role": "user", "content": f"question {i}" * (i + 1)}] for i in range(30)]
    fresh = LocalTokenCounter("local/qwen2.5-coder-0.5b-instruct", cache_dir=tmp_path / "other")
    monkeypatch.setattr(fresh, "_get_server", lambda: StubServer())
    expected = [fresh._count_messages(m) for m in batch]
    assert counter.count_messages_batch(batch[:10]) == expected[:10] and server.requests == 10
    assert counter.count_messages_batch(batch) == expected and server.requests == 30  # 20 new ones asked
    again = LocalTokenCounter("local/qwen2.5-coder-0.5b-instruct", cache_dir=tmp_path)
    monkeypatch.setattr(again, "_get_server", lambda: pytest.fail("the counts are on disk"))
    assert again.count_messages_batch(batch) == expected


class FlakyModel:
    """A sentence encoder that fails on its ``fail_on``-th call (an interrupted run), counting texts."""

    def __init__(self, fail_on=None):
        self.fail_on, self.calls, self.texts = fail_on, 0, 0

    def encode(self, texts, **kwargs):
        self.calls += 1
        if self.calls == self.fail_on:
            raise KeyboardInterrupt
        self.texts += len(texts)
        return np.asarray([[float(len(t)), 1.0] for t in texts]) / np.sqrt(
            np.asarray([[len(t) ** 2 + 1.0] for t in texts]))


def test_embedding_caches_each_chunk_so_an_interrupted_run_resumes(tmp_path, monkeypatch):
    monkeypatch.setattr(embeddings_module, "ENCODE_CHUNK", 4)
    texts = [f"text number {i}" + "x" * i for i in range(10)]
    model_id = f"flaky-model-{os.getpid()}-{tmp_path.name}"  # keys of its own in the process memo
    first = TextEmbedder(model_id, cache_dir=tmp_path)
    monkeypatch.setattr(first, "_load", lambda: FlakyModel(fail_on=3))
    with pytest.raises(KeyboardInterrupt):
        first.encode(texts)
    second = TextEmbedder(model_id, cache_dir=tmp_path)
    model = FlakyModel()
    monkeypatch.setattr(second, "_load", lambda: model)
    vectors = second.encode(texts, progress=True)
    assert model.texts == 2  # the first two chunks (8 texts) were cached before the interruption
    assert vectors.shape == (10, 2) and np.allclose(np.linalg.norm(vectors, axis=1), 1.0)
