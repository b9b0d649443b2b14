"""Statute hierarchy parsing, on the real SARA statutes and on small hand-written texts."""

from __future__ import annotations

import re

import pytest
from helpers import DATA

from knapsack_dspy.docqa.retrieval.statute_corpus import StatuteCorpus
from knapsack_dspy.docqa.retrieval.statute_tree import (
    StatuteParseError,
    parse_statute,
    roman_value,
    split_sentences,
)

DATA_DIR = DATA  # KDSPY_DATA_DIR, else ../shared/data beside the checkout (tests/helpers.py)
STATUTE_DIR = DATA_DIR / "sara" / "statutes"
LABEL_LINE = re.compile(r"^\s*\([0-9A-Za-z]+\)(\s|$)")


@pytest.fixture(scope="module")
def corpus() -> StatuteCorpus:
    if not STATUTE_DIR.is_dir():
        pytest.skip(f"SARA statutes not found in {STATUTE_DIR} (set KDSPY_DATA_DIR)")
    return StatuteCorpus.from_directory(STATUTE_DIR)


def test_every_label_line_becomes_one_node(corpus):
    for number, statute in corpus.statutes.items():
        text = (STATUTE_DIR / f"section{number}.txt").read_text(encoding="utf-8")
        label_lines = sum(1 for line in text.splitlines() if LABEL_LINE.match(line))
        assert len(statute.nodes) == label_lines + 1, number  # + the section root


def test_parse_counts(corpus):
    assert list(corpus.statutes) == ["1", "2", "63", "68", "151", "152", "3301", "3306", "7703"]
    counts = {number: len(s.nodes) for number, s in corpus.statutes.items()}
    assert counts == {"1": 27, "2": 23, "63": 38, "68": 11, "151": 11, "152": 31, "3301": 1, "3306": 42,
                      "7703": 8}
    assert len(corpus.nodes) == 192
    assert sum(len(s.sentences()) for s in corpus.statutes.values()) == 189


def test_every_sentence_belongs_to_exactly_one_node_and_covers_the_text(corpus):
    for number, statute in corpus.statutes.items():
        raw = (STATUTE_DIR / f"section{number}.txt").read_text(encoding="utf-8")
        words = " ".join(raw.split())
        for node in statute.nodes.values():
            for sentence in node.sentences:
                assert sentence.subsection_id == node.id
                assert sentence.text in words, (node.id, sentence.text)
        # Every word of the file is a label, a heading (the root's is the title) or in exactly one sentence.
        assert statute.root.heading == statute.title
        rebuilt = [n.heading for n in statute.nodes.values()]
        rebuilt += [s.text for s in statute.sentences()]
        n_labels = len(statute.nodes) - 1
        n_section_marks = 1 if raw.lstrip().startswith("§") else 0  # the "§1." token
        assert len(" ".join(rebuilt).split()) + n_labels + n_section_marks == len(words.split()), number


def test_titles_and_headings(corpus):
    assert corpus.statutes["7703"].title == "Determination of marital status"
    assert corpus["2(a)"].heading == "Definition of surviving spouse"
    assert corpus["2(a)(1)"].heading == "In general"
    assert corpus["151(d)(3)(B)"].heading == "Applicable percentage"
    # Lower-case lead-ins without punctuation are body text, not headings.
    assert corpus["3306(c)(10)(A)"].heading == ""
    assert corpus["3306(c)(10)(A)"].own_text.startswith("service performed in the employ of a school")
    assert corpus["3306(c)(10)"].heading == "" and corpus["3306(c)(10)"].own_text == ""
    # No final punctuation, but the next line is a sibling label: body text.
    assert corpus["3306(c)(6)"].own_text == "service performed in the employ of the United States Government"


def test_known_subsection_text(corpus):
    assert corpus["7703(a)(2)"].own_text == (
        "an individual legally separated from his spouse under a decree of divorce or of separate "
        "maintenance shall not be considered as married.")
    assert corpus["2(b)(1)(A)(i)(II)"].own_text == (
        "is not a dependent of such individual by reason of section 152(b)(2) or")
    assert corpus["1(c)(iii)"].own_text.startswith("$12,107, plus 31% of the excess over $53,500")
    assert corpus["3301"].own_text.startswith("There is hereby imposed on every employer")


def test_lead_in_and_trailing_text_belong_to_the_parent(corpus):
    own = [s.text for s in corpus["2(a)(1)"].sentences]
    assert own[0] == 'For purposes of section 1, the term "surviving spouse" means a taxpayer-'
    assert own[1].startswith("For purposes of this paragraph, an individual shall be considered")
    assert [s.text for s in corpus["7703(b)"].sentences] == [
        "For purposes of those provisions of this title which refer to this subsection, if-",
        "such individual shall not be considered as married."]
    # Section 1(a): the text between paragraphs (2) and the rate brackets belongs to 1(a).
    assert corpus["1(a)"].sentences[1].text == "a tax determined in accordance with the following:"


