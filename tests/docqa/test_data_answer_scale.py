"""decide_scale: the answer's scale from the document, the question and the numbers used."""

import pytest

from knapsack_dspy.docqa.data.answer_scale import decide_scale

TABLE = [
    ["", "2019", "2018"],
    ["", "$'000", "$'000"],
    ["Revenue", "4,411", "4,044"],
    ["Gross margin (%)", "22.9", "23.1"],
    ["Basic earnings per share", "$2.79", "$2.69"],
    ["Number of employees", "1,027", "998"],
]


def scale(question, answer_type, answer=None, **kw):
    return decide_scale(question, answer_type, answer, table=TABLE, **kw).scale


def test_count_and_text_spans_have_no_scale():
    assert scale("How many years are shown?", "count", 2) == ""
    assert scale("What does the note describe?", "span", "Cost of revenue") == ""
    assert scale("Which years are shown?", "multi-span", ["2019", "2018"]) == ""


def test_counting_questions_have_no_scale_whatever_route_answered_them():
    # the demo's question: a count, answered by a program (routed as arithmetic) from thousand-dollar amounts
    question = "How many years did revenue exceed $4,100 thousand?"
    assert scale(question, "arithmetic", 1, used_values=[4411.0, 4044.0]) == ""
    assert scale(question, "span", "1") == ""
    assert scale("How many shares PSUs granted in February 2016?", "span", "4,411") == ""
    assert scale("How many dollars of revenue were earned in 2019?", "span", "4,411") == "thousand"  # an amount


def test_a_number_copied_from_the_table_takes_the_tables_unit():
    assert scale("What was the revenue in 2019?", "span", "4,411") == "thousand"


def test_a_span_written_with_a_percent_sign_carries_its_unit():
    assert scale("What was the growth?", "span", "12%") == ""


def test_percentage_questions_are_percent_whatever_the_model_said():
    assert scale("What was the percentage change in revenue?", "arithmetic", 9.08, used_values=[4411, 4044],
                 model_scale="thousand") == "percent"


def test_arithmetic_on_table_amounts_takes_their_unit_not_the_models():
    assert scale("What was the change in revenue?", "arithmetic", 367, used_values=[4411, 4044],
                 model_scale="million") == "thousand"


def test_averaging_percentages_is_percent():
    assert scale("What was the average gross margin?", "arithmetic", 23.0, used_values=[22.9, 23.1]) == "percent"


def test_per_share_amounts_and_counts_of_people_have_no_scale():
    assert scale("What was the change in basic earnings?", "arithmetic", 0.1, used_values=[2.79, 2.69]) == ""
    assert scale("What is the total number of employees?", "arithmetic", 2025, used_values=[1027, 998]) == ""


@pytest.mark.parametrize(("multiplied", "expected"), [(True, "percent"), (False, "")])
def test_a_proportion_is_percent_only_when_computed_in_percent_units(multiplied, expected):
    assert scale("What is the proportion of 2019 revenue over the total?", "arithmetic", 0.52,
                 used_values=[4411, 8455], multiplied_by_100=multiplied) == expected


def test_a_number_in_the_text_takes_the_word_after_it():
    decision = decide_scale("What were total R&D expenses?", "arithmetic", 3.1, table=[],
                            paragraphs=["R&D expenses were $2.2 billion in 2019 and $0.9 billion in 2018."],
                            used_values=[2.2, 0.9])
    assert decision.scale == "billion"


def test_the_models_scale_is_used_only_when_the_document_is_silent():
    decision = decide_scale("What is the sum?", "arithmetic", 12.0, table=[], paragraphs=[], used_values=[5, 7],
                            model_scale="million")
    assert decision.scale == "million" and "model" in decision.reason
    assert decide_scale("What is the sum?", "arithmetic", 12.0, table=[], used_values=[5, 7],
                        model_scale="lots").scale == ""


def test_the_text_stating_the_tables_unit_counts_when_the_table_does_not():
    table = [["", "2019"], ["Revenue", "183.2"]]
    decision = decide_scale("What was the revenue?", "span", "183.2", table=table,
                            paragraphs=["The components are as follows (in millions):"])
    assert decision.scale == "million"


def test_a_unit_stated_inside_a_spanning_column_header_counts():
    # TAT-QA keeps "Appropriation of earnings (in thousand NT dollars)" as the header over two year columns
    header = "Appropriation of earnings (in thousand NT dollars)"
    table = [["", header, "", "Cash dividend per share (NT dollars)", ""],
             ["", "2018", "2019", "2018", "2019"],
             ["Legal reserve", "$707,299", "$963,947", "", ""],
             ["Cash dividends", "$8,030,000", "$10,879,050", "$3.00", "$4.00"]]
    decision = decide_scale("What is the average Legal reserve?", "arithmetic", 835623.0, table=table,
                            used_values=[707299, 963947])
    assert decision.scale == "thousand"
    per_share = decide_scale("What is the change in cash dividend per share?", "arithmetic", 1.0, table=table,
                             used_values=[3.0, 4.0])
    assert per_share.scale == ""


@pytest.mark.parametrize("stated, expected", [
    ("Amounts are presented (in thousand NT dollars).", "thousand"),
    ("The plan covers (about 1 million) members.", ""),  # a number in parentheses is not a unit line
])
def test_a_singular_unit_statement_in_the_text_counts_only_after_in(stated, expected):
    table = [["", "2019"], ["Revenue", "183.2"]]
    decision = decide_scale("What was the revenue?", "span", "183.2", table=table, paragraphs=[stated])
    assert decision.scale == expected
