"""``StatuteRetriever``: the statute text a SARA question needs, chosen by the subsection it cites.

    retriever = StatuteRetriever(strategy="mentioned_only")          # statutes from $KDSPY_DATA_DIR
    pred = retriever(question="Section 7703(b)(3) applies to Alice maintaining her home for 2018.")
    pred.statute_text      # "§7703. Determination of marital status\n7703(b) Certain married ..."
    pred.subsection_ids    # ["7703", "7703(b)", "7703(b)(3)"]

Strategies (see ``knapsack_dspy.docqa.retrieval.statute_strategies``): ``mentioned_only`` (the cited
subsection's own sentences and its ancestors' own text), ``entire_section`` (the cited subtree),
``references`` (both, plus the subtrees of the subsections they refer to, one level).

A question that cites nothing (SARA's numerical cases: "How much tax does Alice have to pay in
2017?") or only sections that are not in the statutes gets ``has_citation=False`` and, with the
default ``no_citation="empty"``, an empty ``statute_text``; ``no_citation="all"`` returns every
statute instead. It never raises for such questions.

``max_tokens`` (with ``count_tokens``, the target model's ``count_text``) keeps the text within that many
tokens, cut by the hierarchy (``retrieval.statute_budget``: the cited subsection and its ancestors first, then
its descendants, its siblings, the rest); ``truncated`` / ``dropped_ids`` say what was cut.
"""

from __future__ import annotations

import copy
import dataclasses
import os
from collections.abc import Mapping

import dspy

from knapsack_dspy.docqa.data import load_statutes
from knapsack_dspy.docqa.retrieval.citations import extract_citations
from knapsack_dspy.docqa.retrieval.statute_budget import fit_statute_selection
from knapsack_dspy.docqa.retrieval.statute_corpus import StatuteCorpus
from knapsack_dspy.docqa.retrieval.statute_strategies import (
    STRATEGIES,
    render_subsections,
    rule_text,
    select_statute_text,
)

__all__ = ["NO_CITATION_POLICIES", "StatuteRetriever", "load_statute_corpus"]

NO_CITATION_POLICIES = ("empty", "all")


def load_statute_corpus(data_dir: str | os.PathLike | None = None) -> StatuteCorpus:
    """Parse the SARA statutes in ``<data dir>/sara/statutes`` (data dir: argument > $KDSPY_DATA_DIR),
    read by ``knapsack_dspy.docqa.data.load_statutes`` (raises its ``DataError`` when they are missing)."""
    return StatuteCorpus.from_texts(load_statutes(data_dir))


