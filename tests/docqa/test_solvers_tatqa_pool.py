"""Gold-program verification on the real TAT-QA exemplar pool (skipped when the data directory is absent)."""


import pytest
from helpers import DATA

from knapsack_dspy.docqa.data.gold_program_checks import program_parts
from knapsack_dspy.docqa.data.gold_programs import synthesise_python_program, verification_report
from knapsack_dspy.docqa.table_layout import render_layout, table_layout

POOL = DATA / "tatqa" / "dev_pool.json.gz"


@pytest.fixture(scope="module")
def pool():
    from knapsack_dspy.docqa.data.loader import load_examples

    return load_examples("tatqa", "dev_pool", data_dir=DATA)


@pytest.mark.skipif(not POOL.exists(), reason="TAT-QA pool not available")
def test_gold_programs_verify_strictly_on_the_tatqa_pool(pool):
    report = verification_report(pool)
    assert report["total"] == len(pool) == 1164
    # every arithmetic derivation that reproduces its gold answer yields a verified program
    assert report["by_answer_type"]["arithmetic"]["verified"] / report["by_answer_type"]["arithmetic"]["total"] >= 0.99
    assert report["verified"] / report["total"] >= 0.99
    assert report["table_lookups"] > 400  # numbers are bound to the table cells the layout labels
    # no candidate the synthesis writes reaches its answer by coincidence (its rules prevent the patterns)
    assert report["coincidental"]["records"] == 0


@pytest.mark.skipif(not POOL.exists(), reason="TAT-QA pool not available")
def test_every_pool_gold_program_reads_the_table_by_labels_it_was_shown(pool):
    lookups = 0
    for example in pool:
        code = synthesise_python_program(example).code
        assert "scale" not in code  # the answer's scale is decided from the document, not shown in demos
        cells = program_parts(code).cells
        if not cells:
            continue
        layout = table_layout(example.table)
        shown = render_layout(layout)
        for row, column in cells.values():
            lookups += 1
            assert row in layout.row_labels and column in layout.column_labels, (example.id, row, column)
            assert f"| {row} |" in shown and column in shown.splitlines()[1 if layout.units or layout.caption else 0]
    assert lookups > 1000
