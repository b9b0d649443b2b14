"""Gold programs rewritten with the numbers copied (the style the embedded model answered best with)."""

import pytest

from knapsack_dspy.docqa.data.program_style import as_literal_program, read_cited_cells, variable_name
from knapsack_dspy.docqa.sandbox import execute_program

TABLE = [["", "2019", "2018"], ["", "$'000", "$'000"], ["Revenue", "4,411", "4,044"], ["Cost (net)", "(1,200)", "900"],
         ["Segment", "Retail", "Retail"]]


def test_lookups_become_named_numbers_with_their_cell_in_a_comment():
    code = ('table_query_0 = table["Revenue", "2019"]\ntable_query_1 = table["Revenue", "2018"]\n'
            "ans = (table_query_0 - table_query_1) / table_query_1 * 100")
    literal = as_literal_program(code, TABLE)
    assert literal.splitlines() == ["revenue_2019 = 4411  # Revenue, 2019", "revenue_2018 = 4044  # Revenue, 2018",
                                    "ans = (revenue_2019 - revenue_2018) / revenue_2018 * 100"]
    assert execute_program(literal, None).answer == pytest.approx(execute_program(code, TABLE).answer)


def test_accounting_negatives_text_variables_and_text_cells():
    code = ('table_query_0 = table["Cost (net)", "2019"]\ntext_variable_0 = 12.5\n'
            'table_query_1 = table["Segment", "2019"]\nans = table_query_0 + text_variable_0')
    literal = as_literal_program(code, TABLE)
    assert "cost_net_2019 = -1200  # Cost (net), 2019" in literal
    assert "text_variable_0 = 12.5" in literal and 'table_query_1 = table["Segment", "2019"]' in literal
    assert literal.endswith("ans = cost_net_2019 + text_variable_0")


def test_programs_without_lookups_are_unchanged():
    assert as_literal_program('ans = "Retail"', TABLE) == 'ans = "Retail"'
    assert as_literal_program("ans = 3", []) == "ans = 3"


def test_variable_names_are_valid_and_unique():
    assert variable_name("2019", "Q1", set()) == "value_2019_q1"
    assert variable_name("Revenue", "2019", {"revenue_2019"}) == "revenue_2019_2"
    long_name = variable_name("A very long row label that goes on and on", "2019", set())
    assert len(long_name) <= 40 and long_name.isidentifier()


CITED_TABLE = [["", "2019", "2018"], ["Income tax expense", "1,609,000", "1,164,000"], ["Cost", "(123)", "(100)"],
               ["Margin", "23.4%", "20.1%"], ["Other, net", "7", "9"]]


def test_a_number_copied_from_the_wrong_cell_becomes_the_cell_its_comment_names():
    # the 1.5B model's year swap: the 2018 cell written under "2019"
    code = ("tax_2019 = 1164000  # Income tax expense, 2019\n"
            "tax_2018 = 1609000  # Income tax expense, 2018\n"
            "ans = (tax_2019 - tax_2018) / tax_2018 * 100")
    fixed, fixes = read_cited_cells(code, CITED_TABLE)
    assert [(f.name, f.written, f.cell) for f in fixes] == [("tax_2019", 1164000, 1609000),
                                                             ("tax_2018", 1609000, 1164000)]
    assert fixed.splitlines()[0] == "tax_2019 = 1609000  # Income tax expense, 2019"
    assert round(execute_program(fixed, CITED_TABLE).answer, 2) == 38.23
    assert str(fixes[0]) == "tax_2019: 1.164e+06 -> 1.609e+06 (Income tax expense, 2019)"
    # a label with a comma: the column is after the last one
    assert read_cited_cells("x = 9  # Other, net, 2019", CITED_TABLE)[0] == "x = 7  # Other, net, 2019"


@pytest.mark.parametrize("line, fixed", [
    ("cost = 100  # Cost, 2019", "cost = 123  # Cost, 2019"),  # costs written as magnitudes stay magnitudes
    ("cost = -100  # Cost, 2019", "cost = -123  # Cost, 2019"),
    ("m = 0.201  # Margin, 2019", "m = 0.234  # Margin, 2019"),  # a percentage as a fraction stays one
    ("t = 1.164  # Income tax expense, 2019", "t = 1.609  # Income tax expense, 2019"),  # in millions stays
])
def test_the_named_cell_is_copied_the_way_the_program_copied_the_wrong_one(line, fixed):
    assert read_cited_cells(line, CITED_TABLE)[0] == fixed


@pytest.mark.parametrize("line", [
    "a = 1609000  # Income tax expense, 2019",  # the cell's number
    "a = -123  # Cost, 2019", "a = 123  # Cost, 2019",  # its sign is the program's choice
    "a = 0.234  # Margin, 2019", "a = 23  # Margin, 2019",  # a percentage as a fraction; rounded
    "a = 1609  # Income tax expense, 2019", "a = 1.6  # Income tax expense, 2019",  # in thousands / millions
    "a = 5  # Nope, 2019", "a = 5  # Cost",  # no such cell; no column named
    "a = 5", "a = table['Cost', '2019']  # Cost, 2019",  # no comment; not a copied number
    "a = 1500000  # Income tax expense, 2019",  # a number of its own, not another cell: not a wrong copy
    "tax_2019 = 1609000  # Income tax expense, 2018",  # the name says 2019: the comment may be the wrong one
])
def test_a_line_whose_number_is_the_cells_or_names_no_cell_is_left_alone(line):
    assert read_cited_cells(line, CITED_TABLE) == (line, [])


def test_a_right_program_is_left_byte_for_byte():
    code = ("tax_2019 = 1609000  # Income tax expense, 2019\r\n"
            "tax_2018 = 1164000  # Income tax expense, 2018\n\nans = tax_2019 - tax_2018  # change\n")
    assert read_cited_cells(code, CITED_TABLE) == (code, [])


def test_without_a_table_nothing_is_checked():
    assert read_cited_cells("a = 1  # Cost, 2019", []) == ("a = 1  # Cost, 2019", [])
