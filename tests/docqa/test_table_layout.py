"""TableLayout: one label per column and row, units stated once (hand-written tables shaped like TAT-QA's)."""

import pytest

from knapsack_dspy.docqa.table_layout import as_written, render_layout, table_layout, unit_of_text


def test_stacked_years_under_a_spanning_header_become_the_labels_and_the_span_the_caption():
    layout = table_layout([
        ["", "", "Year Ended March 31,", ""],
        ["", "2019", "2018", "2017"],
        ["Revenue", "$1,200", "$1,100", "$900"],
    ])
    assert layout.column_labels == ("2019", "2018", "2017")
    assert layout.caption == "Year Ended March 31"
    assert layout.row_labels == ("Revenue",)
    assert render_layout(layout).splitlines() == [
        "(Year Ended March 31)", "| | 2019 | 2018 | 2017 |", "| Revenue | $1,200 | $1,100 | $900 |"]


def test_a_unit_row_is_lifted_to_the_units_line():
    layout = table_layout([
        ["", "2019", "2018"],
        ["", "€m", "€m"],
        ["Salaries and fees", "4", "4"],
    ])
    assert layout.column_labels == ("2019", "2018")
    assert layout.units == "€m" and layout.scale == "million"
    assert render_layout(layout).splitlines()[0] == "(units: €m)"


def test_units_written_in_the_year_cells_are_split_off():
    layout = table_layout([["", "2019 €m", "2018 €m"], ["Salaries", "4", "4"]])
    assert layout.column_labels == ("2019", "2018")
    assert layout.scale == "million"


def test_a_unit_of_one_column_stays_in_that_columns_label():
    layout = table_layout([
        ["", "Fiscal years ended July 31,", "", ""],
        ["", "2019", "2018", "Change"],
        ["", "", "(In thousands, except percentages)", ""],
        ["", "", "", "(%)"],
        ["Revenue", "64,798", "35,452", "83"],
    ])
    assert layout.scale == "thousand"
    assert layout.column_labels == ("2019", "2018", "Change (%)")
    assert layout.column_scale(2) == "percent" and layout.column_scale(0) == "thousand"


def test_repeated_years_are_told_apart_by_the_spanning_header_to_their_left():
    layout = table_layout([
        ["", "Domestic", "", "International", ""],
        ["", "September 30,", "", "September 30,", ""],
        ["", "2019", "2018", "2019", "2018"],
        ["Discount rate", "4.00%", "3.75%", "1.90%", "2.80%"],
    ])
    assert layout.column_labels == ("Domestic 2019", "Domestic 2018", "International 2019", "International 2018")
    assert layout.caption == "September 30"


def test_a_repeated_column_heading_is_named_after_its_left_neighbour():
    layout = table_layout([["", "2019", "% of total", "2018", "% of total"], ["APAC", "533", "38.6%", "480", "40.0%"]])
    assert layout.column_labels == ("2019", "2019 % of total", "2018", "2018 % of total")


def test_unlabelled_total_rows_are_named_and_duplicate_labels_qualified_by_section():
    layout = table_layout([
        ["", "2019", "2018"],
        ["Current:", "", ""],
        ["Federal", "$5", "$4"],
        ["State", "10", "5"],
        ["Deferred:", "", ""],
        ["Federal", "4,206", "4,860"],
        ["", "4,221", "4,869"],
    ])
    labels = [row.label for row in layout.rows]
    assert labels == ["Current:", "Federal (Current)", "State", "Deferred:", "Federal (Deferred)", "Total Deferred"]
    assert [row.kind for row in layout.rows] == ["section", "data", "data", "section", "data", "total"]


def test_duplicates_without_a_section_are_numbered():
    layout = table_layout([["", "2019"], ["Restructuring payments", "195"], ["Free cash flow", "5"],
                           ["Restructuring payments", "(195)"]])
    assert layout.row_labels == ("Restructuring payments (1st)", "Free cash flow", "Restructuring payments (2nd)")


def test_every_shown_label_is_unique_on_the_real_tables(tatqa_tables):
    for table in tatqa_tables:
        layout = table_layout(table)
        data = [row.label for row in layout.rows if row.kind != "section"]
        assert len(set(data)) == len(data), table[:3]
        assert len(set(layout.column_labels)) == len(layout.column_labels), table[:3]
        assert all(len(row.cells) == len(layout.column_labels) for row in layout.rows)


@pytest.fixture(scope="module")
def tatqa_tables():
    from knapsack_dspy.docqa.data import load_examples

    return list({e.doc_id: e.table for e in load_examples("tatqa", split="dev_pool")}.values())


@pytest.mark.parametrize(("text", "scale"), [
    ("(in thousands)", "thousand"), ("$'000", "thousand"), ("$’000", "thousand"), ("(inthousands)", "thousand"),
    ("€m", "million"), ("(Dollars in millions)", "million"), ("$ MILLION", "million"), ("£m", "million"),
    ("$bn", "billion"), ("%", "percent"), ("(In thousands, except percentages)", "thousand"), ("2019", ""),
    ("Revenue", ""),
])
def test_unit_of_text(text, scale):
    assert unit_of_text(text) == scale


def test_an_empty_or_label_only_table_renders_without_error():
    assert render_layout(table_layout([])) == ""
    assert table_layout([["Only labels"], ["Row"]]).row_labels == ("Only labels", "Row")


def test_labels_we_qualified_go_back_to_the_documents_text_in_answers():
    table = [["", "2019", "2018"], ["Current:", "", ""], ["Federal", "1", "2"], ["Deferred:", "", ""],
             ["Federal", "3", "4"], ["Other", "5", "6"], ["Other", "7", "8"], ["", "16", "20"]]
    layout = table_layout(table)
    shown = [row.label for row in layout.rows if row.kind != "section"]
    assert {"Other (2nd)", "Federal (Current)", "Total Deferred"} <= set(shown)
    assert as_written("Other (2nd)", layout) == "Other"
    assert as_written("The federal (current) tax", layout) == "The Federal tax"
    assert as_written("Total Deferred", layout) == "Total Deferred"  # a row we named: no written label
    assert as_written("Something else (2nd)", layout) == "Something else (2nd)"
    assert as_written(None, layout) is None
