"""saved_format.py: every saved format's version is defined there once, the writers write it, and the saved
programs' layout migrations."""

import pytest

from knapsack_dspy import saved_format
from knapsack_dspy.bench.reporting import page_data
from knapsack_dspy.bench.results import prompt_record, row_schema
from knapsack_dspy.docqa.pipelines.answer_type_router import AnswerTypeRouter
from knapsack_dspy.docqa.pipelines.pipeline import PipelineSpec
from knapsack_dspy.saved_format import pipeline_spec_arguments, select_module_moved


def test_the_versions_are_the_ones_files_were_written_with():
    # a change here is a format change: bump on purpose, with a history line and a migration
    assert (saved_format.PIPELINE_SPEC_VERSION, saved_format.SELECT_EXEMPLARS_STATE_VERSION,
            saved_format.ROUTER_STATE_VERSION, saved_format.RESULT_ROW_SCHEMA_VERSION,
            saved_format.PROMPT_FORMAT_VERSION, saved_format.PAGE_DATA_VERSION) == (3, 5, 1, 3, 2, 1)
    assert saved_format.PIPELINE_SPEC_VERSIONS[-1] == saved_format.PIPELINE_SPEC_VERSION
    assert saved_format.SELECT_EXEMPLARS_STATE_VERSIONS[-1] == saved_format.SELECT_EXEMPLARS_STATE_VERSION


def test_the_writers_write_the_declared_versions():
    assert PipelineSpec(kind="document").dump_state()["version"] == saved_format.PIPELINE_SPEC_VERSION
    assert AnswerTypeRouter().dump_state()["version"] == saved_format.ROUTER_STATE_VERSION
    row = row_schema.ResultRow.build({"run": "r", "example_id": "q1"})
    assert row.to_json()["schema_version"] == saved_format.RESULT_ROW_SCHEMA_VERSION
    assert prompt_record.PROMPT_FORMAT_VERSION == saved_format.PROMPT_FORMAT_VERSION
    assert page_data.PAGE_DATA_VERSION == saved_format.PAGE_DATA_VERSION


def test_a_version_1_spec_drops_the_selection_settings_it_repeated():
    spec = {"version": 1, "kind": "document", "pipeline": "pot", "selector": "seer", "max_exemplars": 4,
            "attributes": ["modality"]}
    assert pipeline_spec_arguments(spec) == {"kind": "document", "pipeline": "pot"}
    assert pipeline_spec_arguments({**spec, "version": 3}) == {k: v for k, v in spec.items() if k != "version"}
    with pytest.raises(ValueError, match="unsupported pipeline spec"):
        pipeline_spec_arguments({**spec, "version": 4})


def test_an_older_programs_select_module_moves_into_its_demo_predictor():
    state = {"select": {"pool": []}, "solve.write": {"demos": []}, "spec": {}}
    moved = select_module_moved(state, 2, "solve.write")
    assert moved == {"solve.write": {"demos": [], "selection": {"pool": []}}, "spec": {}}
    assert "select" in state  # the caller's state is left as it was
    assert select_module_moved(moved, 3, "solve.write") == moved
    with pytest.raises(ValueError, match="without its 'select' state"):
        select_module_moved({"solve.write": {}}, 1, "solve.write")
