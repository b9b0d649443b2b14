"""Data layer: load FinQA, TAT-QA and SARA as ``dspy.Example`` objects with uniform fields; render tables.

    from knapsack_dspy.docqa.data import load_examples, load_statutes, DataError
    examples = load_examples("tatqa", split="dev_tune")      # list[dspy.Example], .report attached
    statutes = load_statutes()                               # {"7703": "§7703. ...", ...}

See ``docs/data.md`` for the fields, sources and error handling. Importing this package does not import
dspy or datasets (they load on first use).
"""

from knapsack_dspy.docqa.data.errors import DataError, LoadReport, SkippedRecord
from knapsack_dspy.docqa.data.example_fields import FIELDS, INPUT_FIELDS
from knapsack_dspy.docqa.data.loader import DATASETS, DataWarning, LoadedExamples, find_split_file, load_examples
from knapsack_dspy.docqa.data.rendering import render_paragraphs, render_table
from knapsack_dspy.docqa.data.statutes import load_statutes

__all__ = [
    "DATASETS",
    "FIELDS",
    "INPUT_FIELDS",
    "DataError",
    "DataWarning",
    "LoadReport",
    "LoadedExamples",
    "SkippedRecord",
    "find_split_file",
    "load_examples",
    "load_statutes",
    "render_paragraphs",
    "render_table",
]
