"""Resolve the references a statute sentence makes to other subsections.

Absolute: "section 152(c)", "section 151" (the whole section), "sections 152(c)(2) and 152(c)(3)".
Relative, read against the citing subsection's position in its tree:

* "subsection (b)"            -> the citing section's subsection (b)
* "paragraph (2)", "paragraphs (1) and (2)", "paragraph (1) or (2)" -> paragraphs of the citing subsection
* "paragraph (1)(A)"          -> subparagraph (A) of that paragraph
* "subparagraph (B)" / "clause (ii)" / "subclause (I)" -> within the citing paragraph / subparagraph / clause
* "subparagraph (H) of section 152(d)(2)" -> 152(d)(2)(H)

A relative reference of level L is looked up under the citing node's ancestor one level above L; if
that node has no such child (statutes skip levels, e.g. 3306(c)(A)), the next ancestors up are tried.
"this paragraph" / "this subsection" / "the succeeding paragraphs" name no specific subsection and are
ignored, as are citations of other acts and of sections that are not in the corpus.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from knapsack_dspy.docqa.retrieval.citations import extract_citations, parse_labels
from knapsack_dspy.docqa.retrieval.statute_corpus import StatuteCorpus
from knapsack_dspy.docqa.retrieval.statute_tree import KIND_DEPTH, Subsection, make_id

__all__ = ["Reference", "find_references"]

_GROUP = r"(?:\([A-Za-z0-9]{1,6}\))+"
_RELATIVE_RE = re.compile(
    rf"\b(?P<level>subsection|paragraph|subparagraph|subclause|clause)s?\s+(?P<first>{_GROUP})"
    rf"(?P<more>(?:\s*(?:,\s*(?:and\s+|or\s+)?|\s+and\s+|\s+or\s+){_GROUP})*)"
    rf"(?P<of>\s+of\s+section\s+(?P<section>[0-9]+[A-Za-z]?)(?P<path>(?:\([A-Za-z0-9]{{1,6}}\))*))?"
)


@dataclass(frozen=True)
class Reference:
    """One reference found in a sentence: ``target`` is a node id or None when it did not resolve."""

    text: str
    target: str | None


def _relative_target(corpus: StatuteCorpus, citing: Subsection, level: str,
                     labels: tuple[str, ...]) -> str | None:
    depth = KIND_DEPTH[level]
    chain = [*corpus.ancestors(citing.id), citing.id]
    # Start from the ancestor just above the referenced level, then walk up.
    start = min(depth - 1, len(chain) - 1)
    for base_id in reversed(chain[: start + 1]):
        base = corpus[base_id]
        candidate = make_id(base.section, base.labels + labels)
        if candidate in corpus:
            return candidate
    return None


def find_references(text: str, citing: Subsection, corpus: StatuteCorpus) -> list[Reference]:
    """References made by ``text`` (a sentence of ``citing``), in order of appearance."""
    refs: list[Reference] = []
    covered: list[tuple[int, int]] = []
    for match in _RELATIVE_RE.finditer(text):
        groups = [match.group("first"), *re.findall(_GROUP, match.group("more") or "")]
        if match.group("of"):
            base, rest = corpus.resolve(match.group("section"), parse_labels(match.group("path") or ""))
            covered.append(match.span("of"))
            for group in groups:
                target = None
                if base is not None and not rest:
                    candidate = make_id(base.section, base.labels + parse_labels(group))
                    target = candidate if candidate in corpus else None
                refs.append(Reference(match.group(0), target))
            continue
        for group in groups:
            target = _relative_target(corpus, citing, match.group("level"), parse_labels(group))
            refs.append(Reference(f"{match.group('level')} {group}", target))
    for citation in extract_citations(text):
        if any(start <= citation.start < end for start, end in covered):
            continue
        node, rest = corpus.resolve_citation(citation)
        if node is None:
            continue  # a section outside the corpus
        refs.append(Reference(citation.text, node.id if not rest else None))
    return refs
