"""Pool stores: a large pool saved beside the compiled program, referenced by a content hash (issue 25)."""

import json
import shutil
from pathlib import Path

import dspy
import numpy as np
import pytest
from helpers import HashingEmbedder, WordCounter

from knapsack_dspy.docqa.data import load_examples
from knapsack_dspy.docqa.pipelines.pipeline import load_program, save_program
from knapsack_dspy.docqa.tasks import build_pipeline
from knapsack_dspy.saved_format import SELECT_EXEMPLARS_STATE_VERSION as STATE_VERSION
from knapsack_dspy.selection import ann_index, pool_store
from knapsack_dspy.selection.pool_store import PoolRecord, PoolStoreError, extend_store, write_store
from knapsack_dspy.teleprompt import KnapsackFewShot

FIXTURE = Path(__file__).parents[1] / "fixtures" / "data_tatqa_small.json"


@pytest.fixture
def cache(tmp_path, monkeypatch):
    root = tmp_path / "cache"
    monkeypatch.setenv("KDSPY_CACHE_DIR", str(root))
    return root


def compile_tatqa(limit: int, monkeypatch, **settings):
    """The TAT-QA fixture's pool (6 questions) compiled with the inline limit at ``limit``."""
    monkeypatch.setattr(pool_store, "INLINE_POOL_LIMIT", limit)
    examples = list(load_examples("tatqa", path=FIXTURE))
    student = build_pipeline("tatqa", "pot", route=None, selector="seer", max_exemplars=2,
                             embedder=HashingEmbedder(), token_counter=WordCounter(), model="openai/gpt-4o-mini",
                             **settings)
    program = KnapsackFewShot(budget=3000, token_counter=WordCounter(), progress=False).compile(
        student, trainset=examples)
    return program, examples


def kept(info):
    return {k: v for k, v in info.items() if k != "selection_ms"}


def selections(program, examples):
    return [kept(program.select_for(e)) for e in examples]


def test_a_large_pool_is_a_store_beside_the_program_and_a_copy_loads_with_an_empty_cache(tmp_path, cache,
                                                                                          monkeypatch):
    program, examples = compile_tatqa(3, monkeypatch)
    select = program.select
    assert select.store is not None and select.store.path.parent == cache / "pool_stores"
    before = selections(program, examples)
    save_program(program, tmp_path / "run" / "program.json")
    state = json.loads((tmp_path / "run" / "program.json").read_text())
    selection = state[program.demo_predictor_name]["selection"]
    assert selection["version"] == STATE_VERSION == 5
    assert "pool" not in selection and selection["pool_store"] == {"hash": select.store.hash, "size": 6}
    assert "demos" not in json.dumps(selection)  # the program file holds no demo: its size is not the pool's
    assert (tmp_path / "run" / "pools" / select.store.hash / "manifest.json").is_file()

    shutil.copytree(tmp_path / "run", tmp_path / "elsewhere")
    shutil.rmtree(tmp_path / "run")
    monkeypatch.setenv("KDSPY_CACHE_DIR", str(tmp_path / "empty_cache"))  # a fresh machine's cache
    loaded = load_program(tmp_path / "elsewhere" / "program.json", embedder=HashingEmbedder(),
                          token_counter=WordCounter())
    assert loaded.select.store.path == tmp_path / "elsewhere" / "pools" / select.store.hash
    assert selections(loaded, examples) == before
    assert loaded.select.demos[0] == select.demos[0]  # a demo read from the store, on demand
    for k, demo in enumerate(select.demos):  # a query with a pool demo's inputs never selects it
        assert loaded.select.same_inputs_ids(demo) == {select.pool_ids[k]}


def test_the_compile_report_says_how_candidates_are_searched(cache, monkeypatch):
    program, _ = compile_tatqa(pool_store.INLINE_POOL_LIMIT, monkeypatch)
    report = program.compile_report["predictors"][program.demo_predictor_name]
    assert report["candidate_search"] == "the 200 nearest by exact search (a pool of 6; an index from 50,000 exemplars)"
    monkeypatch.setattr(ann_index, "ANN_MIN_POOL", 3)  # the fixture's pool of 6 counts as large: a store, an index
    program, _ = compile_tatqa(3, monkeypatch, knn_k=4)
    report = program.compile_report["predictors"][program.demo_predictor_name]
    backend = ann_index.default_backend()
    assert program.select.store.manifest["index_backend"] == backend
    assert report["candidate_search"].startswith(
        f"the 4 nearest and the {ann_index.CHEAP_RESERVE} cheapest of the rest it fetched, by the IVF index, "
        f"{backend} backend: ")
    program, _ = compile_tatqa(3, monkeypatch, knn_k=200)  # beyond the k the index was calibrated for (5)
    report = program.compile_report["predictors"][program.demo_predictor_name]
    assert report["candidate_search"] == "the 200 nearest by exact search (the index is calibrated for the 5 nearest)"


