"""The evidence a FinQA gold program reads, found from its numbers (for records without ``gold_inds``).

The official FinQA files name each question's evidence (``gold_inds``: ``table_<row>`` / ``text_<sentence>``);
some copies do not (``finqa/train_docs.json.gz``). The gold program still says what it read: each number argument
(``subtract(5829, 5735)``) was copied from a table cell or a sentence, and a table operation
(``table_max(net sales, none)``) names its row. :func:`program_evidence` finds them:

- a number argument (not ``const_*``, not ``#n``) -> every table row with a cell holding that value (cells read as
  the official ``process_row`` or as the sandbox does: ``"$ 12.4"``, ``"-29.6 ( 29.6 )"``, ``"5%"`` for ``5%``);
  a number no row holds -> every sentence (``pre_text + post_text``) that writes it;
- a table operation's row -> that row (matched by its first cell as written, as the official executor does).

Header rows are not evidence. The result uses ``gold_inds``' keys, in document order: rows first, then
sentences. It is what a demo of the record shows when its document is cut down (``DocumentQA``), and its kinds
give the record's ``modality`` (table / text / hybrid).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from knapsack_dspy.docqa.sandbox.cell_numbers import parse_cell
from knapsack_dspy.docqa.sandbox.finqa_dsl import MATH_OPERATIONS, ProgramError, parse_program
from knapsack_dspy.docqa.sandbox.finqa_executor import official_cell_number, official_number
from knapsack_dspy.docqa.table_layout import header_row_count

__all__ = ["data_row_values", "demo_evidence", "program_evidence", "program_reads_shown", "sentence_numbers"]

_NUMBER = re.compile(r"(?<![\w.])-?\d[\d,]*(?:\.\d+)?")


def sentence_numbers(sentence: str) -> set[float]:
    """The numbers a sentence writes (``"$ 46.2 million"`` -> 46.2, ``"1,234"`` -> 1234)."""
    found = set()
    for match in _NUMBER.finditer(sentence or ""):
        try:
            found.add(float(match.group().replace(",", "")))
        except ValueError:
            continue
    return found


def _argument_values(arg: str) -> set[float]:
    """What a number argument may be written as in a document: ``"5%"`` is 5 in text and 0.05 / 5 in a cell."""
    value = official_number(arg)
    if value is None:
        return set()
    if arg.strip().endswith("%"):
        return {value, round(value * 100, 10)}
    return {value}


def _cell_values(cell: str) -> set[float]:
    values = set()
    official = official_cell_number(cell)
    if official is not None:
        values.add(official)
    sandbox = parse_cell(cell)
    if isinstance(sandbox, float):
        values.add(sandbox)
    return values


def _read(program: str, table, paragraphs):
    """(the program's steps, the table's rows as strings, each row's data-cell values (none for header rows), each
    sentence's numbers); ``None`` for an unreadable program."""
    try:
        steps = parse_program(program)
    except ProgramError:
        return None
    rows = [[str(c) for c in row] for row in (table or [])]
    return steps, rows, data_row_values(rows), [sentence_numbers(p) for p in paragraphs or []]


def data_row_values(table: Sequence[Sequence[str]]) -> list[set[float]]:
    """Each row's data-cell values (its first cell, the label, left out; none for header rows), cells read as the
    official ``process_row`` or as the sandbox reads them (TAT-QA demos are cut by them too:
    ``data.tatqa_evidence``)."""
    rows = [[str(c) for c in row] for row in (table or [])]
    first_data = header_row_count(rows) if rows else 0
    return [set().union(*(_cell_values(c) for c in row[1:])) if i >= first_data else set()
            for i, row in enumerate(rows)]


def program_evidence(program: str, table: Sequence[Sequence[str]], paragraphs: Sequence[str]) -> list[str]:
    """Evidence keys (``"table_<row>"``, ``"text_<sentence>"``) of the cells / sentences a FinQA program reads;
    ``[]`` for an unreadable program."""
    read = _read(program, table, paragraphs)
    if read is None:
        return []
    steps, rows, row_values, sentences = read
    wanted_rows: set[int] = set()
    wanted_text: set[int] = set()
    for step in steps:
        if step.op not in MATH_OPERATIONS:  # a table operation: its row, by its first cell as written
            wanted_rows.update(i for i, row in enumerate(rows) if row and row[0] == step.args[0])
            continue
        for arg in step.args:
            if arg.startswith(("#", "const_")):
                continue
            values = _argument_values(arg)
            holding = [i for i, held in enumerate(row_values) if held & values]
            if holding:
                wanted_rows.update(holding)
            else:
                wanted_text.update(i for i, held in enumerate(sentences) if held & values)
    return [f"table_{i}" for i in sorted(wanted_rows)] + [f"text_{i}" for i in sorted(wanted_text)]


def program_reads_shown(program: str, table: Sequence[Sequence[str]],
                        paragraphs: Sequence[str]) -> tuple[int, int] | None:
    """(how many of the things a FinQA program reads the given context shows, how many it reads); ``None`` for an
    unreadable program.

    What a program reads: each number argument (not ``const_*``, not ``#n``) -- shown when a data cell of ``table``
    (read as in :func:`program_evidence`) or a sentence of ``paragraphs`` holds its value -- and each table
    operation's row -- shown when a row of ``table`` starts with that name. With the context a prompt shows (a
    query's retrieved rows and sentences) this is the retrieval recall of the facts the gold answer needs, for
    records without ``gold_inds``."""
    read = _read(program, table, paragraphs)
    if read is None:
        return None
    steps, rows, row_values, sentence_values = read
    shown_values = set().union(*row_values, *sentence_values)
    names = {row[0] for row in rows if row}
    shown = total = 0
    for step in steps:
        if step.op not in MATH_OPERATIONS:
            total += 1
            shown += step.args[0] in names
            continue
        for arg in step.args:
            if arg.startswith(("#", "const_")):
                continue
            values = _argument_values(arg)
            total += 1
            shown += bool(values & shown_values)
    return shown, total


def demo_evidence(example) -> tuple[list[int], list[int]] | None:
    """(table rows, sentences) a demo of a FinQA document record shows: its ``gold_evidence`` when it has one,
    else the evidence its gold program reads (``extra["program_evidence"]``); ``None`` for other records (their
    demos show what a query's retrieval keeps)."""
    if (example.get("dataset") or "") != "finqa" or not (example.get("program") or "").strip():
        return None
    keys = list(example.get("gold_evidence") or []) or list((example.get("extra") or {}).get("program_evidence")
                                                            or [])
    rows = sorted({int(k[6:]) for k in keys if k.startswith("table_") and k[6:].isdigit()})
    sentences = sorted({int(k[5:]) for k in keys if k.startswith("text_") and k[5:].isdigit()})
    return rows, sentences
