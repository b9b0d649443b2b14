"""render_table / render_paragraphs: prompt text for tables and paragraphs."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from knapsack_dspy.docqa.data import render_paragraphs, render_table

TABLE = [
    ["", "2019", "2018"],
    ["", "€m", "€m"],
    ["Capital additions", "(7,227)", "(7,321)"],
    ["Dividends received", "498", "489"],
    ["Free cash flow", "4,411", "4,044"],
]


def test_render_table_keeps_cells_as_written():
    assert render_table(TABLE) == (
        "|  | 2019 | 2018 |\n"
        "|  | €m | €m |\n"
        "| Capital additions | (7,227) | (7,321) |\n"
        "| Dividends received | 498 | 489 |\n"
        "| Free cash flow | 4,411 | 4,044 |"
    )
    assert render_table([]) == ""
    assert render_table([["only header"]]) == "| only header |"


def test_keep_rows_always_keeps_the_header_in_table_order():
    assert render_table(TABLE, keep_rows=[4, 2]).splitlines() == [
        "|  | 2019 | 2018 |", "| Capital additions | (7,227) | (7,321) |", "| Free cash flow | 4,411 | 4,044 |"]
    assert render_table(TABLE, keep_rows=[]) == "|  | 2019 | 2018 |"
    assert render_table(TABLE, keep_rows=[3, 3, -1]).count("\n") == 2  # duplicates once; -1 is the last row
    assert render_table(TABLE, keep_rows=range(5)) == render_table(TABLE)
    with pytest.raises(ValueError, match="row index 5 out of range for a table of 5 rows"):
        render_table(TABLE, keep_rows=[5])
    with pytest.raises(TypeError, match="keep_rows items must be ints"):
        render_table(TABLE, keep_rows=["1"])


def test_cells_with_pipes_newlines_and_numbers():
    rows = [["a|b", "line\none", 3.5], [None, "  padded  ", "C:\\"]]
    assert render_table(rows) == "| a\\|b | line one | 3.5 |\n|  | padded | C:\\ |"


def test_bad_tables():
    with pytest.raises(TypeError, match="rows must be a list of rows, got str"):
        render_table("| a |")
    with pytest.raises(TypeError, match="row 1 must be a list of cells, got str"):
        render_table([["a"], "b"])


def test_render_paragraphs():
    paragraphs = ["Cash flow measures", "The\nCompany\nis incorporated   in Switzerland.", ""]
    assert render_paragraphs(paragraphs) == "Cash flow measures\nThe Company is incorporated in Switzerland.\n"
    assert render_paragraphs(paragraphs, numbered=True).splitlines() == [
        "[1] Cash flow measures", "[2] The Company is incorporated in Switzerland.", "[3] "]
    assert render_paragraphs(paragraphs[:1], numbered=True, start=0) == "[0] Cash flow measures"
    assert render_paragraphs([]) == ""
    with pytest.raises(TypeError, match="paragraph 1 must be a string, got int"):
        render_paragraphs(["a", 2])
    with pytest.raises(TypeError, match="must be a list of strings, got str"):
        render_paragraphs("one paragraph")


# Backslashes are written as they are (Markdown convention: only "|" is escaped), so a cell ending in "\\"
# next to a separator cannot be read back unambiguously; the property covers every other character.
cells = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",), exclude_characters="\\"),
                max_size=12)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.lists(cells, min_size=1, max_size=5), min_size=1, max_size=6), st.data())
def test_rendered_rows_split_back_into_their_cells(rows, data):
    """Each kept row is one line from which the (whitespace-normalised) cells can be read back."""
    keep = data.draw(st.lists(st.integers(0, len(rows) - 1), max_size=len(rows)))
    lines = render_table(rows, keep_rows=keep).split("\n")
    kept = sorted(set(keep) | {0})
    assert len(lines) == len(kept)
    for line, index in zip(lines, kept, strict=True):
        assert line.startswith("| ") and line.endswith(" |")
        parts = re.split(r"(?<!\\) \| ", line[2:-2])
        parts = [p.replace("\\|", "|") for p in parts]
        assert parts == [" ".join(cell.split()) for cell in rows[index]]
