"""TAT-QA demos cut to what their gold solution reads (``DocumentQA(demo_table="gold_rows")``), on real pool items."""

from __future__ import annotations

import pytest
from helpers import HashingEmbedder, WordCounter

from knapsack_dspy.bench.suites.suite import SuiteError, suite_from_dict
from knapsack_dspy.docqa.data import load_examples
from knapsack_dspy.docqa.data.gold_programs import synthesise_python_program
from knapsack_dspy.docqa.data.tatqa_evidence import context_rows, derivation_rows, tatqa_demo_evidence
from knapsack_dspy.docqa.pipelines.pipeline import DocumentQA
from knapsack_dspy.docqa.tasks import build_pipeline

APPLIANCES = "b2786c1a-37de-4120-b03c-32bf5c81f157"  # table, arithmetic: 680 - 774 (Appliances, 2019 - 2018)
SEGMENTS = "d841005e-c88b-4071-aa53-16bd8a892656"  # hybrid, multi-span: the three "... Solutions" headings
COST_PLUS = "23801627-ff77-4597-8d24-1c99e2452082"  # text, span: answered from paragraph 1
OTHER_CHANGE = "eb787966-fa02-401f-bfaf-ccabf3828b23"  # hybrid, arithmetic on a three-row table: 44.1 - 56.7


@pytest.fixture(scope="module")
def pool():
    return load_examples("tatqa", "dev_pool")


@pytest.fixture(scope="module")
def by_id(pool):
    return {example.id: example for example in pool}


def _pipeline(**cut):
    return build_pipeline("tatqa", "pot", embedder=HashingEmbedder(), token_counter=WordCounter(), **cut)


@pytest.fixture(scope="module")
def trimmed():
    return _pipeline(demo_table="gold_rows", demo_paragraphs="all")


def _labels(rows):
    return [row[0] for row in rows]


def test_an_arithmetic_demo_keeps_its_headers_the_rows_read_and_their_section(by_id, trimmed):
    example = by_id[APPLIANCES]
    assert derivation_rows(example) == [15]  # the Appliances row holds 680 and 774
    table = trimmed._demo_retrieved(example)["table"]
    assert _labels(table) == ["", "", "", "Communications Solutions:", "Data and devices", "Appliances",
                              "Total Communications Solutions"]  # 3 header rows, its heading, nearest rows: 4 body rows
    assert table[5] == example.table[15]
    dropped = set(_labels(example.table)) - set(_labels(table))
    assert {"Automotive", "Sensors", "Energy", "Total", "Transportation Solutions:"} <= dropped
    demo = trimmed.render_demo(example)
    assert "Automotive" not in demo["table"] and "| Appliances | 680 | 774 | 676 |" in demo["table"]
    assert "appliances_2019 = 680" in demo["program"] and "appliances_2018 = 774" in demo["program"]
    assert "in millions" in demo["table"]  # the unit line of the header rows stays


def test_a_query_shows_its_whole_document_and_whole_demos_are_one_setting_away(by_id, trimmed):
    example = by_id[APPLIANCES]
    query = trimmed.prompt_inputs(example)
    assert "Automotive" in query["table"] and "Appliances" in query["table"]
    assert _pipeline().demo_cut == {"demo_table": "gold_rows", "demo_table_rows": 4,
                                    "demo_paragraphs": "gold"}  # TAT-QA's default (issue 38)
    assert "Automotive" not in _pipeline().render_demo(example)["table"]
    full = _pipeline(demo_table="all", demo_paragraphs="all")
    assert full.demo_cut == {}
    assert "Automotive" in full.render_demo(example)["table"]
    assert full._demo_retrieved(example)["table"] == example.table


def test_a_text_answer_shows_no_table_and_gold_paragraphs_only(by_id):
    example = by_id[COST_PLUS]
    assert tatqa_demo_evidence(example) == ([], [1])
    gold = _pipeline(demo_table="gold_rows", demo_paragraphs="gold")
    shown = gold._demo_retrieved(example)
    assert shown["table"] == [] and shown["paragraphs"] == [example.paragraphs[1]]
    assert gold.render_demo(example)["table"] == ""
    # gold paragraphs alone: the table as a query's, the text the evidence (indices into the whole document)
    paragraphs_only = _pipeline(demo_table="all", demo_paragraphs="gold")._demo_retrieved(example)
    assert paragraphs_only["table"] == example.table and paragraphs_only["paragraphs"] == [example.paragraphs[1]]


