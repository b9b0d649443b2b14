"""``HybridRetriever``: shrink a table + text report to what a question needs, keeping the table a table.

    retriever = HybridRetriever(top_n_paragraphs=3)
    pred = retriever(question=..., table=[["", "2019", "2018"], ["Revenue", "1,234", "1,100"]],
                     paragraphs=["...", "..."])
    pred.table_text     # "| | 2019 | 2018 |\n| Revenue | 1,234 | 1,100 |"  (numbers exactly as written)
    pred.text           # the kept paragraphs, in document order, one per line
    pred.paragraph_ids  # indices of the kept paragraphs (ascending)
    pred.row_ids        # indices of the table rows shown (header rows included)

Paragraphs are ranked by cosine similarity between sentence-transformers embeddings of the question and
of each paragraph (``knapsack_dspy.embeddings.TextEmbedder``, disk-cached); the best
``top_n_paragraphs`` are kept in their original order. The table is rendered whole (pipe-delimited,
``knapsack_dspy.docqa.data.rendering.render_table``), not turned into templated sentences, unless it has more
than ``max_table_rows`` rows: then its header rows plus the data rows most similar to the question are
kept, up to ``max_table_rows`` rows in all, in their original order. Ties keep the earlier item, so the
output is deterministic. Nothing is embedded when nothing has to be cut.

The module holds no learnable state (``save``/``load`` store nothing); its settings are constructor
arguments. Copies made by ``deepcopy`` (teleprompters do this) share the embedder, so the model is
loaded once per process.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence

import dspy
import numpy as np

from knapsack_dspy.docqa.data.rendering import render_table
from knapsack_dspy.docqa.retrieval.ranking import rank_indices, top_n_in_order
from knapsack_dspy.docqa.retrieval.table_rows import row_text
from knapsack_dspy.docqa.table_layout import header_row_count  # the rows a long table's prompt always keeps
from knapsack_dspy.embeddings import TextEmbedder

__all__ = ["HybridRetriever"]


def _check_table(table) -> list[list[str]]:
    if table is None:
        return []
    if isinstance(table, (str, bytes)) or not isinstance(table, Sequence):
        raise TypeError("HybridRetriever: 'table' must be a list of rows (each a list of cell strings, "
                         f"header first), got {type(table).__name__}")
    rows = []
    for i, row in enumerate(table):
        if isinstance(row, (str, bytes)) or not isinstance(row, Sequence):
            raise TypeError(f"HybridRetriever: 'table' row {i} must be a list of cell strings, "
                             f"got {type(row).__name__}")
        rows.append(["" if cell is None else str(cell) for cell in row])
    return rows


def _check_paragraphs(paragraphs) -> list[str]:
    if paragraphs is None:
        return []
    if isinstance(paragraphs, (str, bytes)) or not isinstance(paragraphs, Sequence):
        raise TypeError("HybridRetriever: 'paragraphs' must be a list of strings, "
                         f"got {type(paragraphs).__name__}")
    out = []
    for i, paragraph in enumerate(paragraphs):
        if not isinstance(paragraph, str):
            raise TypeError(f"HybridRetriever: 'paragraphs' item {i} must be a string, "
                             f"got {type(paragraph).__name__}")
        out.append(paragraph)
    return out


class HybridRetriever(dspy.Module):
    """Keep the table as a table and the paragraphs most similar to the question.

    Parameters
    ----------
    top_n_paragraphs: paragraphs to keep (``None`` keeps all; 0 keeps none).
    max_table_rows: tables with more rows than this are cut to their header rows plus the most similar
        data rows, ``max_table_rows`` rows in all (at least the header rows and one data row are kept).
    embedder: anything with ``encode(list[str]) -> np.ndarray`` of unit vectors; default a shared
        :class:`knapsack_dspy.embeddings.TextEmbedder` created on first use.
    """

    def __init__(self, top_n_paragraphs: int | None = 3, max_table_rows: int = 30, embedder=None):
        super().__init__()
        if top_n_paragraphs is not None and (not isinstance(top_n_paragraphs, int) or top_n_paragraphs < 0):
            raise ValueError("HybridRetriever: top_n_paragraphs must be an int >= 0 or None, "
                             f"got {top_n_paragraphs!r}")
        if not isinstance(max_table_rows, int) or max_table_rows < 1:
            raise ValueError(f"HybridRetriever: max_table_rows must be an int >= 1, got {max_table_rows!r}")
        if embedder is not None and not callable(getattr(embedder, "encode", None)):
            raise TypeError("HybridRetriever: embedder must have an encode(list[str]) method")
        self.top_n_paragraphs = top_n_paragraphs
        self.max_table_rows = max_table_rows
        self._embedder = embedder

    @property
    def embedder(self):
        if self._embedder is None:
            self._embedder = TextEmbedder()
        return self._embedder

    def __deepcopy__(self, memo):
        new = self.__class__.__new__(self.__class__)
        memo[id(self)] = new
        for key, value in self.__dict__.items():
            new.__dict__[key] = value if key == "_embedder" else copy.deepcopy(value, memo)
        return new

    # -- scoring -----------------------------------------------------------------------------------
    def similarities(self, question: str, texts: Sequence[str]) -> np.ndarray:
        """Cosine similarity of each text to the question (embeddings are unit vectors)."""
        if not texts:
            return np.zeros(0, dtype=np.float64)
        vectors = np.asarray(self.embedder.encode([question, *texts]), dtype=np.float64)
        return vectors[1:] @ vectors[0]

    def rank_paragraphs(self, question: str, paragraphs: Sequence[str]) -> list[int]:
        """All paragraph indices, most similar first (ties: earlier first)."""
        return rank_indices(self.similarities(question, _check_paragraphs(paragraphs)))

    def rank_rows(self, question: str, table: Sequence[Sequence[str]]) -> list[int]:
        """Data-row indices (header rows excluded), most similar first (ties: earlier first)."""
        rows = _check_table(table)
        n_header = header_row_count(rows)
        scores = self.similarities(question, [row_text(r) for r in rows[n_header:]])
        return [n_header + i for i in rank_indices(scores)]

    # -- embedding ahead of time -----------------------------------------------------------------------
    def texts_to_embed(self, question: str, table=None, paragraphs=None) -> list[str]:
        """The texts ``forward`` would embed for this input (none when nothing has to be cut)."""
        rows = _check_table(table)
        texts = _check_paragraphs(paragraphs)
        out: list[str] = []
        n = self.top_n_paragraphs
        if n is not None and 0 < n < len(texts):
            out.extend(texts)
        if len(rows) > self.max_table_rows:
            out.extend(row_text(r) for r in rows[header_row_count(rows):])
        return [question, *out] if out else []


    # -- selection ---------------------------------------------------------------------------------
    def select_paragraphs(self, question: str, paragraphs: Sequence[str]) -> list[int]:
        paragraphs = _check_paragraphs(paragraphs)
        n = self.top_n_paragraphs
        if n is None or n >= len(paragraphs):
            return list(range(len(paragraphs)))
        if n == 0:
            return []
        return top_n_in_order(self.similarities(question, paragraphs), n)

    def select_rows(self, question: str, table: Sequence[Sequence[str]]) -> list[int]:
        rows = _check_table(table)
        if len(rows) <= self.max_table_rows:
            return list(range(len(rows)))
        n_header = header_row_count(rows)
        budget = max(self.max_table_rows - n_header, 1)
        scores = self.similarities(question, [row_text(r) for r in rows[n_header:]])
        return list(range(n_header)) + [n_header + i for i in top_n_in_order(scores, budget)]

    def evidence_context(self, question: str, table, paragraphs, evidence_rows: Sequence[int],
                         evidence_sentences: Sequence[int]) -> tuple[list[int], list[int]]:
        """(row ids, paragraph ids) of a demo cut down to its evidence: the header rows and the evidence rows
        (no table when the evidence has no row), and the evidence sentences plus the sentences most similar to
        the question up to ``top_n_paragraphs`` in all (all when ``None``), in document order."""
        rows = _check_table(table)
        texts = _check_paragraphs(paragraphs)
        wanted_rows = sorted({i for i in evidence_rows if 0 <= i < len(rows)})
        row_ids = sorted(set(range(header_row_count(rows))) | set(wanted_rows)) if wanted_rows else []
        kept = {i for i in evidence_sentences if 0 <= i < len(texts)}
        n = self.top_n_paragraphs
        if n is None or n >= len(texts):
            kept = set(range(len(texts)))
        elif len(kept) < n:
            for i in self.rank_paragraphs(question, texts):
                if len(kept) >= n:
                    break
                kept.add(i)
        return row_ids, sorted(kept)

    def forward(self, question: str, table=None, paragraphs=None) -> dspy.Prediction:
        if not isinstance(question, str):
            raise TypeError(f"HybridRetriever: 'question' must be a string, got {type(question).__name__}")
        rows = _check_table(table)
        texts = _check_paragraphs(paragraphs)
        paragraph_ids = self.select_paragraphs(question, texts)
        row_ids = self.select_rows(question, rows)
        if not rows:
            table_text = ""
        elif len(row_ids) == len(rows):
            table_text = render_table(rows)
        else:
            table_text = render_table(rows, keep_rows=row_ids)
        return dspy.Prediction(table_text=table_text, text="\n".join(texts[i] for i in paragraph_ids),
                               paragraph_ids=paragraph_ids, row_ids=row_ids)
