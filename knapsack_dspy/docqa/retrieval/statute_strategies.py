"""Pick the statute text for a question: three strategies over the cited subsections.

* ``mentioned_only``: the sentences of each cited subsection itself plus its ancestors' own sentences
  (the lead-ins and headings that give the cited text its context), not its descendants.
* ``entire_section``: the whole subtree of each cited subsection (for "section 2(b)(1)": 2(b)(1) and
  every (A), (i), (I) under it), without ancestors.
* ``references``: ``mentioned_only`` and ``entire_section`` together, plus the whole subtree of every
  subsection that their sentences refer to (absolute "section 152(c)" or relative "paragraph (2)"),
  one level deep (references of referenced text are not followed).

So ``mentioned_only ⊆ entire_section ∪ ancestors`` and ``references ⊇ mentioned_only ∪ entire_section``.
A citation whose deepest labels do not exist (SARA's "151(d)(5)(A)") is served from its deepest
existing ancestor and reported in ``partial``; one whose section is not in the corpus goes to
``unresolved``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from knapsack_dspy.docqa.retrieval.citations import Citation
from knapsack_dspy.docqa.retrieval.statute_corpus import StatuteCorpus
from knapsack_dspy.docqa.retrieval.statute_references import find_references

__all__ = ["STRATEGIES", "StatuteSelection", "node_lines", "render_subsections", "rule_text", "section_title",
           "select_statute_text"]

STRATEGIES = ("mentioned_only", "entire_section", "references")
INDENT = "    "


@dataclass
class StatuteSelection:
    """What a strategy picked: node ids in statute order and the rendered text."""

    strategy: str
    subsection_ids: list[str]
    text: str
    cited_ids: list[str] = field(default_factory=list)  # resolved cited nodes
    partial: list[str] = field(default_factory=list)  # citations served by an ancestor ("151(d)(5)(A)")
    unresolved: list[str] = field(default_factory=list)  # citations of sections not in the corpus
    referenced_ids: list[str] = field(default_factory=list)  # ``references`` only: nodes referred to
    truncated: bool = False  # cut to a token budget (``statute_budget.fit_statute_selection``)
    dropped_ids: list[str] = field(default_factory=list)  # the picked nodes the budget left out


def render_subsections(corpus: StatuteCorpus, ids: Sequence[str]) -> str:
    """Statute text of the given nodes, in statute order, as an indented outline.

    Each section starts with its title line (``§2. Definitions and special rules``); each node shows its
    full id and heading (``2(a)(1) In general``) and its own sentences, indented by depth. Text that
    follows a node's children in the file (``such individual shall not be considered as married.`` after
    7703(b)(1)-(3)) stays after them: lines are ordered by their position in the file.
    """
    by_section: dict[str, list[tuple[int, str]]] = {}
    for node_id in corpus.sort_ids(ids):
        by_section.setdefault(corpus[node_id].section, []).extend(node_lines(corpus, node_id))
    parts = []
    for section, items in by_section.items():
        parts.append("\n".join([section_title(corpus, section)] + [text for _, text in sorted(items)]))
    return "\n\n".join(parts)


def section_title(corpus: StatuteCorpus, section: str) -> str:
    """The title line a section's text opens with in ``render_subsections`` (``§2. Definitions and ...``)."""
    statute = corpus.statutes[section]
    return f"§{statute.number}. {statute.title}".rstrip()


def node_lines(corpus: StatuteCorpus, node_id: str) -> list[tuple[int, str]]:
    """(line number in the file, rendered line) of one node in ``render_subsections``: its label line with its
    heading (and the body written on it) and its own sentences, indented by depth."""
    node = corpus[node_id]
    indent = INDENT * max(node.depth - 1, 0)
    blocks: dict[int, list[str]] = {}
    for sentence in node.sentences:
        blocks.setdefault(sentence.position[0], []).append(sentence.text)
    items = []
    if node.depth:
        label_line = f"{indent}{node.id} {node.heading}".rstrip()
        if node.line in blocks:  # body written on the label line: "(1) every married individual ..."
            label_line += " " + " ".join(blocks.pop(node.line))
        items.append((node.line, label_line))
    for line_number, texts in blocks.items():
        items.append((line_number, indent + " ".join(texts)))
    return items

#: How a subsection's own text ends when its substance is in its children ("an individual-", "unless-").
_LEAD_IN_ENDINGS = ("-", "\u2014", ":")


def rule_text(corpus: StatuteCorpus, node_id: str) -> str:
    """A subsection's text as a rule to quote: its own sentences and, when one of them leads in to its children
    (``an individual-``, ``unless-``) or it has none, its descendants' (each one's first sentence after its label,
    ``(A) who bears ...``), in file order (a sentence after the children stays after them)."""
    node = corpus[node_id]
    parts = [(sentence.position, sentence.text) for sentence in node.sentences]
    lead_in = any(sentence.text.rstrip().endswith(_LEAD_IN_ENDINGS) for sentence in node.sentences)
    if lead_in or not node.sentences:
        for descendant_id in corpus.subtree(node_id)[1:]:
            descendant = corpus[descendant_id]
            for index, sentence in enumerate(descendant.sentences):
                label = f"({descendant.label}) " if index == 0 else ""
                parts.append((sentence.position, label + sentence.text))
    return " ".join(text for _, text in sorted(parts))



def select_statute_text(corpus: StatuteCorpus, citations: Sequence[Citation],
                        strategy: str = "mentioned_only") -> StatuteSelection:
    """Apply ``strategy`` to ``citations`` (e.g. from :func:`extract_citations`)."""
    if strategy not in STRATEGIES:
        raise ValueError(f"unknown statute retrieval strategy {strategy!r}; "
                         f"choose one of {', '.join(STRATEGIES)}")
    cited: list[str] = []
    partial: list[str] = []
    unresolved: list[str] = []
    for citation in citations:
        node, rest = corpus.resolve_citation(citation)
        if node is None:
            unresolved.append(citation.id)
            continue
        if rest:
            partial.append(citation.id)
        if node.id not in cited:
            cited.append(node.id)

    mentioned = set()
    for node_id in cited:
        mentioned.add(node_id)
        mentioned.update(corpus.ancestors(node_id))
    entire = {desc for node_id in cited for desc in corpus.subtree(node_id)}

    referenced: list[str] = []
    if strategy == "mentioned_only":
        chosen = mentioned
    elif strategy == "entire_section":
        chosen = entire
    else:
        chosen = mentioned | entire
        for node_id in corpus.sort_ids(chosen):
            node = corpus[node_id]
            for sentence in node.sentences:
                for ref in find_references(sentence.text, node, corpus):
                    if ref.target is not None and ref.target not in referenced:
                        referenced.append(ref.target)
        for target in referenced:
            chosen = chosen | set(corpus.subtree(target))
        referenced = corpus.sort_ids(referenced)

    ids = corpus.sort_ids(chosen)
    return StatuteSelection(strategy=strategy, subsection_ids=ids, text=render_subsections(corpus, ids),
                            cited_ids=corpus.sort_ids(cited), partial=partial, unresolved=unresolved,
                            referenced_ids=referenced)
