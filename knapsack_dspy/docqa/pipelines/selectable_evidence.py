"""What a query's prompt offers when its evidence is chosen by the knapsack (``evidence_selection="knapsack"``)
rather than by today's fixed rules (docs/retrieval.md, "Selectable evidence").

``DocumentQA`` offers the whole document -- every data row under the table's header rows, every paragraph (FinQA:
every pre / post-text sentence) -- cut, for a very long document, to the :data:`MAX_OFFERED_PIECES` rows and
paragraphs most similar to the question (:func:`offered_document`); the solver turns them into pieces
(``solvers/document_pieces.py``). ``StatuteQA`` offers the statute text its retrieval strategy picks, before any
token cut, as pieces (:func:`statute_pieces`): each subsection of a section (a depth-1 node with the picked nodes
under it; a section's own text, when it has some, a piece of its own), the section's title line (``§7703.
Determination of marital status``) the fixed part its pieces need. :func:`shown_document` maps a selection's kept
pieces back to the document's rows and paragraphs (what a prompt showed).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from knapsack_dspy.docqa.retrieval.ranking import top_n_in_order
from knapsack_dspy.docqa.retrieval.statute_corpus import StatuteCorpus
from knapsack_dspy.docqa.retrieval.statute_strategies import node_lines, render_subsections, section_title
from knapsack_dspy.docqa.retrieval.table_rows import row_text
from knapsack_dspy.docqa.table_layout import header_row_count
from knapsack_dspy.modules.selectable_context import Pieces

__all__ = ["EVIDENCE_SELECTIONS", "MAX_OFFERED_PIECES", "OfferedDocument", "StatuteUnits", "evidence_problem",
           "offered_document", "shown_document", "statute_pieces"]

#: How a pipeline chooses a query's evidence: today's fixed rules (the default) or one knapsack with the demos.
EVIDENCE_SELECTIONS = ("rules", "knapsack")
#: The most pieces a query offers (data rows and paragraphs together): a longer document is cut to the most similar
#: to the question first (FinQA: 9 of dev_docs_pool's 544 questions have more, 5 of dev_docs_tune's 304; no TAT-QA
#: question: at most 32).
MAX_OFFERED_PIECES = 60


def evidence_problem(evidence_selection: str, pipeline: str) -> str | None:
    """Why a pipeline cannot choose its evidence so (``None``: it can): an unknown setting, or the knapsack for a
    pipeline without demos (nothing to choose the evidence with)."""
    if evidence_selection not in EVIDENCE_SELECTIONS:
        return f"evidence_selection must be one of {', '.join(EVIDENCE_SELECTIONS)}, got {evidence_selection!r}"
    if evidence_selection != "rules" and pipeline == "zero_shot":
        return ("evidence_selection 'knapsack' chooses the evidence with the demos in one knapsack; the zero_shot "
                "pipeline selects nothing (use few_shot, cot or a program pipeline)")
    return None


@dataclass(frozen=True)
class OfferedDocument:
    """The rows (``row_ids``: the header rows and the data rows offered, ascending indices into the table) and the
    paragraphs (``paragraph_ids``) a query offers as pieces."""

    row_ids: list[int]
    paragraph_ids: list[int]


def offered_document(table: Sequence[Sequence], paragraphs: Sequence[str], similarities=None,
                     cap: int = MAX_OFFERED_PIECES) -> OfferedDocument:
    """Every row and paragraph of the document, or with more than ``cap`` data rows and paragraphs together the
    ``cap`` most similar to the question (``similarities(texts) -> scores``: the retriever's; ties: the earlier),
    in document order, with the header rows whenever a data row is offered."""
    rows = [[str(c) for c in row] for row in (table or [])]
    first = header_row_count(rows) if rows else 0
    data = list(range(first, len(rows)))
    texts = [str(p) for p in (paragraphs or [])]
    if len(data) + len(texts) <= cap:
        return OfferedDocument(list(range(len(rows))), list(range(len(texts))))
    if similarities is None:
        raise ValueError(f"a document of {len(data) + len(texts)} pieces needs similarities to be cut to {cap}")
    scores = similarities([row_text(rows[i]) for i in data] + texts)
    kept = top_n_in_order(scores, cap)
    row_ids = [data[k] for k in kept if k < len(data)]
    return OfferedDocument(list(range(first)) + row_ids if row_ids else [],
                           [k - len(data) for k in kept if k >= len(data)])


def shown_document(offered: OfferedDocument, table: Sequence[Sequence],
                   pieces: Mapping[str, Sequence[int]] | None) -> tuple[list[int], list[int]]:
    """(row ids, paragraph ids) of the document a prompt showed, given the selection's ``pieces`` (``{"table":
    kept, "text": kept}``, indices into the offered rows / paragraphs as ``document_pieces`` numbers them): the
    header rows and the kept data rows, the kept paragraphs; a field whose value was not cut (no pieces of it) shows
    all it was offered."""
    pieces = pieces or {}
    offered_rows = [[str(c) for c in table[i]] for i in offered.row_ids]
    row_ids = list(offered.row_ids)
    if "table" in pieces and offered_rows:
        first = header_row_count(offered_rows)
        kept = sorted(int(k) for k in pieces["table"])
        row_ids = [offered.row_ids[i] for i in range(first)] + [offered.row_ids[first + k] for k in kept] \
            if kept else []
    paragraph_ids = list(offered.paragraph_ids)
    if "text" in pieces:
        paragraph_ids = [offered.paragraph_ids[int(k)] for k in sorted(pieces["text"])]
    return row_ids, paragraph_ids


class StatuteUnits:
    """``render`` of a statute's pieces: the kept units' lines under their sections' title lines, exactly as
    ``statute_strategies.render_subsections`` writes those nodes (sections in statute order, each opening with its
    title, its lines in file order; sections apart by a blank line). Holds the rendered lines, not the corpus."""

    def __init__(self, units: Sequence[tuple[str, Sequence[tuple[int, str]]]], titles: Mapping[str, str]):
        self.units = [(section, [(int(n), str(text)) for n, text in lines]) for section, lines in units]
        self.titles = dict(titles)

    def __call__(self, kept: tuple[int, ...]) -> str:
        by_section: dict[str, list[tuple[int, str]]] = {}
        for k in kept:
            section, lines = self.units[k]
            by_section.setdefault(section, []).extend(lines)
        return "\n\n".join("\n".join([self.titles[section]] + [text for _, text in sorted(lines)])
                           for section, lines in by_section.items())

    def __repr__(self) -> str:
        return f"StatuteUnits({len(self.units)} units of {len(self.titles)} sections)"


def statute_pieces(corpus: StatuteCorpus, ids: Sequence[str], similarities=None,
                   cap: int = MAX_OFFERED_PIECES) -> Pieces | str:
    """The statute text of the nodes ``ids`` (a strategy's pick) as pieces: one per depth-1 subsection (its nodes
    among ``ids``), a section's own text (a root with sentences) one of its own, each needing its section's title
    line (the fixed part); more than ``cap`` units: the most similar to the question (``similarities``). Nodes that
    make no piece (sections' titles alone) are plain text; no node: ``""``."""
    units: dict[tuple[str, str], list[str]] = {}
    for node_id in corpus.sort_ids(ids):
        node = corpus[node_id]
        if node.depth == 0 and not node.sentences:
            continue  # a root's title is the fixed part
        top = node_id if node.depth <= 1 else corpus.ancestors(node_id)[1]
        units.setdefault((node.section, top), []).append(node_id)
    if not units:
        return render_subsections(corpus, ids) if ids else ""
    keys = list(units)
    lines = [[line for node_id in units[key] for line in node_lines(corpus, node_id)] for key in keys]
    texts = ["\n".join(text for _, text in sorted(unit)) for unit in lines]
    if len(keys) > cap:
        if similarities is None:
            raise ValueError(f"a statute of {len(keys)} pieces needs similarities to be cut to {cap}")
        kept = top_n_in_order(similarities(texts), cap)
        keys, lines, texts = [keys[k] for k in kept], [lines[k] for k in kept], [texts[k] for k in kept]
    sections = list(dict.fromkeys(section for section, _ in keys))
    titles = {section: section_title(corpus, section) for section in sections}
    return Pieces(tuple(texts), StatuteUnits([(section, unit) for (section, _), unit in zip(keys, lines, strict=True)],
                                             titles),
                  needs=tuple(sections.index(section) for section, _ in keys),
                  fixed_texts=tuple(titles[section] for section in sections))