class StatuteRetriever(dspy.Module):
    """Retrieve the statute text cited by a question.

    Parameters
    ----------
    strategy: ``"mentioned_only"`` | ``"entire_section"`` | ``"references"``.
    statutes: a :class:`StatuteCorpus`, or ``{section number: statute text}``; ``None`` loads the SARA
        statutes from the data directory on first use.
    data_dir: data directory used when ``statutes`` is None (default: ``$KDSPY_DATA_DIR``).
    no_citation: what to return when the question cites no known section: ``"empty"`` (empty text) or
        ``"all"`` (every statute).
    max_tokens: the most tokens of statute text (``None``: no limit); needs ``count_tokens`` (here or per call).
    count_tokens: ``count_tokens(text) -> int``, the target model's tokenizer (``TokenCounter.count_text``).
    """

    def __init__(self, strategy: str = "mentioned_only",
                 statutes: StatuteCorpus | Mapping[str, str] | None = None,
                 data_dir: str | os.PathLike | None = None, no_citation: str = "empty",
                 max_tokens: int | None = None, count_tokens=None):
        super().__init__()
        if strategy not in STRATEGIES:
            raise ValueError(f"StatuteRetriever: unknown strategy {strategy!r}; "
                             f"choose one of {', '.join(STRATEGIES)}")
        if no_citation not in NO_CITATION_POLICIES:
            raise ValueError(f"StatuteRetriever: unknown no_citation policy {no_citation!r}; "
                             f"choose one of {', '.join(NO_CITATION_POLICIES)}")
        if statutes is not None and not isinstance(statutes, (StatuteCorpus, Mapping)):
            raise TypeError("StatuteRetriever: statutes must be a StatuteCorpus or a {section: text} dict, "
                            f"got {type(statutes).__name__}")
        if max_tokens is not None and (isinstance(max_tokens, bool) or not isinstance(max_tokens, int)
                                       or max_tokens < 1):
            raise ValueError(f"StatuteRetriever: max_tokens must be a positive number of tokens or None, "
                             f"got {max_tokens!r}")
        self.strategy = strategy
        self.data_dir = data_dir
        self.no_citation = no_citation
        self.max_tokens = max_tokens
        self.count_tokens = count_tokens
        if isinstance(statutes, Mapping):
            statutes = StatuteCorpus.from_texts(statutes)
        self._corpus = statutes

    @property
    def corpus(self) -> StatuteCorpus:
        if self._corpus is None:
            self._corpus = load_statute_corpus(self.data_dir)
        return self._corpus

    def __deepcopy__(self, memo):
        # The parsed statutes are read-only: copies (made by teleprompters) share them.
        new = self.__class__.__new__(self.__class__)
        memo[id(self)] = new
        for key, value in self.__dict__.items():
            new.__dict__[key] = value if key == "_corpus" else copy.deepcopy(value, memo)
        return new

    def cited_rules(self, question: str, max_words: int = 80) -> list[str]:
        """The subsections ``question`` cites, each as ``<id> <heading>: "<its text>"``, in statute order; ``[]``
        when it cites nothing the statutes hold. A demo's reasoning quotes them
        (``demo_rendering.statute_reasoning``). The text is the subsection's own sentences; when one of them leads in
        to its children (``an individual-``, ``unless-``) or it has none, its descendants follow in file order, each
        after its label (``(A) who bears a relationship ...``), and a sentence after them stays after them. Cut to
        ``max_words`` words (``" ..."`` marks the cut); the id and heading alone when nothing has text. A citation
        deeper than the statutes go (``151(d)(5)(A)``) quotes its deepest existing subsection."""
        corpus = self.corpus
        cited = select_statute_text(corpus, extract_citations(question), "mentioned_only").cited_ids
        rules = []
        for node_id in cited:
            node = corpus[node_id]
            words = rule_text(corpus, node_id).split()
            text = " ".join(words[:max_words]) + (" ..." if len(words) > max_words else "")
            head = f"{node.id} {node.heading}".strip()
            rules.append(f'{head}: "{text}"' if text else head)
        return rules

    def forward(self, question: str, count_tokens=None, uncut: bool = False) -> dspy.Prediction:
        """Returns ``dspy.Prediction`` with ``statute_text`` (str), ``subsection_ids`` (list[str], statute
        order), ``citations`` (ids as cited in the question), ``has_citation`` (bool: a cited section is in
        the statutes), ``partial`` (citations served by their deepest existing ancestor, e.g.
        "151(d)(5)(A)"), ``unresolved`` (citations of sections not in the statutes), ``truncated`` and
        ``dropped_ids`` (what ``max_tokens`` left out). ``count_tokens``: this call's token counter (default:
        the retriever's). ``uncut``: the strategy's pick before any ``max_tokens`` cut (selectable evidence: the
        prompt's budget decides)."""
        if not isinstance(question, str):
            raise TypeError(f"StatuteRetriever: question must be a string, got {type(question).__name__}")
        corpus = self.corpus
        citations = extract_citations(question)
        selection = select_statute_text(corpus, citations, self.strategy)
        has_citation = bool(selection.cited_ids)
        if not has_citation:
            ids = corpus.sort_ids(corpus.nodes) if self.no_citation == "all" else []
            selection = dataclasses.replace(selection, subsection_ids=ids,
                                            text=render_subsections(corpus, ids) if ids else "")
        if self.max_tokens is not None and not uncut:
            count = count_tokens or self.count_tokens
            if count is None:
                raise ValueError("StatuteRetriever: max_tokens needs count_tokens (the target model's tokenizer)")
            selection = fit_statute_selection(corpus, selection, self.max_tokens, count)
        return dspy.Prediction(statute_text=selection.text, subsection_ids=selection.subsection_ids,
                               citations=[c.id for c in citations], has_citation=has_citation,
                               partial=selection.partial, unresolved=selection.unresolved,
                               truncated=selection.truncated, dropped_ids=selection.dropped_ids)
