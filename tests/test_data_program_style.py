"""Gold programs rewritten with the numbers copied (the style the embedded model answered best with)."""

import pytest

from knapsack_dspy.data.program_style import as_literal_program, variable_name
from knapsack_dspy.execution import execute_program

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
