"""Pure (non-DSPy) retrieval helpers: statute parsing, citation extraction, lexical and dense ranking.

Nothing here imports dspy, torch or sentence-transformers; the DSPy modules in
``knapsack_dspy.docqa.pipelines.hybrid_retriever`` / ``statute_retriever`` build on these.
"""

from knapsack_dspy.docqa.retrieval.bm25 import BM25
from knapsack_dspy.docqa.retrieval.citations import Citation, extract_citations
from knapsack_dspy.docqa.retrieval.evidence_recall import gold_indices, recall_at_n
from knapsack_dspy.docqa.retrieval.ranking import rank_indices, top_n_in_order
from knapsack_dspy.docqa.retrieval.statute_budget import fit_statute_selection
from knapsack_dspy.docqa.retrieval.statute_corpus import StatuteCorpus
from knapsack_dspy.docqa.retrieval.statute_strategies import STRATEGIES, StatuteSelection, select_statute_text
from knapsack_dspy.docqa.retrieval.statute_tree import (
    Sentence,
    Statute,
    StatuteParseError,
    Subsection,
    parse_statute,
)
from knapsack_dspy.docqa.table_layout import header_row_count

__all__ = [
    "BM25",
    "STRATEGIES",
    "Citation",
    "Sentence",
    "Statute",
    "StatuteCorpus",
    "StatuteParseError",
    "StatuteSelection",
    "Subsection",
    "extract_citations",
    "fit_statute_selection",
    "gold_indices",
    "header_row_count",
    "parse_statute",
    "rank_indices",
    "recall_at_n",
    "select_statute_text",
    "top_n_in_order",
]
