"""Instruction text shared by the program-writing signatures (plain strings, no logic).

The Python conventions are those of SEER (Tonglet et al., 2023) as run by
``knapsack_dspy.docqa.sandbox.execute_program(kind="python")``, shortened to what the recorded failures of the
embedded model showed it needs (issue 9: the direction of a change, percentages; the scale is decided from
the document, so the program does not write it). ``PYTHON_CONVENTIONS`` copies numbers into named variables
(the style the 1.5B model answered best with, ``knapsack_dspy.docqa.data.program_style``);
``PYTHON_LOOKUP_CONVENTIONS`` reads cells with ``table["row", "col"]`` by the labels shown; the FinQA DSL is
the language of the FinQA data set (Chen et al., 2021) as run by ``execute_program(kind="finqa")``.

``FINQA_PYTHON_CONVENTIONS`` / ``FINQA_PYTHON_LOOKUP_CONVENTIONS``: the same two Python styles with FinQA's answer
rules (issue 37). FinQA's official evaluation compares the executed value with the gold ``exe_ans`` rounded to 5
decimals, and its gold programs give a percentage as a ratio (``divide(#0, 189)`` -> 0.12169; of the 421 percentage
questions of the document pool, 44 multiply by 100): the general rule "percentage change is ... * 100" would make
nearly every percentage answer wrong by a factor of 100, and contradict the demos.
"""

from __future__ import annotations

__all__ = ["FINQA_DSL_CONVENTIONS", "FINQA_PYTHON_CONVENTIONS", "FINQA_PYTHON_LOOKUP_CONVENTIONS",
           "PYTHON_CONVENTIONS", "PYTHON_LOOKUP_CONVENTIONS"]

# What both Python styles say about the answer (the failures of the embedded model, issue 9).
_ANSWER_RULES = """\
- Put the answer in `ans`. "Change from A to B" is B - A. "Percentage change" is (new - old) / old * 100;
  a percentage of a total is part / total * 100. For several items, `ans` is a list; for "how many",
  the count; for a name or a value asked as written, the text copied exactly.
- Do not write units or the scale (thousands, millions): the document states them.
- Plain statements only: no imports, no functions, no print.
"""

# How a program gets its numbers, in the two styles (SEER's literal copies; look-ups by the table's labels).
_LITERAL_STYLE = """\
- Copy each number you need from the table or the text into a variable named after what it is, with a
  comment saying where it is (row and column): revenue_2019 = 4411  # Revenue, 2019
  Write numbers without commas; "(1,234)" in a table is -1234.
"""
_LITERAL_EXAMPLE = """revenue_2019 = 4411  # Revenue, 2019
revenue_2018 = 4044  # Revenue, 2018
ans = (revenue_2019 - revenue_2018) / revenue_2018"""
_LOOKUP_STYLE = """\
- `table["row label", "column label"]` reads a cell by the labels shown in the table: the first cell of a
  row and a column's heading, exactly as shown. It returns a number: "$1,234.5" -> 1234.5,
  "(123)" -> -123.0, "12%" -> 12.0.
- Bind each number read from the table to table_query_0, table_query_1, ..., and each number copied from
  the text to text_variable_0, text_variable_1, ... (written without commas: 1234.5).
"""
_LOOKUP_EXAMPLE = """table_query_0 = table["Revenue", "2019"]
table_query_1 = table["Revenue", "2018"]
ans = (table_query_0 - table_query_1) / table_query_1"""


def _conventions(style: str, answer_rules: str, example: str) -> str:
    return f"Conventions for the program:\n{style}{answer_rules}\nExample:\n{example}"


PYTHON_CONVENTIONS = _conventions(_LITERAL_STYLE, _ANSWER_RULES, _LITERAL_EXAMPLE + " * 100")
PYTHON_LOOKUP_CONVENTIONS = _conventions(_LOOKUP_STYLE, _ANSWER_RULES, _LOOKUP_EXAMPLE + " * 100")

# FinQA's answers (what its official evaluation compares): a number (a percentage as a ratio) or yes / no.
_FINQA_ANSWER_RULES = """\
- Put the answer, a number, in `ans`. "Change from A to B" is B - A. A percentage is a ratio, not multiplied
  by 100: "percentage change" is (new - old) / old, a percentage of a total is part / total (0.125 for 12.5 %).
  A yes-or-no question's answer is the text "yes" or "no".
- Do not write units or the scale (thousands, millions): the document states them.
- Plain statements only: no imports, no functions, no print.
"""

FINQA_PYTHON_CONVENTIONS = _conventions(_LITERAL_STYLE, _FINQA_ANSWER_RULES, _LITERAL_EXAMPLE)
FINQA_PYTHON_LOOKUP_CONVENTIONS = _conventions(_LOOKUP_STYLE, _FINQA_ANSWER_RULES, _LOOKUP_EXAMPLE)

FINQA_DSL_CONVENTIONS = """\
The program is a comma-separated list of steps `operation(argument1, argument2)`.
- Operations: add, subtract, multiply, divide, exp (power), greater (gives yes or no); table_sum,
  table_average, table_max, table_min take a table row label and `none`.
- Arguments: numbers copied from the table or the text (5829, 23.6%, -1.5), constants (const_100,
  const_1000, const_m1 for -1) or the result of an earlier step (#0 is the result of the first step).
- The answer is the result of the last step.

Example: subtract(5829, 5735), divide(#0, 5735)"""

