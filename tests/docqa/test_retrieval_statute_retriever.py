"""StatuteRetriever: the three strategies on the real SARA statutes, and the DSPy module's behaviour."""

from __future__ import annotations

import gzip
import json

import dspy
import pytest
from dspy.utils import DummyLM
from helpers import DATA

from knapsack_dspy.docqa.pipelines.statute_retriever import StatuteRetriever
from knapsack_dspy.docqa.retrieval.citations import extract_citations
from knapsack_dspy.docqa.retrieval.statute_corpus import StatuteCorpus
from knapsack_dspy.docqa.retrieval.statute_strategies import STRATEGIES, select_statute_text

DATA_DIR = DATA  # KDSPY_DATA_DIR, else ../shared/data beside the checkout (tests/helpers.py)
STATUTE_DIR = DATA_DIR / "sara" / "statutes"


@pytest.fixture(scope="module")
def corpus() -> StatuteCorpus:
    if not STATUTE_DIR.is_dir():
        pytest.skip(f"SARA statutes not found in {STATUTE_DIR} (set KDSPY_DATA_DIR)")
    return StatuteCorpus.from_directory(STATUTE_DIR)


@pytest.fixture(scope="module")
def questions() -> list[str]:
    path = DATA_DIR / "sara" / "cases_train.json.gz"
    if not path.is_file():
        pytest.skip(f"SARA cases not found at {path}")
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        return [case["question"] for case in json.load(handle)]


def test_strategies_nest_on_every_sara_question(corpus, questions):
    checked = 0
    for question in questions:
        citations = extract_citations(question)
        if not citations:
            continue
        picked = {s: select_statute_text(corpus, citations, s) for s in STRATEGIES}
        mentioned = set(picked["mentioned_only"].subsection_ids)
        entire = set(picked["entire_section"].subsection_ids)
        references = set(picked["references"].subsection_ids)
        ancestors = {a for node_id in picked["mentioned_only"].cited_ids for a in corpus.ancestors(node_id)}
        assert mentioned <= entire | ancestors, question
        assert references >= mentioned | entire, question
        assert set(picked["references"].referenced_ids) <= references
        for selection in picked.values():
            assert selection.subsection_ids == corpus.sort_ids(selection.subsection_ids)
            # Every selected node's sentences are in the text, and nothing else is.
            for node_id in selection.subsection_ids:
                for sentence in corpus[node_id].sentences:
                    assert sentence.text in selection.text
        assert len(picked["mentioned_only"].text) <= len(picked["references"].text)
        checked += 1
    assert checked == 176


def test_mentioned_only_is_the_cited_node_and_its_ancestors(corpus):
    selection = select_statute_text(corpus, extract_citations("Section 2(b)(1)(A)(i) applies to Bob."),
                                    "mentioned_only")
    assert selection.subsection_ids == ["2", "2(b)", "2(b)(1)", "2(b)(1)(A)", "2(b)(1)(A)(i)"]
    assert "is married at the close of the taxpayer's taxable year" not in selection.text  # a child's text
    assert selection.text.splitlines()[:3] == [
        "§2. Definitions and special rules",
        "2(b) Definition of head of household",
        "    2(b)(1) In general",
    ]


def test_entire_section_is_the_cited_subtree(corpus):
    selection = select_statute_text(corpus, extract_citations("under section 7703(b)"), "entire_section")
    assert selection.subsection_ids == ["7703(b)", "7703(b)(1)", "7703(b)(2)", "7703(b)(3)"]
    lines = selection.text.splitlines()
    # The text that follows the paragraphs in the file stays after them.
    assert lines[-1] == "such individual shall not be considered as married."
    assert lines[:3] == ["§7703. Determination of marital status", "7703(b) Certain married individuals living apart",
                         "For purposes of those provisions of this title which refer to this subsection, if-"]
    assert lines[3].startswith("    7703(b)(1) an individual who is married")


def test_references_adds_referred_subtrees_one_level(corpus):
    selection = select_statute_text(corpus, extract_citations("Section 2(b)(3)(B) applies to Bob."),
                                    "references")
    # 2(b)(3)(B) cites "subparagraph (H) of section 152(d)(2)"; its ancestor 2(b)(3) cites "paragraph (1)".
    assert selection.referenced_ids == ["2(b)(1)", "152(d)(2)(H)"]
    assert "152(d)(2)(H)" in selection.subsection_ids
    assert "152(d)(2)(A)" not in selection.subsection_ids
    # One level only: 152(d)(2)(H) cites section 7703 and 2(b)(1) cites "subsection (a)"; neither is followed.
    assert not any(node_id.startswith(("7703", "2(a)")) for node_id in selection.subsection_ids)


def test_partial_and_unresolved_citations(corpus):
    citations = extract_citations("under section 151(d)(5)(A) and section 999(a)")
    selection = select_statute_text(corpus, citations, "entire_section")
    assert selection.partial == ["151(d)(5)(A)"]
    assert selection.unresolved == ["999(a)"]
    assert selection.subsection_ids == ["151(d)(5)"]
    with pytest.raises(ValueError, match="unknown statute retrieval strategy 'everything'"):
        select_statute_text(corpus, citations, "everything")


