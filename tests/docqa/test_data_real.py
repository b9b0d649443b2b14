"""The real splits in the shared data directory ($KDSPY_DATA_DIR): counts, invariants, parser agreement.

Skipped when the data directory is not available.
"""

from __future__ import annotations

import csv
import gzip
from collections import Counter

import pytest

import knapsack_dspy  # noqa: F401
from knapsack_dspy.docqa.data import load_examples, load_statutes
from knapsack_dspy.docqa.data.example_fields import validate_fields
from knapsack_dspy.paths import ConfigError, data_dir

try:
    DATA = data_dir()
except ConfigError:
    DATA = None

pytestmark = pytest.mark.skipif(DATA is None or not (DATA / "tatqa").is_dir(),
                                reason="shared data directory not available (set KDSPY_DATA_DIR)")

SPLITS = {("tatqa", "dev"): 1668, ("tatqa", "dev_pool"): 1164, ("tatqa", "dev_tune"): 504,
          ("finqa_cases", "train"): 6251, ("finqa_cases", "dev"): 883, ("sara", "train"): 256}


@pytest.fixture(scope="module")
def loaded():
    return {key: load_examples(key[0], split=key[1]) for key in SPLITS}


def test_every_split_loads_completely_with_valid_uniform_fields(loaded):
    for (dataset, split), count in SPLITS.items():
        examples = loaded[dataset, split]
        assert len(examples) == count, (dataset, split)
        assert examples.report.skipped == []
        assert len({ex.id for ex in examples}) == count
        for ex in examples:
            validate_fields(ex)
            assert ex.dataset == dataset and ex.question.strip()


def test_tatqa_pool_and_tune_partition_dev_by_document(loaded):
    dev, pool, tune = (loaded["tatqa", s] for s in ("dev", "dev_pool", "dev_tune"))
    assert {ex.id for ex in pool} | {ex.id for ex in tune} == {ex.id for ex in dev}
    assert not {ex.doc_id for ex in pool} & {ex.doc_id for ex in tune}
    assert len({ex.doc_id for ex in dev}) == 278


def test_tatqa_attributes(loaded):
    dev = loaded["tatqa", "dev"]
    for ex in dev:
        assert ex.table and ex.modality in ("table", "text", "hybrid")
        for item in ex.gold_evidence:
            assert item == "table" or int(item.removeprefix("text_")) < len(ex.paragraphs)
        assert ("table" in ex.gold_evidence) == (ex.modality in ("table", "hybrid"))
        if ex.answer_type == "multi-span":
            assert isinstance(ex.answer, list)
        elif ex.answer_type in ("span", "count"):
            assert isinstance(ex.answer, str)
    tune = loaded["tatqa", "dev_tune"]
    assert Counter(ex.answer_type for ex in tune) == {"arithmetic": 212, "span": 198, "multi-span": 84, "count": 10}
    assert Counter(ex.modality for ex in tune) == {"table": 228, "hybrid": 175, "text": 101}


def test_tatqa_derivations_parse_and_reproduce_the_gold_answers(loaded):
    """Every arithmetic derivation parses; its value matches the gold answer (up to the percent x100 and
    2-decimal rounding the annotators apply) for all but a scale mismatch or two."""
    arithmetic = [ex for ex in loaded["tatqa", "dev"] if ex.answer_type == "arithmetic"]
    assert len(arithmetic) == 718
    from knapsack_dspy.docqa.data.tatqa_derivation import parse_derivation

    matches = 0
    for ex in arithmetic:
        assert "derivation_error" not in ex.extra and ex.num_steps == len(ex.operators) >= 1
        value = parse_derivation(ex.derivation).value
        if value is not None and any(abs(v - ex.answer_value) <= max(0.01, 0.006 * abs(ex.answer_value))
                                     for v in (value, value * 100)):
            matches += 1
    assert matches >= 0.99 * len(arithmetic)
    assert all(ex.num_steps == 0 and ex.program_template == "" for ex in loaded["tatqa", "dev"]
               if ex.answer_type != "arithmetic")


def test_finqa_cases_templates_match_seer_and_programs_parse(loaded):
    """The CSV's templates are kept; recomputing them from the programs agrees except for SEER's numeric
    table-row-name quirk."""
    from knapsack_dspy.docqa.data.program_template import finqa_program_template

    train = loaded["finqa_cases", "train"]
    agree = sum(finqa_program_template(ex.program) == ex.program_template for ex in train)
    assert agree >= 0.998 * len(train)
    assert Counter(ex.answer_type for ex in train)["yes-no"] == 124
    assert Counter(ex.modality for ex in train) == {"table": 3856, "text": 1596, "hybrid": 799}
    with gzip.open(DATA / "finqa" / "dev_meta.csv.gz", "rt", newline="") as handle:
        rows = list(csv.DictReader(handle))
    dev = loaded["finqa_cases", "dev"]
    assert [ex.question for ex in dev] == [row["question"] for row in rows]
    assert [ex.program for ex in dev] == [row["program"].strip() for row in rows]


def test_sara_cases_and_statutes(loaded):
    cases = loaded["sara", "train"]
    assert Counter(ex.answer_type for ex in cases) == {"entailment": 176, "numerical": 80}
    assert Counter(ex.answer for ex in cases if ex.answer_type == "entailment") == {"Entailment": 88,
                                                                                     "Contradiction": 88}
    assert all(ex.answer_value is not None and ex.answer.startswith("$") for ex in cases
               if ex.answer_type == "numerical")
    statutes = load_statutes()
    assert list(statutes) == ["1", "2", "63", "68", "151", "152", "3301", "3306", "7703"]
    assert statutes["7703"].encode("utf-8") == (DATA / "sara" / "statutes" / "section7703.txt").read_bytes()
    # every entailment case tests a subsection of a statute we have
    assert {ex.extra["section"] for ex in cases if ex.answer_type == "entailment"} <= set(statutes)


def test_limit_reads_only_what_it_needs():
    examples = load_examples("tatqa", split="dev", limit=10)
    assert len(examples) == 10 and examples.report.records_read <= 10
