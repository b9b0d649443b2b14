"""HybridRetriever: paragraph / row selection, table rendering, DSPy module behaviour."""

from __future__ import annotations

import json
import re
import zlib

import dspy
import numpy as np
import pytest
from dspy.utils import DummyLM

from knapsack_dspy.docqa.pipelines.hybrid_retriever import HybridRetriever


class BagOfWordsEmbedder:
    """Deterministic stand-in for a sentence embedder: hashed word counts, L2-normalised."""

    def __init__(self, dim: int = 512):
        self.dim = dim
        self.calls: list[list[str]] = []

    def encode(self, texts):
        self.calls.append(list(texts))
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, text in enumerate(texts):
            for word in re.findall(r"[a-z0-9]+", text.lower()):
                out[i, zlib.crc32(word.encode()) % self.dim] += 1.0
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.where(norms == 0, 1.0, norms)


PARAGRAPHS = [
    "Cash flow measures and capital additions",
    "The company paid dividends to shareholders of 1.2 billion in 2019.",
    "Employee headcount rose slightly during the year.",
    "Dividends received from associates were higher than in 2018.",
    "Restructuring payments fell compared with the prior year.",
]
TABLE = [
    ["", "2019", "2018"],
    ["", "€m", "€m"],
    ["Capital additions", "(7,227)", "(7,321)"],
    ["Dividends received from associates", "498", "489"],
    ["Free cash flow", "4,411", "4,044"],
]


def test_keeps_the_most_similar_paragraphs_in_document_order():
    embedder = BagOfWordsEmbedder()
    retriever = HybridRetriever(top_n_paragraphs=2, embedder=embedder)
    pred = retriever(question="How much were dividends received from associates in 2019?", table=TABLE,
                     paragraphs=PARAGRAPHS)
    assert pred.paragraph_ids == [1, 3]
    assert pred.text == PARAGRAPHS[1] + "\n" + PARAGRAPHS[3]
    assert retriever.rank_paragraphs("restructuring payments", PARAGRAPHS)[0] == 4


def test_table_stays_a_table_with_numbers_as_written():
    pred = HybridRetriever(embedder=BagOfWordsEmbedder())(question="capital additions?", table=TABLE,
                                                          paragraphs=PARAGRAPHS)
    assert pred.row_ids == [0, 1, 2, 3, 4]
    for cell in ("(7,227)", "4,044", "€m", "Dividends received from associates"):
        assert cell in pred.table_text
    assert pred.table_text.splitlines() == [
        "|  | 2019 | 2018 |",
        "|  | €m | €m |",
        "| Capital additions | (7,227) | (7,321) |",
        "| Dividends received from associates | 498 | 489 |",
        "| Free cash flow | 4,411 | 4,044 |",
    ]


def test_nothing_is_embedded_when_nothing_is_cut():
    embedder = BagOfWordsEmbedder()
    keep_all = HybridRetriever(top_n_paragraphs=None, embedder=embedder)
    pred = keep_all(question="anything", table=TABLE, paragraphs=PARAGRAPHS)
    assert pred.paragraph_ids == list(range(5)) and embedder.calls == []
    few = HybridRetriever(top_n_paragraphs=10, embedder=embedder)(question="x", table=[], paragraphs=PARAGRAPHS[:2])
    assert few.paragraph_ids == [0, 1] and few.table_text == "" and few.row_ids == [] and embedder.calls == []
    none = HybridRetriever(top_n_paragraphs=0, embedder=embedder)(question="x", table=None, paragraphs=PARAGRAPHS)
    assert none.paragraph_ids == [] and none.text == "" and embedder.calls == []


def test_long_tables_keep_headers_and_the_most_similar_rows():
    rows = [["", "2019", "2018"], ["", "$m", "$m"]]
    rows += [[f"Line item {i}", str(i), str(i + 1)] for i in range(40)]
    rows[30] = ["Goodwill impairment", "1,234", "(56)"]
    rows[12] = ["Goodwill amortisation", "77", "66"]
    retriever = HybridRetriever(max_table_rows=5, embedder=BagOfWordsEmbedder())
    pred = retriever(question="What was the goodwill impairment in 2019?", table=rows, paragraphs=[])
    assert len(pred.row_ids) == 5
    assert pred.row_ids[:2] == [0, 1] and pred.row_ids == sorted(pred.row_ids)
    assert 30 in pred.row_ids and 12 in pred.row_ids
    assert "1,234" in pred.table_text and "(56)" in pred.table_text
    assert retriever.rank_rows("goodwill impairment", rows)[0] == 30
    short = HybridRetriever(max_table_rows=len(rows), embedder=BagOfWordsEmbedder())
    assert short(question="goodwill", table=rows).row_ids == list(range(len(rows)))


def test_deterministic_and_ties_keep_the_earlier_paragraph():
    retriever = HybridRetriever(top_n_paragraphs=1, embedder=BagOfWordsEmbedder())
    twins = ["same words here", "same words here", "different"]
    assert retriever(question="same words", paragraphs=twins).paragraph_ids == [0]
    first = retriever(question="dividends 2019", table=TABLE, paragraphs=PARAGRAPHS)
    second = retriever(question="dividends 2019", table=TABLE, paragraphs=PARAGRAPHS)
    assert first.toDict() == second.toDict()


