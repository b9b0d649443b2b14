"""Parse one statute section (US Code style) into its subsection hierarchy, sentence by sentence.

A section is a tree: section -> subsection ``(a)`` -> paragraph ``(1)`` -> subparagraph ``(A)`` ->
clause ``(i)`` -> subclause ``(I)``. Node ids spell the path: ``"7703"``, ``"7703(a)(1)"``,
``"2(b)(1)(A)(i)(I)"``. Every sentence of the text belongs to exactly one node: the most specific
subsection whose *own* text it is (a lead-in such as "the term ... means a taxpayer-" belongs to the
paragraph, the items after it to their subparagraphs, and a trailing "For purposes of this paragraph,
..." after the items belongs to the paragraph again).

Two layouts are understood:

* **Indented** (the SARA files): a label line ``(x) ...`` is a child of the nearest preceding label line
  with *smaller* indentation; a plain text line belongs to the innermost open node whose label line has
  the same (or smaller) indentation. Headings sit on their own line (``(a) Definition of surviving
  spouse``) and the body follows.
* **Flat** (no label line is indented, e.g. ``(a) In general.—There is ...`` as printed by the
  Office of the Law Revision Counsel): nesting follows the label kinds.

Label kinds and the roman-numeral ambiguity. Lower-case ``(i)``, ``(v)``, ``(x)`` may be subsection
letters or clause numerals; upper-case ``(I)``, ``(V)`` may be subparagraph letters or subclause
numerals. They are resolved by nesting context: a label that continues its previous sibling's sequence
takes the sibling's kind (``(I)`` after ``(H)`` is a subparagraph, ``(v)`` after ``(iv)`` a clause);
otherwise a lower-case label directly under the section is a subsection and anywhere deeper a clause
(so ``1(a)(i)`` - the rate brackets under section 1(a) - is a clause), and an upper-case roman label
under a clause is a subclause. In the flat layout, ``(i)``/``(I)`` start a clause/subclause list when a
paragraph/clause is open, and other numerals continue an open clause/subclause list when their value is
larger, else they are letters.

Labels are only structural at the start of a line; inline enumerations such as "... (i) who is a son
..., and (ii) with respect to whom ..." stay part of the sentence.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from knapsack_dspy.errors import KnapsackDspyError

__all__ = [
    "KIND_DEPTH",
    "Sentence",
    "Statute",
    "StatuteParseError",
    "Subsection",
    "parse_statute",
    "roman_value",
    "split_sentences",
]

KIND_DEPTH = {"section": 0, "subsection": 1, "paragraph": 2, "subparagraph": 3, "clause": 4, "subclause": 5}

_TITLE_RE = re.compile(r"^\s*§+\s*(?P<number>[0-9]+[A-Za-z]?)\.\s*(?P<title>.*?)\s*$")
_LABEL_RE = re.compile(
    r"^(?P<indent>[ \t]*)\((?P<label>[0-9]+[A-Za-z]?|[A-Za-z]{1,6})\)(?=\s|$)(?P<rest>.*)$")
# "(a) In general.—There is ..."  /  "(a) In general —" : a short heading, an em dash, then the body.
_DASH_HEADING_RE = re.compile(r"^(?P<heading>[^—.;:]{1,120}?)\.?\s*—\s*(?P<body>.*)$")
_TERMINAL_PUNCT = tuple(".,;:-—–")
_ROMAN_RE = re.compile(r"^(?=[ivxlc]+$)c{0,3}(xc|xl|l?x{0,3})(ix|iv|v?i{0,3})$")
_ROMAN_VALUES = {"i": 1, "v": 5, "x": 10, "l": 50, "c": 100}
# Sentence ends: ". " / "? " / "! " followed by an upper-case letter, a digit, a quote or "(".
_SENTENCE_END_RE = re.compile(r"(?<=[.?!])\s+(?=[A-Z0-9\"“(])")
_ABBREVIATIONS = ("sec.", "secs.", "u.s.", "no.", "e.g.", "i.e.", "jan.", "feb.", "mar.", "apr.", "aug.",
                  "sept.", "oct.", "nov.", "dec.", "etc.", "inc.", "co.", "st.", "v.", "pub.", "stat.")


class StatuteParseError(KnapsackDspyError, ValueError):
    """A statute text could not be parsed (the message names the section and the line)."""


def roman_value(label: str) -> int | None:
    """The value of a roman numeral label (``"iv"`` -> 4, ``"IV"`` -> 4), or None if it is not one."""
    low = label.lower()
    if not low or not _ROMAN_RE.match(low):
        return None
    total, previous = 0, 0
    for char in reversed(low):
        value = _ROMAN_VALUES[char]
        total = total - value if value < previous else total + value
        previous = max(previous, value)
    return total


def split_sentences(text: str) -> list[str]:
    """Split a block of statute text into sentences (keeps "$35,928.50", "sec. 7" and "U.S." intact)."""
    text = " ".join(text.split())
    if not text:
        return []
    pieces: list[str] = []
    start = 0
    for match in _SENTENCE_END_RE.finditer(text):
        candidate = text[start:match.start()]
        last_word = candidate.rsplit(" ", 1)[-1].lower()
        if last_word in _ABBREVIATIONS or re.fullmatch(r"[a-z]\.", last_word):
            continue
        pieces.append(candidate)
        start = match.end()
    pieces.append(text[start:])
    return [p for p in pieces if p]


@dataclass(frozen=True)
class Sentence:
    """One sentence of statute text, owned by its most specific subsection."""

    subsection_id: str
    text: str
    position: tuple[int, int]  # (line number in the file, sentence index in that line's block)


@dataclass
class Subsection:
    """A node of a section's hierarchy (the section itself is the root, with ``labels == ()``)."""

    id: str
    section: str
    labels: tuple[str, ...]
    kind: str  # section | subsection | paragraph | subparagraph | clause | subclause
    heading: str = ""
    line: int = 0  # 1-based line number of the label (or title) line
    parent: str | None = None
    children: list[str] = field(default_factory=list)
    sentences: list[Sentence] = field(default_factory=list)

    @property
    def depth(self) -> int:
        return len(self.labels)

    @property
    def label(self) -> str:
        return self.labels[-1] if self.labels else ""

    @property
    def own_text(self) -> str:
        return " ".join(s.text for s in self.sentences)


