"""FinQA dev documents cut by page: the tuning part, the pool part, the document pool (train_docs + the dev pool
part), and the tuning questions' seeded order. No tuning id or tuning page reaches a pool.

The fixture tests build a data directory of their own; the real-data tests read $KDSPY_DATA_DIR (skipped
without ``finqa/dev_docs.json.gz``)."""

from __future__ import annotations

import gzip
import hashlib
import json
import shutil
from pathlib import Path

import pytest

from knapsack_dspy.bench.suites.chosen_questions import chosen_examples
from knapsack_dspy.bench.suites.suite import RunSpec, SuiteError, suite_from_dict
from knapsack_dspy.docqa.data import DataError, load_examples
from knapsack_dspy.docqa.data.document_parts import document_part
from knapsack_dspy.docqa.data.seeded_order import (
    FINQA_TUNING_QUESTIONS,
    FINQA_TUNING_READ,
    FINQA_TUNING_SEED,
    in_seeded_order,
    seeded_order,
)
from knapsack_dspy.paths import ConfigError, data_dir

FIXTURE = Path(__file__).parents[1] / "fixtures" / "finqa_docs_small.json"


def _tuning_bucket(filename: str) -> bool:
    """The issue's rule, written out: ``int(sha256(filename), 16) % 100 < 30`` -> tuning."""
    return int(hashlib.sha256(filename.encode("utf-8")).hexdigest(), 16) % 100 < 30


@pytest.fixture
def docs_dir(tmp_path):
    """train_docs = the fixture; dev_docs = the fixture's records on other pages (a ``filename`` each)."""
    folder = tmp_path / "finqa"
    folder.mkdir()
    shutil.copy(FIXTURE, folder / "train_docs.json")
    records = json.loads(FIXTURE.read_text())
    dev = []
    for number in range(12):  # 12 pages of one question each, on both sides of the cut
        record = dict(records[number % len(records)])
        record.update(id=f"DEV/2020/page_{number}.pdf-1", filename=f"DEV/2020/page_{number}.pdf")
        dev.append(record)
    (folder / "dev_docs.json").write_text(json.dumps(dev))
    return tmp_path


def test_dev_docs_parts_and_the_document_pool_split_by_page(docs_dir):
    dev = load_examples("finqa", split="dev_docs", data_dir=docs_dir)
    tune = load_examples("finqa", split="dev_docs_tune", data_dir=docs_dir)
    dev_pool = load_examples("finqa", split="dev_docs_pool", data_dir=docs_dir)
    docs_pool = load_examples("finqa", split="docs_pool", data_dir=docs_dir)
    train = load_examples("finqa", split="train_docs", data_dir=docs_dir)
    assert all(ex.doc_id == ex.id.removesuffix("-1") for ex in dev)  # doc_id is the record's filename
    assert sorted(ex.id for ex in [*tune, *dev_pool]) == sorted(ex.id for ex in dev)
    assert tune and dev_pool and not {ex.doc_id for ex in tune} & {ex.doc_id for ex in dev_pool}
    assert all(_tuning_bucket(ex.doc_id) for ex in tune) and not any(_tuning_bucket(ex.doc_id) for ex in dev_pool)
    # the document pool: all of train_docs, then the dev pool part, and nothing of the tuning part
    assert [ex.id for ex in docs_pool] == [ex.id for ex in train] + [ex.id for ex in dev_pool]
    assert not {ex.id for ex in tune} & {ex.id for ex in docs_pool}
    assert not {ex.doc_id for ex in tune} & {ex.doc_id for ex in docs_pool}
    assert docs_pool.report.source.count(" + ") == 1 and docs_pool.report.examples_loaded == len(docs_pool)


def test_a_split_of_several_files_needs_them_all(docs_dir):
    (docs_dir / "finqa" / "dev_docs.json").unlink()
    with pytest.raises(DataError, match=r"no finqa split 'dev_docs'.*available: train_docs, train_docs_eval"):
        load_examples("finqa", split="docs_pool", data_dir=docs_dir)


def test_seeded_order_is_fixed_by_the_seed_alone_and_keeps_documents_together():
    ids = [f"P{page}/q{n}" for page in range(10) for n in range(page % 3 + 1)]
    pages = [item.split("/")[0] for item in ids]
    order = seeded_order(ids, 26, pages)
    assert sorted(order) == sorted(ids)
    assert seeded_order(list(reversed(ids)), 26, list(reversed(pages))) == order  # not the input order
    assert seeded_order(ids, 27, pages) != order
    seen_pages = [item.split("/")[0] for item in order]
    assert [page for i, page in enumerate(seen_pages) if i == 0 or seen_pages[i - 1] != page] == \
        list(dict.fromkeys(seen_pages))  # a page's questions are consecutive
    # one id less moves no other
    assert seeded_order([i for i in ids if i != order[3]], 26, [p for i, p in zip(ids, pages, strict=True)
                                                                if i != order[3]]) == order[:3] + order[4:]
    with pytest.raises(ValueError, match="not distinct"):
        seeded_order(["a", "a"], 1)