def test_the_real_suites_pools_stay_inline(cache, monkeypatch):
    program, _ = compile_tatqa(pool_store.INLINE_POOL_LIMIT, monkeypatch)
    state = program.select.dump_state()
    assert program.select.store is None and "pool_store" not in state and len(state["pool"]["demos"]) == 6
    assert pool_store.INLINE_POOL_LIMIT >= 13_215  # SEER's TAT-QA pool, the largest real one
    assert not (cache / "pool_stores").exists()


def test_a_version_4_state_still_loads(cache, monkeypatch):
    program, examples = compile_tatqa(pool_store.INLINE_POOL_LIMIT, monkeypatch)
    state = program.dump_state()
    name = program.demo_predictor_name
    for key in state:
        if isinstance(state[key], dict) and "selection" in state[key]:
            state[key]["selection"]["version"] = 4  # the layout before pool stores: "pool" inline
    from knapsack_dspy.docqa.pipelines.pipeline import program_from_state

    loaded = program_from_state(state, embedder=HashingEmbedder(), token_counter=WordCounter())
    assert name and selections(loaded, examples) == selections(program, examples)


@pytest.mark.parametrize("damage", ["missing", "costs", "manifest", "truncated"])
def test_a_missing_or_altered_store_is_one_clear_error(tmp_path, cache, monkeypatch, damage):
    program, _ = compile_tatqa(3, monkeypatch)
    path = tmp_path / "program.json"
    save_program(program, path)
    shutil.rmtree(cache / "pool_stores")  # only the copy beside the program is left
    store = tmp_path / "pools" / program.select.store.hash
    if damage == "missing":
        shutil.rmtree(store)
    elif damage == "costs":  # same size, one value changed
        costs = np.load(store / "costs.npy")
        costs[0] += 1
        (store / "costs.npy").unlink()  # a hard link to the cache's copy: write a new file
        np.save(store / "costs.npy", costs)
    elif damage == "manifest":
        manifest = json.loads((store / "manifest.json").read_text())
        manifest["embedder"] = "another-model"
        (store / "manifest.json").write_text(json.dumps(manifest))
    else:
        data = (store / "records.jsonl").read_bytes()
        (store / "records.jsonl").unlink()
        (store / "records.jsonl").write_bytes(data[:-10])
    with pytest.raises(PoolStoreError) as info:
        load_program(path, embedder=HashingEmbedder(), token_counter=WordCounter())
    message = str(info.value)
    assert message.startswith(f"pool store {program.select.store.hash[:16]}") and "\n" not in message
    assert len(message) <= 400
    expected = {"missing": "not found", "costs": "costs.npy was altered", "manifest": "manifest.json was altered",
                "truncated": "records.jsonl has"}[damage]
    assert expected in message
    if damage == "missing":  # a selection asked to load a state whose store is gone is left as it was
        select = program.select
        before = (select.store, select.config, len(select.pool()))
        state = select.dump_state()
        state["pool_store"] = {**state["pool_store"], "hash": "0" * 64}
        with pytest.raises(PoolStoreError):
            select.load_state(state)
        assert (select.store, select.config, len(select.pool())) == before


def test_the_cli_reports_a_missing_store_in_one_line(tmp_path, cache, monkeypatch):
    from argparse import Namespace

    from knapsack_dspy.cli.common import load_program_and_lm
    from knapsack_dspy.cli.main import UserError

    program, _ = compile_tatqa(3, monkeypatch)
    save_program(program, tmp_path / "program.json")
    shutil.rmtree(cache / "pool_stores")
    shutil.rmtree(tmp_path / "pools")
    with pytest.raises(UserError, match=r"pool store [0-9a-f]{16}: not found \(searched "):
        load_program_and_lm(Namespace(program=str(tmp_path / "program.json"), lm=None))


def test_a_store_backed_program_round_trips_through_dspy_load(tmp_path, cache, monkeypatch):
    program, examples = compile_tatqa(3, monkeypatch)
    program.save(str(tmp_path / "whole"), save_program=True)
    loaded = dspy.load(str(tmp_path / "whole"), allow_pickle=True)
    assert loaded.select.store.hash == program.select.store.hash
    assert [kept(loaded.select_for(e)) for e in examples] == selections(program, examples)


