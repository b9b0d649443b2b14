"""Keeping a statute text within a token budget: cut by the hierarchy, the cited subsection kept first.

A strategy (``statute_strategies``) picks whole subsections; a question that cites nothing gets every statute
(``StatuteRetriever(no_citation="all")``, SARA's numerical cases: ~7,000 tokens), more than the embedded model's
context. ``fit_statute_selection(corpus, selection, max_tokens, count_tokens)`` keeps the picked subsections in
this order of priority, each whole, while the text stays within ``max_tokens``:

1. the cited subsections and their ancestors (what ``mentioned_only`` shows: the cited text in its context);
2. the cited subsections' descendants, shallower first;
3. the rest of the cited sections, nearest to a cited subsection first: its siblings (the other children of its
   parent), then its parent's siblings and what is under them, ... (shallower first at one distance);
4. the other sections' subsections (``references``' targets elsewhere, or the other statutes), shallower first.

A question that cites nothing counts each section's root as cited, so the sections' titles and top-level
subsections come first, then the next level of every section, and so on. A subsection is kept only with its
parent (when the strategy picked the parent), so a kept line never hangs without its context. Costs are each
subsection's rendered lines counted on their own; the assembled text is counted at the end and, if the joins made
it longer than ``max_tokens``, the last kept subsections are dropped until it fits. A subsection too large for
what is left is skipped and smaller ones after it may still fit. The result says what was dropped.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from knapsack_dspy.docqa.retrieval.statute_corpus import StatuteCorpus
from knapsack_dspy.docqa.retrieval.statute_strategies import (
    StatuteSelection,
    node_lines,
    render_subsections,
    section_title,
)

__all__ = ["fit_statute_selection", "statute_priority"]


def statute_priority(corpus: StatuteCorpus, ids: list[str], cited: list[str]) -> list[str]:
    """``ids`` in the order they are kept under a budget (see the module doc); ``cited``: the cited nodes (none:
    each section's root)."""
    chosen = set(ids)
    if not cited:
        cited = corpus.sort_ids({corpus[node_id].section for node_id in ids} & set(corpus.nodes))
    path = {node_id for node in cited for node_id in (node, *corpus.ancestors(node))}
    below = {node_id for node in cited for node_id in corpus.subtree(node)} - set(cited)
    sections = {corpus[node].section for node in cited}
    line = {node: [node, *reversed(corpus.ancestors(node))] for node in cited}  # the cited node up to its root

    def distance(node_id: str) -> int:
        """Steps up from a cited node to the lowest of its ancestors that ``node_id`` descends from."""
        own = {node_id, *corpus.ancestors(node_id)}
        return min((steps for node in cited if corpus[node].section == corpus[node_id].section
                    for steps, up in enumerate(line[node]) if up in own), default=len(corpus.nodes))

    def key(node_id: str) -> tuple:
        node = corpus[node_id]
        if node_id in path:
            tier, near = 0, 0
        elif node_id in below:
            tier, near = 1, 0
        elif node.section in sections:
            tier, near = 2, distance(node_id)
        else:
            tier, near = 3, 0
        return tier, near, node.depth, corpus.order_key(node_id)

    return sorted(chosen, key=key)


def fit_statute_selection(corpus: StatuteCorpus, selection: StatuteSelection, max_tokens: int,
                          count_tokens: Callable[[str], int]) -> StatuteSelection:
    """``selection`` cut to at most ``max_tokens`` tokens of text (``count_tokens``), the most important
    subsections kept whole; unchanged when it fits. ``truncated`` / ``dropped_ids`` say what was cut."""
    if not selection.text or count_tokens(selection.text) <= max_tokens:
        return selection
    chosen = set(selection.subsection_ids)
    kept: list[str] = []
    kept_set: set[str] = set()
    titled: set[str] = set()
    used = 0
    for node_id in statute_priority(corpus, selection.subsection_ids, selection.cited_ids):
        node = corpus[node_id]
        if node.parent in chosen and node.parent not in kept_set:
            continue  # its parent was left out: the line would hang without its context
        lines = "\n".join(text for _, text in node_lines(corpus, node_id))
        cost = (count_tokens(lines) + 1 if lines else 0) + (
            0 if node.section in titled else count_tokens(section_title(corpus, node.section)) + 2)
        if used + cost > max_tokens:
            continue
        used += cost
        kept.append(node_id)
        kept_set.add(node_id)
        titled.add(node.section)
    text = render_subsections(corpus, kept)
    while kept and count_tokens(text) > max_tokens:  # the joins cost more than the parts: drop the last kept leaf
        leaf = next(node_id for node_id in reversed(kept) if not set(corpus[node_id].children) & kept_set)
        kept.remove(leaf)
        kept_set.discard(leaf)
        text = render_subsections(corpus, kept)
    ids = corpus.sort_ids(kept)
    return dataclasses.replace(selection, subsection_ids=ids, text=text if kept else "", truncated=True,
                               dropped_ids=corpus.sort_ids(chosen - kept_set))