@dataclass
class Statute:
    """One parsed section: ``nodes`` maps subsection id -> node, in document order (root first)."""

    number: str
    title: str
    nodes: dict[str, Subsection]

    @property
    def root(self) -> Subsection:
        return self.nodes[self.number]

    def sentences(self) -> list[Sentence]:
        out = [s for node in self.nodes.values() for s in node.sentences]
        return sorted(out, key=lambda s: s.position)


def make_id(section: str, labels: tuple[str, ...] | list[str]) -> str:
    return section + "".join(f"({label})" for label in labels)


def _is_numeral(label: str) -> bool:
    """Could ``label`` be a clause/subclause numeral? Only i..xxxix-style numerals (letters i, v, x)."""
    return bool(re.fullmatch(r"[ivx]+", label.lower())) and roman_value(label) is not None


def _label_kind_indented(label: str, parent: Subsection, previous_sibling: Subsection | None) -> str:
    if label[0].isdigit():
        return "paragraph"
    if (previous_sibling is not None and previous_sibling.kind != "paragraph"
            and _continues(label, previous_sibling.label, previous_sibling.kind)):
        return previous_sibling.kind
    if label.islower():
        if parent.kind == "section":
            return "subsection"
        return "clause" if _is_numeral(label) else "subsection"
    if _is_numeral(label) and (parent.kind == "clause" or len(label) > 1):
        return "subclause"
    return "subparagraph"