def test_module_forward(corpus):
    retriever = StatuteRetriever(strategy="mentioned_only", statutes=corpus)
    pred = retriever(question="Section 7703(b)(3) applies to Alice maintaining her home for the year 2018.")
    assert pred.subsection_ids == ["7703", "7703(b)", "7703(b)(3)"]
    assert pred.citations == ["7703(b)(3)"] and pred.has_citation
    assert "such individual's spouse is not a member of such household" in pred.statute_text
    assert "7703(b)(2)" not in pred.statute_text


def test_module_without_citation_never_crashes(corpus):
    question = "How much tax does Alice have to pay in 2017?"
    empty = StatuteRetriever(statutes=corpus)(question=question)
    assert (empty.statute_text, empty.subsection_ids, empty.has_citation) == ("", [], False)
    everything = StatuteRetriever(statutes=corpus, no_citation="all")(question=question)
    assert len(everything.subsection_ids) == len(corpus.nodes)
    assert everything.statute_text.count("§") == len(corpus.statutes)
    unknown = StatuteRetriever(statutes=corpus)(question="Section 45(a) applies to Alice.")
    assert unknown.has_citation is False and unknown.unresolved == ["45(a)"] and unknown.statute_text == ""


def test_module_arguments_are_checked(corpus):
    with pytest.raises(ValueError, match="unknown strategy 'all'"):
        StatuteRetriever(strategy="all")
    with pytest.raises(ValueError, match="no_citation policy"):
        StatuteRetriever(no_citation="raise")
    with pytest.raises(TypeError, match="statutes must be"):
        StatuteRetriever(statutes=["section 1"])
    with pytest.raises(TypeError, match="question must be a string"):
        StatuteRetriever(statutes=corpus)(question=None)


def test_cited_rules_quote_the_cited_subsections_text():
    texts = {"9": "§9. Test\n\n(a) Rule\n\n    (1) The first rule applies to every person named here.\n\n"
                  "    (2) See paragraph (1).\n\n(b) Qualifying person\n\nAn individual qualifies if he is-\n\n"
                  "    (1) a resident, or\n\n    (2) a citizen,\n\nof the United States.\n\n(c) Empty\n"}
    retriever = StatuteRetriever(statutes=texts)
    first = '9(a)(1): "The first rule applies to every person named here."'
    assert retriever.cited_rules("Section 9(a)(1) applies to Alice.") == [first]
    assert retriever.cited_rules("Section 9(a)(1) applies to Alice.", max_words=3) == ['9(a)(1): "The first rule ..."']
    # a lead-in brings its children, in file order, and the sentence after them stays after them
    assert retriever.cited_rules("Section 9(b) applies to Alice.") == [
        '9(b) Qualifying person: "An individual qualifies if he is- (1) a resident, or (2) a citizen, of the United '
        'States."']
    # no text of its own: its children's
    assert retriever.cited_rules("Section 9(a) applies to Alice.") == [
        '9(a) Rule: "(1) The first rule applies to every person named here. (2) See paragraph (1)."']
    assert retriever.cited_rules("Section 9(a)(2) and section 9(a)(1) apply.") == [
        first, '9(a)(2): "See paragraph (1)."']
    assert retriever.cited_rules("Section 9(a)(1)(C) applies to Alice.") == [first]  # deepest existing subsection
    assert retriever.cited_rules("How much tax does Alice pay?") == []
    assert retriever.cited_rules("Section 45(a) applies to Alice.") == []


def test_module_from_texts_mapping_and_data_dir():
    texts = {"9": "§9. Test\n\n(a) Rule\n\n    (1) The first rule applies.\n\n    (2) See paragraph (1).\n"}
    pred = StatuteRetriever(strategy="references", statutes=texts)(question="Does section 9(a)(2) apply?")
    assert pred.subsection_ids == ["9", "9(a)", "9(a)(1)", "9(a)(2)"]
    if STATUTE_DIR.is_dir():
        lazy = StatuteRetriever(data_dir=DATA_DIR)
        assert lazy(question="section 3301").subsection_ids == ["3301"]


def test_copies_share_the_parsed_statutes_and_save_no_state(corpus, tmp_path):
    retriever = StatuteRetriever(strategy="entire_section", statutes=corpus)
    copied = retriever.deepcopy()
    assert copied.corpus is retriever.corpus and copied.strategy == "entire_section"
    path = tmp_path / "retriever.json"
    retriever.save(str(path))
    assert json.loads(path.read_text())  # metadata only; no parameters
    loaded = StatuteRetriever(strategy="entire_section", statutes=corpus)
    loaded.load(str(path))
    assert loaded(question="section 68(f)").subsection_ids == ["68(f)"]


class StatuteQA(dspy.Module):
    def __init__(self, retriever):
        super().__init__()
        self.retriever = retriever
        self.answer = dspy.Predict("statutes, question -> label")

    def forward(self, question):
        statutes = self.retriever(question=question).statute_text
        return self.answer(statutes=statutes, question=question)


def test_retrieved_statutes_reach_the_prompt(corpus):
    lm = DummyLM([{"label": "Entailment"}])
    program = StatuteQA(StatuteRetriever(statutes=corpus))
    with dspy.context(lm=lm):
        pred = program(question="Section 68(f) applies to Alice for the year 2018.")
    assert pred.label == "Entailment"
    prompt = "".join(str(m.get("content", "")) for m in lm.history[-1]["messages"])
    assert "This section shall not apply to any taxable year beginning after December 31, 2017" in prompt