def test_sentence_splitting_inside_a_subsection(corpus):
    sentences = [s.text for s in corpus["151(d)(3)(B)"].sentences]
    assert len(sentences) == 3
    assert sentences[2] == "In no event shall the applicable percentage exceed 100 percent."
    assert len(corpus["2(a)(2)(B)"].sentences) == 2


def test_roman_numerals_vs_letters_resolved_by_nesting(corpus):
    # Rate brackets under 1(a) are clauses of the subsection, not paragraphs or subsections.
    assert corpus["1(a)"].children == ["1(a)(1)", "1(a)(2)", "1(a)(i)", "1(a)(ii)", "1(a)(iii)", "1(a)(iv)",
                                       "1(a)(v)"]
    assert corpus["1(a)(v)"].kind == "clause"
    assert corpus["2(b)(1)(A)(i)"].kind == "clause"
    assert corpus["2(b)(1)(A)(i)(I)"].kind == "subclause"
    assert corpus["2(b)(1)(A)(ii)"].parent == "2(b)(1)(A)"
    # Clauses directly under a paragraph (63(c)(7) skips the subparagraph level).
    assert corpus["63(c)(7)"].children == ["63(c)(7)(i)", "63(c)(7)(ii)"]
    # Subparagraphs directly under a subsection (3306(c)(A), (B)) next to its paragraphs.
    assert corpus["3306(c)"].children[:3] == ["3306(c)(A)", "3306(c)(B)", "3306(c)(1)"]
    assert corpus["152(d)(2)(H)"].kind == "subparagraph"


def test_gaps_in_numbering_are_kept(corpus):
    assert corpus["152(c)(1)"].children == ["152(c)(1)(A)", "152(c)(1)(B)", "152(c)(1)(C)", "152(c)(1)(E)"]
    assert "151(d)(4)" not in corpus and "151(d)(5)" in corpus


FLAT = """§9. Test section
(a) In general.—For purposes of this section—
(1) the first rule, and
(2) the second rule applies if—
(A) one thing, or
(B) another thing, which is—
(i) a first clause,
(ii) a second clause,
(iii) a third clause,
(iv) a fourth clause, or
(v) a fifth clause with—
(I) a subclause, and
(II) another subclause.
Text after the clauses.
(h) Eighth.—Text of (h).
(1) In general.—Paragraph text.
(A) sub A
(H) sub H
(I) sub I, a letter after H.
(i) Ninth.—Subsection i text.
(v) Twenty-second.—Not a numeral: no clause list is open.
"""


def test_flat_layout_with_dash_headings():
    statute = parse_statute("9", FLAT)
    nodes = statute.nodes
    assert nodes["9(a)"].heading == "In general"
    assert nodes["9(a)"].own_text == "For purposes of this section—"
    assert nodes["9(a)(2)"].heading == ""  # "the second rule applies if—" is a lead-in, not a heading
    assert nodes["9(a)(2)(B)(v)"].kind == "clause"  # continues (iv)
    assert nodes["9(a)(2)(B)(v)(II)"].kind == "subclause"
    assert nodes["9(h)(1)"].heading == "In general"
    assert nodes["9(h)(1)(I)"].kind == "subparagraph"  # follows (H)
    assert nodes["9(i)"].kind == "subsection"  # follows (h) and has a dash heading
    assert nodes["9(v)"].kind == "subsection"
    # In the flat layout, unlabelled text goes to the innermost open node.
    assert nodes["9(a)(2)(B)(v)(II)"].own_text == "another subclause. Text after the clauses."


def test_flat_layout_starts_clause_list_under_paragraph():
    statute = parse_statute("5", "(a) Rule.—Text—\n(1) Para—\n(i) first,\n(ii) second.\n(b) Next.—More.\n")
    assert list(statute.nodes) == ["5", "5(a)", "5(a)(1)", "5(a)(1)(i)", "5(a)(1)(ii)", "5(b)"]


def test_parse_errors_name_section_and_line():
    with pytest.raises(StatuteParseError, match="section 4: the statute text is empty"):
        parse_statute("4", "  \n")
    with pytest.raises(StatuteParseError, match=r"names section '5'"):
        parse_statute("4", "§5. Wrong title\n(a) x.\n")
    with pytest.raises(StatuteParseError, match=r"section 4, line 3: subsection 4\(a\) appears twice"):
        parse_statute("4", "(a) first.\n\n(a) again.\n")


def test_from_directory_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"no section<N>\.txt"):
        StatuteCorpus.from_directory(tmp_path)
    (tmp_path / "section4.txt").write_text("(a) first.\n(a) again.\n", encoding="utf-8")
    with pytest.raises(StatuteParseError, match=r"section4\.txt"):
        StatuteCorpus.from_directory(tmp_path)


def test_helpers():
    assert [roman_value(x) for x in ("i", "iv", "ix", "XIV", "xl")] == [1, 4, 9, 14, 40]
    assert roman_value("a") is None and roman_value("iiii") is None
    assert split_sentences("It is $35,928.50. See sec. 7 of U.S. law. Done") == [
        "It is $35,928.50.", "See sec. 7 of U.S. law.", "Done"]