def test_bad_input_is_named():
    retriever = HybridRetriever(embedder=BagOfWordsEmbedder())
    with pytest.raises(TypeError, match="'paragraphs' must be a list of strings, got str"):
        retriever(question="q", table=TABLE, paragraphs="one paragraph")
    with pytest.raises(TypeError, match="'paragraphs' item 1 must be a string, got int"):
        retriever(question="q", paragraphs=["ok", 3])
    with pytest.raises(TypeError, match="'table' row 1 must be a list of cell strings"):
        retriever(question="q", table=[["a"], "b"])
    with pytest.raises(TypeError, match="'table' must be a list of rows"):
        retriever(question="q", table="| a | b |")
    with pytest.raises(TypeError, match="'question' must be a string"):
        retriever(question=None)
    with pytest.raises(ValueError, match="top_n_paragraphs must be an int >= 0 or None, got -1"):
        HybridRetriever(top_n_paragraphs=-1)
    with pytest.raises(ValueError, match="max_table_rows must be an int >= 1"):
        HybridRetriever(max_table_rows=0)
    with pytest.raises(TypeError, match="embedder must have an encode"):
        HybridRetriever(embedder=object())


def test_copies_share_the_embedder_and_save_load_roundtrip(tmp_path):
    embedder = BagOfWordsEmbedder()
    retriever = HybridRetriever(top_n_paragraphs=2, max_table_rows=7, embedder=embedder)
    copied = retriever.deepcopy()
    assert copied.embedder is embedder and copied.top_n_paragraphs == 2 and copied.max_table_rows == 7
    path = tmp_path / "hybrid.json"
    retriever.save(str(path))
    assert json.loads(path.read_text())
    loaded = HybridRetriever(top_n_paragraphs=2, embedder=BagOfWordsEmbedder())
    loaded.load(str(path))
    question = "dividends from associates"
    assert loaded(question=question, paragraphs=PARAGRAPHS).paragraph_ids == \
        retriever(question=question, paragraphs=PARAGRAPHS).paragraph_ids


class TableTextQA(dspy.Module):
    def __init__(self, retriever):
        super().__init__()
        self.retriever = retriever
        self.answer = dspy.Predict("table, text, question -> answer")

    def forward(self, question, table, paragraphs):
        context = self.retriever(question=question, table=table, paragraphs=paragraphs)
        return self.answer(table=context.table_text, text=context.text, question=question)


def test_retrieved_context_reaches_the_prompt():
    lm = DummyLM([{"answer": "498"}])
    program = TableTextQA(HybridRetriever(top_n_paragraphs=1, embedder=BagOfWordsEmbedder()))
    with dspy.context(lm=lm):
        pred = program(question="Dividends received from associates in 2019?", table=TABLE,
                       paragraphs=PARAGRAPHS)
    assert pred.answer == "498"
    prompt = "".join(str(m.get("content", "")) for m in lm.history[-1]["messages"])
    assert "(7,227)" in prompt and PARAGRAPHS[3] in prompt
    assert PARAGRAPHS[2] not in prompt  # a dropped paragraph


@pytest.fixture(scope="module")
def real_embedder(tmp_path_factory):
    from knapsack_dspy.embeddings import TextEmbedder

    return TextEmbedder(cache_dir=tmp_path_factory.mktemp("embedding-cache"))


@pytest.mark.slow
def test_real_embedder_ranks_by_meaning(real_embedder):
    retriever = HybridRetriever(top_n_paragraphs=1, embedder=real_embedder)
    paragraphs = [
        "The Group's workforce grew to 12,000 people across 30 countries.",
        "Shareholders received a higher payout per share than last year.",
        "The new headquarters building was completed in March.",
    ]
    pred = retriever(question="How did dividends change?", table=TABLE, paragraphs=paragraphs)
    assert pred.paragraph_ids == [1]  # no word in common with the question: semantic match
    scores = retriever.similarities("How did dividends change?", paragraphs)
    assert scores.shape == (3,) and np.all(np.abs(scores) <= 1.0 + 1e-5)


@pytest.mark.parametrize("top_n, max_rows", [(2, 30), (None, 3), (2, 3), (5, 30), (0, 30)])
def test_texts_to_embed_are_exactly_what_forward_embeds(top_n, max_rows):
    embedder = BagOfWordsEmbedder()
    retriever = HybridRetriever(top_n_paragraphs=top_n, max_table_rows=max_rows, embedder=embedder)
    question = "How much were dividends received from associates in 2019?"
    expected = retriever.texts_to_embed(question, TABLE, PARAGRAPHS)
    retriever(question=question, table=TABLE, paragraphs=PARAGRAPHS)
    embedded = {text for call in embedder.calls for text in call}
    assert embedded == set(expected)
    if top_n in (None, 5, 0) and max_rows == 30:  # nothing to cut: nothing embedded, nothing to prefetch
        assert expected == [] and embedder.calls == []