def test_order_seed_orders_the_questions_before_limit(docs_dir):
    dev = load_examples("finqa", split="dev_docs", data_dir=docs_dir)
    ordered = [ex.id for ex in in_seeded_order(dev, 5)]
    assert [ex.id for ex in chosen_examples(dev, RunSpec(dataset="finqa", order_seed=5, limit=4))] == ordered[:4]
    assert [ex.id for ex in chosen_examples(dev, RunSpec(dataset="finqa", limit=4))] == [ex.id for ex in dev[:4]]
    wanted = ordered[::-3]  # example_ids pick from the seeded order, in that order
    picked = RunSpec(dataset="finqa", order_seed=5, example_ids=tuple(wanted))
    assert [ex.id for ex in chosen_examples(dev, picked)] == [i for i in ordered if i in set(wanted)]
    # the suite key; its default leaves existing run keys alone
    plain = suite_from_dict({"selector": "seer"}).runs[0]
    assert suite_from_dict({"selector": "seer", "order_seed": 5}).runs[0].key != plain.key
    assert RunSpec(selector="seer").key == plain.key
    with pytest.raises(SuiteError, match="order_seed: must be a non-negative integer"):
        suite_from_dict({"order_seed": -1})


# -- the real data ---------------------------------------------------------------------------------------------
try:
    DATA = data_dir()
except ConfigError:
    DATA = None
real = pytest.mark.skipif(DATA is None or not (DATA / "finqa" / "dev_docs.json.gz").is_file(),
                          reason="finqa/dev_docs.json.gz not available (set KDSPY_DATA_DIR)")


@real
def test_real_dev_docs_split_counts_and_no_tuning_page_in_a_pool():
    raw = json.loads(gzip.decompress((DATA / "finqa" / "dev_docs.json.gz").read_bytes()))
    filename = {record["id"]: record["filename"] for record in raw}
    dev = load_examples("finqa", split="dev_docs")
    assert all(ex.doc_id == filename[ex.id] for ex in dev) and len(dev) == 848
    tune, dev_pool = load_examples("finqa", split="dev_docs_tune"), load_examples("finqa", split="dev_docs_pool")
    assert {ex.id for ex in tune} == {i for i, name in filename.items() if _tuning_bucket(name)}
    counts = {name: (len(part), len({ex.doc_id for ex in part})) for name, part in
              (("tune", tune), ("pool", dev_pool))}
    assert counts == {"tune": (304, 104), "pool": (544, 190)}  # docs/data.md, benchmarks/finqa_tune.toml
    docs_pool = load_examples("finqa", split="docs_pool")
    assert (len(docs_pool), len({ex.doc_id for ex in docs_pool})) == (922, 529)  # 378 + 544 on 339 + 190 pages
    for pool in (dev_pool, docs_pool, load_examples("finqa", split="train_docs")):
        assert not {ex.id for ex in tune} & {ex.id for ex in pool}
        assert not {ex.doc_id for ex in tune} & {ex.doc_id for ex in pool}
    assert all(document_part(ex.doc_id) == "eval" for ex in tune)


@real
def test_real_tuning_order_is_the_one_fixed_before_the_first_lm_call():
    tune = load_examples("finqa", split="dev_docs_tune")
    order = in_seeded_order(tune, FINQA_TUNING_SEED)[:FINQA_TUNING_QUESTIONS]
    assert len(order) == 150 and len({ex.doc_id for ex in order}) == 47
    digest = hashlib.sha256("\n".join(ex.id for ex in order).encode()).hexdigest()
    assert digest == ORDER_DIGEST  # changing the order after LM rows exist would mix two question sets
    read_pages = {ex.doc_id for ex in order[:FINQA_TUNING_READ]}
    assert not any(ex.doc_id in read_pages for ex in order[FINQA_TUNING_READ:])  # 61-150: no page of 1-60


ORDER_DIGEST = "37cfcb953a1f0704af78dec849b66ce8681cad4e2026fddcdddea72e81e590be"


def test_the_finqa_suites_ask_the_tuning_questions_from_pools_without_them():
    from knapsack_dspy.bench.suites.suite import load_suite

    benchmarks = Path(__file__).resolve().parents[2] / "benchmarks"
    for name in ("finqa_tune.toml", "finqa_figure8.toml"):
        suite = load_suite(benchmarks / name)
        for run in suite.runs:
            assert (run.dataset, run.eval_split, run.order_seed, run.limit) == (
                "finqa", "dev_docs_tune", FINQA_TUNING_SEED, FINQA_TUNING_QUESTIONS)
            assert (run.pool_dataset, run.pool_split) in (("", "docs_pool"), ("finqa_cases", "train"))
        assert {run.pool_split for run in suite.runs} == {"docs_pool", "train"}
    tune = load_suite(benchmarks / "finqa_tune.toml")
    assert {(r.selector, r.budget) for r in tune.runs if r.pool_split == "docs_pool" and r.exemplar_budget is None} \
        == {("case_coverage", 2048), ("seer", 2048), ("kate_within_budget", 2048), ("no_demos", 2048)}
    assert {r.pipeline for r in tune.runs} == {"finqa_pot"}