def _continues(label: str, previous: str, kind: str) -> bool:
    """Whether ``label`` can follow ``previous`` in a list of ``kind`` (gaps allowed: SARA elides items)."""
    if kind in ("clause", "subclause"):
        a, b = roman_value(previous), roman_value(label)
        return a is not None and b is not None and b > a and label.islower() == previous.islower()
    if kind in ("subsection", "subparagraph"):
        same_case = label.islower() == previous.islower() and label.isalpha() and previous.isalpha()
        return same_case and (len(label), label.lower()) > (len(previous), previous.lower())
    return False


def _label_kind_flat(label: str, open_nodes: list[Subsection], has_dash_heading: bool) -> str:
    """Kind of a label in a flat (unindented) text, from the stack of open nodes (root first).

    Only the single letters i, v, x (and I, V, X) are ambiguous; multi-letter numerals (ii, iv, xi) are
    always clauses/subclauses. A single ambiguous letter is read as a numeral when it starts a list
    (``i`` under an open paragraph/subparagraph, ``I`` under an open clause) or continues the open
    numeral list (``v`` after clause ``iv``), and as a letter when it directly follows the open letter
    (``i`` after subsection ``h``). When both readings fit, a dash heading ("(i) Heading.—") means the
    letter, since subsections nearly always carry one.
    """
    if label[0].isdigit():
        return "paragraph"
    lower = label.islower()
    letter_kind, numeral_kind = ("subsection", "clause") if lower else ("subparagraph", "subclause")
    if not _is_numeral(label):
        return letter_kind
    if len(label) > 1:
        return numeral_kind
    open_by_kind = {node.kind: node for node in open_nodes}
    letter_open = open_by_kind.get(letter_kind)
    letter_ok = letter_open is not None and letter_open.label == chr(ord(label) - 1)
    numeral_open = open_by_kind.get(numeral_kind)
    if numeral_open is not None:
        numeral_ok = roman_value(label) > (roman_value(numeral_open.label) or 0)
    elif label in ("i", "I"):
        parent_kinds = ("paragraph", "subparagraph") if lower else ("clause",)
        numeral_ok = any(kind in open_by_kind for kind in parent_kinds)
    else:
        numeral_ok = False
    if numeral_ok and letter_ok:
        return letter_kind if has_dash_heading else numeral_kind
    return numeral_kind if numeral_ok else letter_kind


def _dash_heading(rest: str) -> tuple[str, str] | None:
    """``"In general.—For purposes ..."`` -> ``("In general", "For purposes ...")``; None if no such heading.

    The heading must be capitalised: "another thing, which is—" is a lead-in ending in a dash, not a heading.
    """
    match = _DASH_HEADING_RE.match(rest.strip())
    if match is None or not match.group("heading")[:1].isupper():
        return None
    return match.group("heading").strip(), match.group("body").strip()


def _split_heading(rest: str, next_is_body: bool) -> tuple[str, str]:
    """Split the text after a label into (heading, body)."""
    rest = rest.strip()
    if not rest:
        return "", ""
    dash = _dash_heading(rest)
    if dash:
        return dash
    # A heading stands alone ("(1) In general", body on the next line): capitalised, no final punctuation.
    # A lower-case lead-in without punctuation ("(A) service performed ..., if such service is performed"
    # followed by its clauses) is body text.
    if next_is_body and rest[0].isupper() and not rest.endswith(_TERMINAL_PUNCT):
        return rest, ""
    return "", rest


@dataclass
class _Line:
    number: int
    indent: int
    text: str
    label: str | None = None
    rest: str = ""


def _read_lines(text: str) -> list[_Line | None]:
    """Non-blank lines (with label split off) and ``None`` for blank lines."""
    out: list[_Line | None] = []
    for number, raw in enumerate(text.splitlines(), start=1):
        raw = raw.replace("\t", "    ").rstrip()
        if not raw.strip():
            out.append(None)
            continue
        indent = len(raw) - len(raw.lstrip(" "))
        match = _LABEL_RE.match(raw)
        if match:
            out.append(_Line(number, indent, raw.strip(), match.group("label"), match.group("rest")))
        else:
            out.append(_Line(number, indent, raw.strip()))
    return out