def test_spans_written_in_headings_keep_those_rows(by_id, trimmed):
    example = by_id[SEGMENTS]
    rows = derivation_rows(example)
    assert [example.table[i][0] for i in rows] == ["Transportation Solutions:", "Total Transportation Solutions",
                                                    "Industrial Solutions:", "Total Industrial Solutions",
                                                    "Communications Solutions:", "Total Communications Solutions"]
    demo = trimmed.render_demo(example, trimmed.extract)
    assert "Automotive" not in demo["table"] and "Industrial Solutions" in demo["table"]


def test_a_small_table_within_the_bound_is_shown_whole(by_id, trimmed):
    example = by_id[OTHER_CHANGE]
    assert derivation_rows(example) == [3]
    assert trimmed._demo_retrieved(example)["table"] == example.table
    tight = _pipeline(demo_table="gold_rows", demo_table_rows=1, demo_paragraphs="all")._demo_retrieved(example)[
        "table"]
    assert _labels(tight) == ["", "", "Other"]


def test_every_verified_gold_program_still_verifies_on_its_cut_table(pool, trimmed):
    checked = 0
    for example in pool:
        if example.answer_type != "arithmetic" or example.modality == "text":
            continue
        full = synthesise_python_program(example)
        if not full.verified:
            continue
        table = trimmed._demo_retrieved(example)["table"]
        cut = synthesise_python_program({**dict(example), "table": table})
        assert cut.verified, (example.id, cut.reason)
        assert len(table) <= len(example.table)
        checked += 1
    assert checked > 400


def test_context_rows_adds_headings_then_the_nearest_rows_up_to_the_bound():
    table = [["", "2019"], ["Assets:", ""], ["Cash", "1"], ["Loans", "2"], ["Debts:", ""], ["Bonds", "3"],
             ["Notes", "4"], ["Leases", "5"]]
    assert context_rows(table, [6], bound=0) == [4, 6]  # the row and its section heading, whatever the bound
    assert context_rows(table, [6], bound=4) == [4, 5, 6, 7]  # then the nearest rows, the earlier on a tie
    assert context_rows(table, [2, 6], bound=3) == [1, 2, 4, 6]
    assert context_rows(table, [0], bound=4) == []  # a header row is no evidence
    assert context_rows(table, [3], bound=99) == list(range(1, 8))


def test_the_settings_are_checked_saved_and_named_by_suites():
    with pytest.raises(ValueError, match="demo_table"):
        DocumentQA(demo_table="some", embedder=HashingEmbedder(), token_counter=WordCounter())
    with pytest.raises(ValueError, match="demo_paragraphs"):
        DocumentQA(demo_paragraphs="few", embedder=HashingEmbedder(), token_counter=WordCounter())
    program = _pipeline(demo_table="gold_rows", demo_table_rows=6)
    assert program.spec.dump_state()["demo_table"] == "gold_rows"
    assert program.spec.dump_state()["demo_table_rows"] == 6
    assert "demo_table" not in _pipeline(demo_table="all", demo_paragraphs="all").spec.dump_state()
    base = {"dataset": "tatqa", "pipeline": "pot", "selector": "kate_within_budget", "selection_only": True}
    whole, default, cut = (suite_from_dict(dict(base, **extra), "s.toml").runs[0]
                           for extra in ({"demo_table": "all", "demo_paragraphs": "all"}, {},
                                         {"demo_table": "gold_rows", "demo_paragraphs": "gold"}))
    assert default.key == cut.key and (default.demo_table, default.demo_paragraphs) == ("gold_rows", "gold")
    assert whole.key != default.key and (whole.demo_table, whole.demo_paragraphs) == ("all", "all")
    with pytest.raises(SuiteError, match="demo_table"):
        suite_from_dict(dict(base, demo_table="rows"), "s.toml")
