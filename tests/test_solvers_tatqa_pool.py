"""Gold-program verification on the real TAT-QA exemplar pool (skipped when the data directory is absent)."""

import os
from pathlib import Path

import pytest

from knapsack_dspy.data.gold_programs import verification_report

DATA = Path(os.environ.get("KDSPY_DATA_DIR", "/work/shared/data"))
POOL = DATA / "tatqa" / "dev_pool.json.gz"


@pytest.mark.skipif(not POOL.exists(), reason="TAT-QA pool not available")
def test_gold_programs_verify_on_the_tatqa_pool():
    from knapsack_dspy.data.loader import load_examples

    examples = load_examples("tatqa", "dev_pool", data_dir=DATA)
    report = verification_report(examples)
    assert report["total"] == len(examples) == 1164
    # every arithmetic derivation that reproduces its gold answer yields a verified program
    assert report["by_answer_type"]["arithmetic"]["verified"] / report["by_answer_type"]["arithmetic"]["total"] >= 0.99
    assert report["verified"] / report["total"] >= 0.99
    assert report["table_lookups"] > 100  # numbers are bound to table cells where the labels allow it