def parse_statute(number: str, text: str) -> Statute:
    """Parse the text of section ``number`` (e.g. ``"7703"``) into a :class:`Statute`.

    The first line may be a title ``§7703. Determination of marital status``; when present its number
    must match ``number``. Raises :class:`StatuteParseError` for an empty text, a mismatched title or a
    duplicated subsection id.
    """
    number = str(number).strip()
    if not text or not text.strip():
        raise StatuteParseError(f"section {number}: the statute text is empty")
    lines = _read_lines(text)
    title, title_line = "", 0
    first = next((i for i, line in enumerate(lines) if line is not None), None)
    title_match = _TITLE_RE.match(lines[first].text) if first is not None else None
    if title_match:
        if title_match.group("number") != number:
            raise StatuteParseError(
                f"section {number}: title line {lines[first].number} names section "
                f"{title_match.group('number')!r}")
        title = title_match.group("title")
        title_line = lines[first].number
        lines[first] = None
    indented = any(line is not None and line.label is not None and line.indent > 0 for line in lines)

    root = Subsection(id=number, section=number, labels=(), kind="section", heading=title,
                      line=title_line)
    nodes: dict[str, Subsection] = {root.id: root}
    stack: list[tuple[int, Subsection]] = [(-1, root)]  # (indent of the label line, node)
    blocks: list[tuple[Subsection, int, list[str]]] = []  # (owner, first line number, lines)
    last_block_open = False

    for index, line in enumerate(lines):
        if line is None:
            last_block_open = False
            continue
        if line.label is None:
            if last_block_open and blocks:
                blocks[-1][2].append(line.text)
                continue
            if indented:
                while len(stack) > 1 and stack[-1][0] > line.indent:
                    stack.pop()
            owner = stack[-1][1]
            blocks.append((owner, line.number, [line.text]))
            last_block_open = True
            continue

        next_line = next((nxt for nxt in lines[index + 1:] if nxt is not None), None)
        if indented:
            while len(stack) > 1 and stack[-1][0] >= line.indent:
                stack.pop()
            parent = stack[-1][1]
            siblings = parent.children
            previous = nodes[siblings[-1]] if siblings else None
            kind = _label_kind_indented(line.label, parent, previous)
            if next_line is None:
                next_is_body = False
            elif next_line.label is None:
                next_is_body = next_line.indent >= line.indent
            else:
                next_is_body = next_line.indent > line.indent
        else:
            has_dash = _dash_heading(line.rest) is not None
            kind = _label_kind_flat(line.label, [node for _, node in stack], has_dash)
            while len(stack) > 1 and KIND_DEPTH[stack[-1][1].kind] >= KIND_DEPTH[kind]:
                stack.pop()
            parent = stack[-1][1]
            if next_line is None:
                next_is_body = False
            elif next_line.label is None:
                next_is_body = True
            else:
                next_is_body = next_line.label in ("a", "1", "A", "i", "I")
        labels = (*parent.labels, line.label)
        node_id = make_id(number, labels)
        if node_id in nodes:
            raise StatuteParseError(
                f"section {number}, line {line.number}: subsection {node_id} appears twice "
                f"(first at line {nodes[node_id].line}); check the labels and indentation")
        heading, body = _split_heading(line.rest, next_is_body)
        node = Subsection(id=node_id, section=number, labels=labels, kind=kind, heading=heading,
                          line=line.number, parent=parent.id)
        nodes[node_id] = node
        parent.children.append(node_id)
        stack.append((line.indent, node))
        if body:
            blocks.append((node, line.number, [body]))
            last_block_open = True
        else:
            last_block_open = False

    for owner, line_number, texts in blocks:
        for i, sentence in enumerate(split_sentences(" ".join(texts))):
            owner.sentences.append(Sentence(owner.id, sentence, (line_number, i)))
    return Statute(number=number, title=title, nodes=nodes)
