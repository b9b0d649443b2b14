"""Okapi BM25 over a small document set (the paragraphs of one report): the lexical baseline.

IDF is computed on the documents being ranked (one context at a time), with the non-negative
``log(1 + (N - df + 0.5) / (df + 0.5))`` form, so a term present in every paragraph still scores >= 0.
Tokens are lower-cased alphanumeric runs; numbers keep their digits ("2,019.5" -> "2019", "5"), which
matters for financial questions that quote a year or an amount. A short English stop-word list is
removed from both sides.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence

import numpy as np

__all__ = ["BM25", "tokenize"]

_TOKEN_RE = re.compile(r"[a-z0-9]+")
STOP_WORDS = frozenset({
    "a", "an", "and", "are", "as", "at", "be", "by", "did", "do", "does", "for", "from", "had", "has", "have",
    "how", "in", "is", "it", "its", "of", "on", "or", "that", "the", "their", "this", "to", "was", "were",
    "what", "when", "which", "who", "whom", "why", "with",
})


def tokenize(text: str) -> list[str]:
    """Lower-cased alphanumeric tokens without stop words; thousands separators are dropped first."""
    text = re.sub(r"(?<=\d),(?=\d{3}\b)", "", str(text).lower())
    return [t for t in _TOKEN_RE.findall(text) if t not in STOP_WORDS]


class BM25:
    """Score documents against a query with Okapi BM25 (``k1``, ``b`` as in Robertson et al.)."""

    def __init__(self, k1: float = 1.5, b: float = 0.75):
        if k1 < 0 or not 0 <= b <= 1:
            raise ValueError(f"BM25 needs k1 >= 0 and 0 <= b <= 1, got k1={k1}, b={b}")
        self.k1 = k1
        self.b = b

    def scores(self, query: str, documents: Sequence[str]) -> np.ndarray:
        """One score per document (higher = more relevant); zeros when nothing matches."""
        docs = [tokenize(d) for d in documents]
        out = np.zeros(len(docs), dtype=np.float64)
        if not docs:
            return out
        query_terms = set(tokenize(query))
        lengths = np.array([len(d) for d in docs], dtype=np.float64)
        avg_len = lengths.mean() if lengths.sum() > 0 else 1.0
        counts = [Counter(d) for d in docs]
        n_docs = len(docs)
        for term in query_terms:
            df = sum(1 for c in counts if term in c)
            if df == 0:
                continue
            idf = math.log(1.0 + (n_docs - df + 0.5) / (df + 0.5))
            for i, c in enumerate(counts):
                tf = c.get(term, 0)
                if tf:
                    norm = self.k1 * (1.0 - self.b + self.b * lengths[i] / avg_len)
                    out[i] += idf * tf * (self.k1 + 1.0) / (tf + norm)
        return out
