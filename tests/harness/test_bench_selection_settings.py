"""One home for the selection defaults: ``SelectionConfig``'s. A suite run (``RunSpec``) and ``kdspy compile`` derive
theirs from it, every setting is a suite key, and the run keys of the committed results do not change."""

from __future__ import annotations

import argparse
import dataclasses
from dataclasses import dataclass
from pathlib import Path

import pytest

from knapsack_dspy.bench.results.store import load_rows
from knapsack_dspy.bench.suites.selection_settings import BENCH_DEFAULTS, config_values, with_selection_settings
from knapsack_dspy.bench.suites.suite import RunSpec, SuiteError, suite_from_dict
from knapsack_dspy.cli import compile as compile_cli
from knapsack_dspy.cli.main import UserError
from knapsack_dspy.selection.config import SelectionConfig

ROOT = Path(__file__).resolve().parents[2]
# the maintained results and the finished experiments' (experiments/<topic>/results)
COMMITTED = sorted([*(ROOT / "benchmarks" / "results").rglob("predictions.jsonl*"),
                    *(ROOT / "experiments").glob("*/results/**/predictions.jsonl*")])
SETTINGS = [f.name for f in dataclasses.fields(SelectionConfig)]
# a value other than the default for each setting (a setting added since without one is checked at its default)
OTHER_VALUES = {"selector": "kate", "max_exemplars": 3, "budget": 1024, "reserve_output_tokens": 128,
                "exemplar_budget": 512, "alpha": 0.5,
                "beta": 0.25, "attributes": ("answer_type",), "attribute_source": "gold", "knn_k": 50,
                "max_per_doc": 1, "core_size": 1, "val_size": 10, "seed": 3, "embed_fields": ("question",),
                "exclude_same_doc": False, "shared_fields": (), "selector_params": {"respect_budget": True},
                "demo_order": "canonical", "latency_budget": 9.0,
                "latency_rates": {"prefill_tokens_per_s": 65.0, "decode_tokens_per_s": 21.4, "overhead_s": 0.5,
                                  "output_tokens": 60},
                "context_fields": ("context",), "evidence": "sequential", "evidence_solver": "greedy",
                "evidence_weight": 0.5, "evidence_budget": 300}


@pytest.mark.skipif(not COMMITTED, reason="no committed results")
def test_the_run_keys_of_every_committed_results_row_are_reproduced():
    """Resuming matches rows on ``run``: the settings each row records must still give that key."""
    checked = set()
    for path in COMMITTED:
        for row in load_rows(path):
            assert RunSpec.from_dict(row.spec).key == row.run, (path, row.run)
            checked.add((path, row.run))
    assert len(checked) >= 36


def test_every_selection_setting_is_a_run_field_with_selection_configs_default():
    run, defaults = RunSpec(), SelectionConfig()
    for name in SETTINGS:
        expected = BENCH_DEFAULTS.get(name, getattr(defaults, name))
        assert getattr(run, name) == ("" if expected is None and name == "attribute_source" else expected), name
    # the declared differences: a budget, and the document-QA tasks' attribute (the engine names none)
    assert BENCH_DEFAULTS == {"budget": 2048, "attributes": ("modality",)} and defaults.budget is None
    assert defaults.attributes == ()
    assert run.selection_config() == dataclasses.replace(defaults, budget=2048, attributes=("modality",))


@pytest.mark.parametrize("name", SETTINGS)
def test_every_selection_setting_is_a_suite_key_and_reaches_the_runs_config(name):
    if name not in OTHER_VALUES:  # a setting added since: a suite key at its default at least
        (run,) = suite_from_dict({"name": "t"}).runs
        assert getattr(run.selection_config(), name) == getattr(SelectionConfig(), name)
        pytest.skip(f"no other value of {name} in OTHER_VALUES")
    value = OTHER_VALUES[name]
    toml_value = list(value) if isinstance(value, tuple) else value
    extra = {"selector": "hybrid"} if name == "core_size" else {"selector": "kate"} if name == "selector_params" \
        else {}
    (run,) = suite_from_dict({"name": "t", name: toml_value, **extra}).runs
    config = run.selection_config()
    assert getattr(config, name) == value
    # a setting at its default stays out of the key unless it was in the key of the first recorded runs
    assert run.key != suite_from_dict({"name": "t", **extra}).runs[0].key


def test_a_bad_setting_in_a_suite_is_one_line_naming_it():
    with pytest.raises(SuiteError) as info:
        suite_from_dict({"name": "t", "knn_k": "many", "selector_params": {"nope": 1}, "exclude_same_doc": "no",
                         "embed_fields": []}, "s.toml")
    lines = str(info.value).splitlines()
    assert lines[0] == "s.toml: 4 problems:"
    assert any(line.strip().startswith("knn_k: input should be a valid integer") for line in lines)
    assert any(line.strip().startswith("exclude_same_doc: input should be a valid boolean") for line in lines)
    assert any("selector 'priced_case_coverage' has no parameter 'nope'" in line for line in lines)  # the default
    assert any(line.strip().startswith("embed_fields: embed_fields must name at least one field") for line in lines)


def test_a_setting_added_to_selection_config_becomes_a_run_field_with_no_edit():
    @dataclass(frozen=True)
    class Extended(SelectionConfig):
        max_tables: int | None = None  # e.g. a setting another change adds (as exemplar_budget was)

    class Run:
        dataset: str = "tatqa"

    Run = dataclass(frozen=True)(with_selection_settings(Run, config=Extended))
    run = Run(max_tables=2, exemplar_budget=1500)
    assert run.max_tables == 2 and run.exemplar_budget == 1500 and run.budget == 2048 and run.attribute_source == ""
    assert Extended(**config_values(run, config=Extended)).max_tables == 2
    with pytest.raises(TypeError, match="SelectionConfig is their home"):
        @dataclass
        @with_selection_settings
        class Restating:
            alpha: float = 0.5


def _compile_args(*argv: str):
    parser = argparse.ArgumentParser()
    compile_cli.register(parser.add_subparsers())
    return parser.parse_args(["compile", "-o", "p.json", *argv])


def test_kdspy_compile_defaults_are_selection_configs_and_setting_sets_any_field():
    assert compile_cli._selection_config(_compile_args()) == SelectionConfig(attributes=("modality",))
    args = _compile_args("-M", "3", "--attributes", "modality,answer_type", "--setting", "knn_k=50",
                         "--setting", "embed_fields=[\"question\"]", "--setting", "demo_order=canonical")
    assert compile_cli._selection_config(args) == SelectionConfig(
        max_exemplars=3, attributes=("modality", "answer_type"), knn_k=50, embed_fields=("question",),
        demo_order="canonical")
    with pytest.raises(ValueError, match="unknown selection setting 'nope'"):
        compile_cli._selection_config(_compile_args("--setting", "nope=1"))
    with pytest.raises(UserError, match="expected NAME=VALUE"):
        compile_cli._selection_config(_compile_args("--setting", "knn_k"))
    commands = argparse.ArgumentParser().add_subparsers()
    compile_cli.register(commands)
    shown = commands.choices["compile"].format_help()
    assert "(default 4)" in shown and "(default 0.75)" in shown and "(default modality)" in shown
