"""Reproduction on the real FinQA gold programs (train + dev metadata in ``$KDSPY_DATA_DIR/finqa``).

The metadata holds each gold program and its officially executed answer (no tables), so every program
without a table operation must reproduce its answer exactly, with both executors: the DSL executor and
the Python sandbox running the same steps written as Python. Skipped when the data is not available.
"""

from __future__ import annotations

import csv
import gzip
import re

import pytest

import knapsack_dspy  # noqa: F401
from knapsack_dspy.docqa.metrics.answer_matching import finqa_exact_match
from knapsack_dspy.docqa.metrics.finqa import program_match
from knapsack_dspy.docqa.sandbox import (
    execute_finqa_program,
    execute_python,
    parse_program,
    program_to_tokens,
    steps_to_tokens,
)
from knapsack_dspy.paths import ConfigError, data_dir


def _rows():
    try:
        folder = data_dir() / "finqa"
    except ConfigError:
        return []
    rows = []
    for split in ("train", "dev"):
        path = folder / f"{split}_meta.csv.gz"
        if path.is_file():
            with gzip.open(path, "rt", encoding="utf-8", newline="") as handle:
                rows += [(split, row["program"], row["answer"]) for row in csv.DictReader(handle)]
    return rows


ROWS = _rows()
pytestmark = pytest.mark.skipif(not ROWS, reason="FinQA metadata not found under $KDSPY_DATA_DIR/finqa")


def _gold_answer(text: str):
    return text if text in ("yes", "no") else float(text)


def _as_python(program: str) -> str:
    """The same steps as Python calls of the DSL functions (``#n`` -> ``step_n``, ``x%`` -> ``x / 100``)."""
    lines = []
    for index, step in enumerate(parse_program(program)):
        args = []
        for arg in step.args:
            if arg.startswith("#"):
                args.append(f"step_{arg[1:]}")
            elif arg.endswith("%"):
                args.append(f"({arg[:-1]} / 100)")
            else:
                args.append(arg)
        lines.append(f"step_{index} = {step.op}({', '.join(args)})")
    lines.append(f"ans = step_{index}")
    return "\n".join(lines)


def test_every_gold_program_parses_and_tokenizes_like_the_official_tokenizer():
    for split, program, _ in ROWS:
        assert steps_to_tokens(parse_program(program)) == program_to_tokens(program), (split, program)


def test_gold_programs_without_tables_reproduce_the_official_answers():
    checked = 0
    for split, program, answer in ROWS:
        if "table_" in program:
            continue
        result = execute_finqa_program(program)
        assert result.ok and finqa_exact_match(result.answer, _gold_answer(answer)), (split, program, answer, result)
        checked += 1
    assert checked > 6000


def test_python_sandbox_agrees_with_the_dsl_executor():
    for split, program, answer in ROWS:
        if "table_" in program:
            continue
        result = execute_python(_as_python(program))
        assert result.ok, (program, result.error)
        gold = _gold_answer(answer)
        if isinstance(gold, str):
            assert result.answer == gold, (program, result.answer)
        else:
            assert round(result.answer, 5) == pytest.approx(gold, abs=1e-9), (split, program, answer, result.answer)


def test_gold_programs_are_program_equal_to_themselves_and_to_commuted_forms():
    sample = [program for split, program, _ in ROWS if split == "dev"][:80]
    for program in sample:
        assert program_match(program, program), program
        swapped = re.sub(r"(add|multiply)\(([^,()]+), ([^,()]+)\)", r"\1(\3, \2)", program)
        assert program_match(swapped, program), (program, swapped)