def records(n: int, start: int = 0) -> list[PoolRecord]:
    return [PoolRecord(f"q{i}", {"question": f"question {i}", "answer": str(i)}, f"d{i % 7}", f"question {i}",
                       attributes={"modality": "table" if i % 2 else "text"}) for i in range(start, start + n)]


def vectors(n: int, dim: int = 8, seed: int = 0) -> np.ndarray:
    x = np.random.default_rng(seed).normal(size=(n, dim)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def test_the_hash_covers_the_records_the_embedder_and_the_prompt_format(tmp_path):
    base = dict(embeddings=vectors(5), costs=np.arange(5.0))
    a = write_store(tmp_path, records(5), embedder="e1", prompt_format="p1", **base)
    assert write_store(tmp_path, records(5), embedder="e1", prompt_format="p1", **base).hash == a.hash
    assert write_store(tmp_path, records(5), embedder="e2", prompt_format="p1", **base).hash != a.hash
    assert write_store(tmp_path, records(5), embedder="e1", prompt_format="p2", **base).hash != a.hash
    changed = records(5)
    changed[2] = PoolRecord("q2", {"question": "another", "answer": "2"}, "d2", "question 2")
    assert write_store(tmp_path, changed, embedder="e1", prompt_format="p1", **base).hash != a.hash
    # the same records measured or embedded otherwise are another store, never the old one reused
    recosted = write_store(tmp_path, records(5), embedder="e1", prompt_format="p1", embeddings=vectors(5),
                           costs=np.arange(5.0) * 10)
    assert recosted.hash != a.hash and list(recosted.costs) == [0.0, 10.0, 20.0, 30.0, 40.0]
    assert write_store(tmp_path, records(5), embedder="e1", prompt_format="p1", embeddings=vectors(5, seed=1),
                       costs=np.arange(5.0)).hash != a.hash
    assert write_store(tmp_path, records(5), embedder="e1", prompt_format="p1", index=True, **base).hash != a.hash
    assert a.record(3)["demo"] == {"question": "question 3", "answer": "3"}
    assert list(a.column("embed_text"))[:2] == ["question 0", "question 1"]
    assert np.array_equal(np.asarray(a.embeddings), base["embeddings"]) and a.attributes["modality"][1] == "table"
    a.verify()


class CountingEmbedder:
    """Counts the texts it embeds (the pool store's incremental update must ask only for new ones)."""

    def __init__(self):
        self.texts = 0

    def __call__(self, texts):
        self.texts += len(texts)
        return vectors(len(texts), seed=self.texts)


def test_adding_1000_exemplars_embeds_and_measures_exactly_1000(tmp_path):
    embed, measured = CountingEmbedder(), []

    def measure(demos):
        measured.extend(demos)
        return [float(len(d["question"])) for d in demos]

    base, done = extend_store(tmp_path, None, records(2000), embed=embed, measure=measure, embedder="e",
                              prompt_format="p")
    assert done == {"embedded": 2000, "measured": 2000} and embed.texts == 2000
    embed.texts, measured[:] = 0, []
    grown, done = extend_store(tmp_path, base, records(3000), embed=embed, measure=measure, embedder="e",
                               prompt_format="p")
    assert embed.texts == 1000 and len(measured) == 1000 and done == {"embedded": 1000, "measured": 1000}
    assert {d["question"] for d in measured} == {f"question {i}" for i in range(2000, 3000)}
    assert np.array_equal(np.asarray(grown.embeddings[:2000]), np.asarray(base.embeddings))
    assert np.array_equal(np.asarray(grown.costs[:2000]), np.asarray(base.costs))
    embed.texts, measured[:] = 0, []
    shrunk, done = extend_store(tmp_path, grown, records(2500)[100:], embed=embed, measure=measure, embedder="e",
                                prompt_format="p")  # 100 removed at the start, 500 at the end
    assert embed.texts == 0 and measured == [] and len(shrunk) == 2400
    assert np.array_equal(np.asarray(shrunk.embeddings), np.asarray(grown.embeddings[100:2500]))
    _, done = extend_store(tmp_path, grown, records(10), embed=embed, measure=measure, embedder="other",
                           prompt_format="p")
    assert done == {"embedded": 10, "measured": 10}  # another embedder: nothing carries over


class CountingHashingEmbedder(HashingEmbedder):
    """The hashing embedder, counting the texts it is asked to embed (no cache in front of it)."""

    def __init__(self):
        super().__init__()
        self.texts = 0

    def encode(self, texts):
        self.texts += len(texts)
        return super().encode(texts)


def qa(start: int, n: int):
    examples = [dspy.Example(id=f"q{i}", doc_id=f"d{i // 6}", question=f"what is item {i} worth in {i % 13} units",
                             answer=str(i)).with_inputs("question") for i in range(start, start + n)]
    return examples, [{"question": e.question, "answer": e.answer} for e in examples]


def test_a_compiled_selection_adds_1000_exemplars_embedding_and_measuring_only_those(cache, monkeypatch):
    from knapsack_dspy.modules.select_exemplars import SelectExemplars

    monkeypatch.setattr(pool_store, "INLINE_POOL_LIMIT", 100)
    embedder = CountingHashingEmbedder()
    select = SelectExemplars(selector="kate", max_exemplars=2, embedder=embedder)
    examples, demos = qa(0, 2000)
    select.fit(examples, demos, [10.0] * 2000, budget=1000, input_fields=["question"],
               signature_fields=["question", "answer"])
    before = select.store.hash
    assert embedder.texts == 2000
    embedder.texts, measured = 0, []

    def measure(new):
        measured.extend(new)
        return [12.0] * len(new)

    added, added_demos = qa(2000, 1000)
    done = select.update_pool(added, added_demos, measure=measure)
    assert done == {"embedded": 1000, "measured": 1000, "size": 3000}
    assert embedder.texts == 1000 and [d["answer"] for d in measured] == [str(i) for i in range(2000, 3000)]
    assert select.store.hash != before and len(select.pool()) == 3000
    chosen = select(question="what is item 2500 worth in 4 units")
    assert len(chosen.ids) == 2 and "q2500" not in chosen.ids  # the query's own demo, now in the pool: never
    assert set(chosen.ids) <= {f"q{i}" for i in range(3000)}
    embedder.texts, measured[:] = 0, []
    done = select.update_pool(remove_ids=[f"q{i}" for i in range(10)], measure=measure)
    assert done == {"embedded": 0, "measured": 0, "size": 2990} and embedder.texts == 0 and measured == []
    assert "q3" not in select.pool_ids and select.costs[-1] == 12.0
    with pytest.raises(ValueError, match="ids already in the pool"):
        select.update_pool(*qa(20, 1), measure=measure)


def test_an_inline_pool_measures_a_replaced_exemplar_again(cache):
    from knapsack_dspy.modules.select_exemplars import SelectExemplars

    select = SelectExemplars(selector="kate", max_exemplars=2, embedder=CountingHashingEmbedder())
    examples, demos = qa(0, 20)
    select.fit(examples, demos, [10.0] * 20, budget=1000, input_fields=["question"],
               signature_fields=["question", "answer"])
    assert select.store is None
    new_examples, new_demos = qa(1, 1)
    new_demos[0]["answer"] = "a much longer answer than before"  # q1 again, another demo
    done = select.update_pool(new_examples, new_demos, remove_ids=["q1"], measure=lambda d: [999.0] * len(d))
    assert done == {"embedded": 1, "measured": 1, "size": 20}  # its new text embedded, its new demo measured
    assert select.costs[select.pool_ids.index("q1")] == 999.0
    assert select.costs[select.pool_ids.index("q2")] == 10.0


def test_kdspy_serve_answers_with_a_store_backed_program_copied_elsewhere(tmp_path, cache, monkeypatch):
    pytest.importorskip("fastapi")
    pytest.importorskip("uvicorn")
    from scaleout_helpers import ServerThread, ServeSpec, StubLM, deterministic_reply, post

    from knapsack_dspy.serve.app import create_app
    from knapsack_dspy.testing.openai_stub_server import StubOpenAIServer

    program, examples = compile_tatqa(3, monkeypatch)
    save_program(program, tmp_path / "run" / "program.json")
    shutil.copytree(tmp_path / "run", tmp_path / "served")
    shutil.rmtree(tmp_path / "run")
    shutil.rmtree(cache)
    loaded = load_program(tmp_path / "served" / "program.json", embedder=HashingEmbedder(),
                          token_counter=WordCounter())
    question = {"question": examples[0].question, "table": examples[0].table,
                "paragraphs": list(examples[0].paragraphs)}
    with StubOpenAIServer(reply=deterministic_reply) as lm_server, \
            ServerThread(create_app(loaded, StubLM(lm_server.base_url)(ServeSpec()))) as api:
        status, _, answer = post(api.url, question)
    assert status == 200 and answer["error"] is None
    assert answer["exemplar_ids"] and examples[0].id not in answer["exemplar_ids"]
