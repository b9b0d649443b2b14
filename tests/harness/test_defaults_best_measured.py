"""The defaults are the configuration the README measures best: TAT-QA's program pipeline routed (span questions
extracted) wherever a route applies, and the best measured selector; every selector reachable from the command
line; the committed results keep their run keys (their suites state ``route = ""``)."""

import pytest

from knapsack_dspy.bench.suites.suite import RunSpec, suite_from_dict
from knapsack_dspy.cli import compile as compile_cli
from knapsack_dspy.cli.main import build_parser
from knapsack_dspy.docqa.tasks import build_pipeline, task_named
from knapsack_dspy.selection import SelectionConfig
from knapsack_dspy.selection.selectors import SELECTORS


def test_tatqa_program_pipelines_are_routed_by_default_and_nothing_else_is():
    assert task_named("tatqa").default_route("pot") == "extract_compute"
    assert task_named("finqa").default_route("finqa_pot") is None and task_named("tatqa").default_route("cot") is None
    assert task_named("sara").default_route("cot") is None
    assert RunSpec().route == "extract_compute"
    assert RunSpec(dataset="finqa", pipeline="finqa_pot").route == ""
    assert RunSpec(dataset="sara", pipeline="cot").route == ""
    assert RunSpec(route="").route == ""  # a suite's explicit "no route" stays
    runs = suite_from_dict({"dataset": "sara", "pipeline": "cot", "selector": "kate", "pool_split": "train",
                            "eval_split": "train"}).runs
    assert runs[0].route == ""  # no route error for a data set without routes


def test_the_unrouted_key_is_the_key_recorded_before_the_default_changed():
    unrouted = RunSpec(route="", selector="seer", attributes=("modality", "answer_type"))
    assert unrouted.key == "tatqa|pot|seer|b2048|m4|local/qwen2.5-coder-1.5b-instruct|b7234d21"  # committed
    assert RunSpec(selector="seer", attributes=("modality", "answer_type")).key.endswith("|e5da3fad")  # routed


def test_build_pipeline_routes_by_default_and_takes_none(tmp_path):
    from helpers import HashingEmbedder, WordCounter

    routed = build_pipeline("tatqa", "pot", embedder=HashingEmbedder(), token_counter=WordCounter())
    assert routed.route == "extract_compute"
    assert build_pipeline("tatqa", "pot", route=None, embedder=HashingEmbedder(), token_counter=WordCounter()).route \
        is None
    with pytest.raises(ValueError, match="SARA has none"):
        build_pipeline("sara", "cot", route="extract_compute")


def test_the_default_selector_is_the_best_measured_one_and_the_cli_names_every_selector(capsys):
    assert SelectionConfig().selector == "kate_within_budget"
    assert set(compile_cli.SELECTOR_NAMES) == set(SELECTORS)
    with pytest.raises(SystemExit):
        build_parser().parse_args(["compile", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "--route {auto,extract_compute,none}" in text and "(default kate_within_budget)" in text
    for name in SELECTORS:
        assert name in text
