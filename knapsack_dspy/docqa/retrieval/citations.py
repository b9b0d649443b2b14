"""Find statute citations such as "section 2(a)(1)(B)" or "sections 152(c)(2) and 152(c)(3)" in text.

SARA hypotheses cite the subsection they test ("Alice is a surviving spouse under section 2(a)(1)(B)",
"Section 7703(b)(3) applies to Alice ..."); statute text cites other sections ("as defined in section
152(c)"). A citation is a section number followed by zero or more parenthesised labels. Recognised
forms: "section N(...)", "Section N", "sec. N", "§ N", and lists after a plural or a first citation
("sections 1 and 2", "section 152(c)(2) and 152(c)(3)"). A citation followed by "of the <Name> Act"
or "of title <n>" points outside this code and is flagged ``external``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["Citation", "extract_citations", "parse_labels"]

_LABELS = r"(?:\([A-Za-z0-9]{1,6}\))*"
_ITEM = rf"(?P<number>[0-9]+[A-Za-z]?)(?![0-9A-Za-z])(?P<path>{_LABELS})"
_HEAD_RE = re.compile(rf"(?P<word>\b[Ss]ections?\b|\b[Ss]ecs?\.|§§?)\s*{_ITEM}")
_NEXT_RE = re.compile(rf"\s*(?:,\s*(?:and\s+|or\s+)?|\s+and\s+|\s+or\s+|\s+through\s+){_ITEM}")
_EXTERNAL_RE = re.compile(
    r"\s+of\s+(?:the\s+)?(?:(?:[A-Z][\w'-]*|and|of|the|for|on)\s+)*Act\b|\s+of\s+title\s+\d+")


def parse_labels(path: str) -> tuple[str, ...]:
    """``"(a)(1)(B)"`` -> ``("a", "1", "B")``."""
    return tuple(re.findall(r"\(([A-Za-z0-9]+)\)", path))


@dataclass(frozen=True)
class Citation:
    """A citation of ``section`` (e.g. ``"2"``) down to ``labels`` (e.g. ``("a", "1", "B")``)."""

    section: str
    labels: tuple[str, ...] = ()
    text: str = ""  # the span as written
    start: int = -1  # character offset in the searched text
    external: bool = False  # cites another act ("... of the Immigration and Nationality Act")

    @property
    def id(self) -> str:
        return self.section + "".join(f"({label})" for label in self.labels)


def extract_citations(text: str, include_external: bool = False) -> list[Citation]:
    """All citations in ``text``, in order of appearance, duplicates (same id) removed.

    Bare numbers after "and"/"or" are only taken after a plural ("sections 1 and 2") or when they carry
    labels ("section 152(c)(2) and 152(c)(3)"), so "section 151 and 2017" does not cite "2017".
    """
    text = str(text or "")
    found: list[Citation] = []
    position = 0
    while True:
        head = _HEAD_RE.search(text, position)
        if head is None:
            break
        plural = head.group("word").lower() in ("sections", "§§", "secs.")
        group = [(head.group("number"), head.group("path"), head.start(), head.end())]
        cursor = head.end()
        while True:
            nxt = _NEXT_RE.match(text, cursor)
            if nxt is None or not (plural or nxt.group("path")):
                break
            group.append((nxt.group("number"), nxt.group("path"), nxt.start("number"), nxt.end()))
            cursor = nxt.end()
        external = bool(_EXTERNAL_RE.match(text, cursor))
        for number, path, start, end in group:
            found.append(Citation(number, parse_labels(path), text[start:end].strip(), start, external))
        position = cursor
    seen: set[str] = set()
    out = []
    for citation in found:
        if citation.external and not include_external:
            continue
        if citation.id not in seen:
            seen.add(citation.id)
            out.append(citation)
    return out
