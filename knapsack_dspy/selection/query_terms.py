"""The terms a query names, and which texts contain them: what an evidence piece's coverage value counts.

A *term* is a word of at least three letters that is not a stopword (lowercased: ``Revenue`` and ``revenue`` are one
term) or a number (digits with an optional decimal part; thousands separators dropped, so ``1,234.5`` and
``1234.5`` are one term; a year is a number). A text contains a term when the term is one of the text's own terms:
whole words, no stemming (``margin`` is not in ``margins``). Pure Python; the order of a query's terms is the order
they first appear in.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

__all__ = ["STOPWORDS", "cover_matrix", "query_terms", "text_terms"]

#: Words too common to say what a query is about (English function words and question words).
STOPWORDS = frozenset("""
a about above after again against all also am an and any are aren as at be because been before being below between
both but by can cannot could couldn did didn do does doesn doing don down during each either else ever few for from
further get gets got had hadn has hasn have haven having he her here hers herself him himself his how however i if in
into is isn it its itself just least less let like made make many may me might more most much must my myself neither
no nor not now of off on once one only or other ought our ours ourselves out over own per rather same shall she
should shouldn since so some such than that the their theirs them themselves then there these they this those
though through to too under until up upon us very via was wasn we were weren what whatever when where whereas
whether which while who whom whose why will with within without won would wouldn yet you your yours yourself
yourselves
""".split())

_WORD = re.compile(r"[^\W\d_]+|\d[\d,]*(?:\.\d+)?", re.UNICODE)


def _normal(token: str) -> str | None:
    """A token as a term (``None``: not a term)."""
    if token[0].isdigit():
        number = token.replace(",", "")
        return number.rstrip(".") or None
    word = token.lower()
    if len(word) < 3 or word in STOPWORDS:
        return None
    return word


def text_terms(text: str) -> set[str]:
    """The terms of ``text`` (a set)."""
    return {term for term in map(_normal, _WORD.findall(str(text))) if term}


def query_terms(text: str) -> tuple[str, ...]:
    """The terms ``text`` names, each once, in the order they first appear."""
    seen: dict[str, None] = {}
    for term in map(_normal, _WORD.findall(str(text))):
        if term and term not in seen:
            seen[term] = None
    return tuple(seen)


def cover_matrix(terms: Sequence[str], texts: Sequence[str]) -> np.ndarray:
    """``(len(texts), len(terms))`` booleans: whether text i contains term j."""
    out = np.zeros((len(texts), len(terms)), dtype=bool)
    if not len(terms):
        return out
    column = {term: j for j, term in enumerate(terms)}
    for i, text in enumerate(texts):
        for term in text_terms(text):
            j = column.get(term)
            if j is not None:
                out[i, j] = True
    return out
