"""Citation extraction from questions and reference resolution inside the statutes."""

from __future__ import annotations

import gzip
import json
import re

import pytest
from helpers import DATA

from knapsack_dspy.docqa.retrieval.citations import Citation, extract_citations
from knapsack_dspy.docqa.retrieval.statute_corpus import StatuteCorpus
from knapsack_dspy.docqa.retrieval.statute_references import find_references

DATA_DIR = DATA  # KDSPY_DATA_DIR, else ../shared/data beside the checkout (tests/helpers.py)


@pytest.fixture(scope="module")
def corpus() -> StatuteCorpus:
    folder = DATA_DIR / "sara" / "statutes"
    if not folder.is_dir():
        pytest.skip(f"SARA statutes not found in {folder} (set KDSPY_DATA_DIR)")
    return StatuteCorpus.from_directory(folder)


@pytest.fixture(scope="module")
def sara_cases() -> list[dict]:
    path = DATA_DIR / "sara" / "cases_train.json.gz"
    if not path.is_file():
        pytest.skip(f"SARA cases not found at {path} (set KDSPY_DATA_DIR)")
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        return json.load(handle)


@pytest.mark.parametrize("text, ids", [
    ("Alice is a surviving spouse under section 2(a)(1)(B).", ["2(a)(1)(B)"]),
    ("Section 7703(b)(3) applies to Alice for the year 2018.", ["7703(b)(3)"]),
    ("Under section 151(d)(2), Bob's exemption amount for the year 2015 is $0.", ["151(d)(2)"]),
    ("Alice has to pay $3834 in taxes for the year 2017 under section 1(a)(i).", ["1(a)(i)"]),
    ("Bob is a dependent under section 152(c)(2) and 152(c)(3) for 2015.", ["152(c)(2)", "152(c)(3)"]),
    ("deductions of $4000 under section 151 for the year 2017", ["151"]),
    ("as defined in sections 1 and 2, and § 63(c)", ["1", "2", "63(c)"]),
    ("under sec. 3306(c)(10)(A)(ii)", ["3306(c)(10)(A)(ii)"]),
    ("How much tax does Alice have to pay in 2017?", []),
    ("under section 151 and 2017 was a good year", ["151"]),  # a bare year is not a second citation
])
def test_extract_citations(text, ids):
    assert [c.id for c in extract_citations(text)] == ids


def test_citation_fields_and_external_acts():
    text = "pursuant to sections 214(c) and 101(a)(15)(H) of the Immigration and Nationality Act"
    assert extract_citations(text) == []
    external = extract_citations(text, include_external=True)
    assert [c.id for c in external] == ["214(c)", "101(a)(15)(H)"]
    assert all(c.external for c in external)
    (citation,) = extract_citations("Section 2(b)(1)(A)(i) applies to Bob.")
    assert citation == Citation("2", ("b", "1", "A", "i"), "Section 2(b)(1)(A)(i)", 0, False)
    assert extract_citations("section 7703 ... section 7703") == [Citation("7703", (), "section 7703", 0)]


def _id_from_case(case_id: str) -> str:
    match = re.match(r"s(\d+)_(.*)_(?:pos|neg)$", case_id)
    return match.group(1) + "".join(f"({label})" for label in match.group(2).split("_"))


def test_every_sara_entailment_question_cites_an_existing_subsection(corpus, sara_cases):
    entailment = [c for c in sara_cases if c["type"] == "entailment"]
    numerical = [c for c in sara_cases if c["type"] == "numerical"]
    assert len(entailment) == 176 and len(numerical) == 80
    partial = []
    for case in entailment:
        citations = extract_citations(case["question"])
        assert len(citations) == 1, case["id"]
        node, rest = corpus.resolve_citation(citations[0])
        assert node is not None, case["id"]
        if rest:
            partial.append(citations[0].id)
        # SARA case ids name the tested subsection; section 1(a) ids add the filer type ("s1_a_1_ii"
        # tests 1(a)(ii) for joint filers), and the 151(d)(5) cases cite a non-existent (A).
        if not case["id"].startswith(("s1_a_", "s151_d_5_")):
            assert citations[0].id == _id_from_case(case["id"]), case["id"]
    # The only citation without its own node: "151(d)(5)(A)" (151(d)(5) has no subparagraphs in SARA).
    assert sorted(set(partial)) == ["151(d)(5)(A)"]
    # Numerical cases ask "How much tax does Alice have to pay in 2017?": no citation.
    assert all(extract_citations(c["question"]) == [] for c in numerical)


def _targets(corpus, node_id):
    node = corpus[node_id]
    return [ref.target for sentence in node.sentences for ref in find_references(sentence.text, node, corpus)]


@pytest.mark.parametrize("node_id, expected", [
    ("2(a)(2)", ["2(a)(1)", "1"]),  # "Notwithstanding paragraph (1), for purposes of section 1"
    ("152(c)(2)", ["152(c)(1)(A)"]),  # "For purposes of paragraph (1)(A)"
    ("63(c)(2)(A)", ["63(c)(2)(C)"]),  # "under subparagraph (C)"
    ("63(c)(3)", ["63(c)(1)", "63(f)"]),  # "paragraph (1)", "subsection (f)"
    ("2(b)(3)(B)", ["152(d)(2)(H)"]),  # "subparagraph (H) of section 152(d)(2)" (not 152(d)(2) itself)
    ("3306(a)(4)", ["3306(a)(3)", "3306(a)(3)", "3306(a)(1)", "3306(a)(2)"]),  # "paragraph (1) or (2)"
    ("3306(c)(1)(A)(i)", ["3306(c)(1)(B)"]),  # "subparagraph (B)" from a clause
    ("3306(c)(1)(B)", []),  # "sections 214(c) and 101(a)(15)(H) of the Immigration and Nationality Act"
    ("7703(b)(1)", ["7703(a)", "151"]),  # "subsection (a)", "section 151" (a whole section)
    ("3301", ["3306(a)", "3306(b)", "3306(c)"]),
    ("2(b)(1)(A)(i)(II)", ["152(b)(2)"]),
    ("63(c)(7)(i)", [None]),  # "in subparagraph (B)" means 63(c)(2)(B): context the text only implies
])
def test_reference_resolution(corpus, node_id, expected):
    assert _targets(corpus, node_id) == expected


def test_resolve_partial_and_unknown(corpus):
    node, rest = corpus.resolve("151", ("d", "5", "A"))
    assert node.id == "151(d)(5)" and rest == ("A",)
    assert corpus.resolve("999", ("a",)) == (None, ("a",))
    assert corpus.ancestors("2(b)(1)(A)(i)") == ["2", "2(b)", "2(b)(1)", "2(b)(1)(A)"]
    assert corpus.subtree("2(b)(1)(A)") == ["2(b)(1)(A)", "2(b)(1)(A)(i)", "2(b)(1)(A)(i)(I)",
                                            "2(b)(1)(A)(i)(II)", "2(b)(1)(A)(ii)"]
