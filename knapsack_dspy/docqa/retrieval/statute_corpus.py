"""A set of parsed statute sections with id lookup, tree walks and citation resolution."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path

from knapsack_dspy.docqa.retrieval.citations import Citation
from knapsack_dspy.docqa.retrieval.statute_tree import (
    Statute,
    StatuteParseError,
    Subsection,
    make_id,
    parse_statute,
)

__all__ = ["StatuteCorpus"]

_FILE_RE = re.compile(r"^section(?P<number>[0-9]+[A-Za-z]?)\.txt$")


def _section_key(number: str) -> tuple[int, str]:
    digits = re.match(r"[0-9]+", number)
    return (int(digits.group(0)) if digits else 0, number)


class StatuteCorpus:
    """Parsed statute sections, ordered by section number.

    Build with :meth:`from_texts` (``{"7703": "§7703. ..."}``, e.g. ``knapsack_dspy.docqa.data.load_statutes()``)
    or :meth:`from_directory` (a folder of ``section<N>.txt`` files).
    """

    def __init__(self, statutes: Iterable[Statute]):
        ordered = sorted(statutes, key=lambda s: _section_key(s.number))
        self.statutes: dict[str, Statute] = {s.number: s for s in ordered}
        self.nodes: dict[str, Subsection] = {}
        self._order: dict[str, tuple[int, int]] = {}
        for s_index, statute in enumerate(ordered):
            for n_index, (node_id, node) in enumerate(statute.nodes.items()):
                self.nodes[node_id] = node
                self._order[node_id] = (s_index, n_index)

    @classmethod
    def from_texts(cls, texts: Mapping[str, str]) -> StatuteCorpus:
        """Parse ``{section number: statute text}``; errors name the section."""
        statutes = []
        for number, text in texts.items():
            number = str(number).removeprefix("section").strip()
            statutes.append(parse_statute(number, text))
        return cls(statutes)

    @classmethod
    def from_directory(cls, path: str | os.PathLike) -> StatuteCorpus:
        """Parse every ``section<N>.txt`` in ``path``; errors name the file."""
        folder = Path(path)
        files = sorted(p for p in folder.glob("section*.txt") if _FILE_RE.match(p.name))
        if not files:
            raise FileNotFoundError(f"no section<N>.txt statute files in {str(folder)!r}")
        statutes = []
        for file in files:
            number = _FILE_RE.match(file.name).group("number")
            try:
                statutes.append(parse_statute(number, file.read_text(encoding="utf-8")))
            except StatuteParseError as exc:
                raise StatuteParseError(f"{file}: {exc}") from exc
        return cls(statutes)

    def __contains__(self, node_id: str) -> bool:
        return node_id in self.nodes

    def __getitem__(self, node_id: str) -> Subsection:
        return self.nodes[node_id]

    def order_key(self, node_id: str) -> tuple[int, int]:
        """Sort key putting ids in statute order (section number, then document order)."""
        return self._order[node_id]

    def sort_ids(self, ids: Iterable[str]) -> list[str]:
        return sorted(set(ids), key=self.order_key)

    def resolve(self, section: str, labels: tuple[str, ...]) -> tuple[Subsection | None, tuple[str, ...]]:
        """The deepest existing node along ``section(labels...)`` and the labels that did not resolve.

        ``(None, labels)`` when the section is not in the corpus. Example: ``151(d)(5)(A)`` resolves to
        ``151(d)(5)`` with ``("A",)`` left over, because the SARA text of 151(d)(5) has no (A).
        """
        if section not in self.statutes:
            return None, tuple(labels)
        node = self.statutes[section].root
        for i, label in enumerate(labels):
            child_id = make_id(section, (*node.labels, label))
            if child_id not in self.nodes:
                return node, tuple(labels[i:])
            node = self.nodes[child_id]
        return node, ()

    def resolve_citation(self, citation: Citation) -> tuple[Subsection | None, tuple[str, ...]]:
        return self.resolve(citation.section, citation.labels)

    def ancestors(self, node_id: str) -> list[str]:
        """Ids from the section root down to the parent of ``node_id``."""
        out = []
        parent = self.nodes[node_id].parent
        while parent is not None:
            out.append(parent)
            parent = self.nodes[parent].parent
        return out[::-1]

    def subtree(self, node_id: str) -> list[str]:
        """``node_id`` and all its descendants, in document order."""
        out, pending = [], [node_id]
        while pending:
            current = pending.pop()
            out.append(current)
            pending.extend(reversed(self.nodes[current].children))
        return out
