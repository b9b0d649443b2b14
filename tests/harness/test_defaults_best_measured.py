"""The defaults are the configuration measured best: TAT-QA's program pipeline routed (span questions extracted)
wherever a route applies, and the selector and demo cut that the documented rule picks from the committed rows of
the tokens run (the fewest prompt tokens non-inferior to the most accurate setting: docs/selection_objective.md, "The
default follows the evidence"; issue 38); every selector reachable from the command line; the committed results keep
their run keys (their suites state ``route = ""`` / ``demo_table = "all"``)."""

from dataclasses import asdict
from pathlib import Path

import pytest

from knapsack_dspy.bench.results.store import load_rows
from knapsack_dspy.bench.scoring.arm_figures import fewest_tokens_non_inferior, read_arms
from knapsack_dspy.bench.suites.suite import RunSpec, load_suite, suite_from_dict
from knapsack_dspy.cli.main import build_parser
from knapsack_dspy.docqa.tasks import build_pipeline, task_named
from knapsack_dspy.selection import SelectionConfig
from knapsack_dspy.selection.selectors import DEFAULT_SELECTOR, SELECTORS, make_selector


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
    whole = {"demo_table": "all", "demo_paragraphs": "all"}  # as the committed runs showed demos
    unrouted = RunSpec(route="", selector="seer", attributes=("modality", "answer_type"), **whole)
    assert unrouted.key == "tatqa|pot|seer|b2048|m4|local/qwen2.5-coder-1.5b-instruct|b7234d21"  # committed
    assert RunSpec(selector="seer", attributes=("modality", "answer_type"), **whole).key.endswith(
        "|e5da3fad")  # routed


def test_build_pipeline_routes_by_default_and_takes_none(tmp_path):
    from helpers import HashingEmbedder, WordCounter

    routed = build_pipeline("tatqa", "pot", embedder=HashingEmbedder(), token_counter=WordCounter())
    assert routed.route == "extract_compute"
    assert build_pipeline("tatqa", "pot", route=None, embedder=HashingEmbedder(), token_counter=WordCounter()).route \
        is None
    with pytest.raises(ValueError, match="SARA has none"):
        build_pipeline("sara", "cot", route="extract_compute")


def test_the_default_selector_is_the_configs_and_the_cli_names_every_selector(capsys):
    assert SelectionConfig().selector == DEFAULT_SELECTOR  # which one: derived from the rows, below
    with pytest.raises(SystemExit):
        build_parser().parse_args(["compile", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "--route {auto,extract_compute,none}" in text and f"(default {DEFAULT_SELECTOR})" in text
    assert "--demo-table {auto,all,gold_rows}" in text and "--demo-paragraphs {auto,all,gold}" in text
    for name in SELECTORS:
        assert name in text


def test_tatqa_program_demos_are_cut_by_default_and_nothing_else_is():
    cut = {"demo_table": "gold_rows", "demo_paragraphs": "gold"}
    assert task_named("tatqa").default_demo_cut("pot") == cut
    assert task_named("tatqa").default_demo_cut("cot") == {} and task_named("finqa").default_demo_cut("pot") == {}
    assert (RunSpec().demo_table, RunSpec().demo_paragraphs) == ("gold_rows", "gold")
    for spec in (RunSpec(pipeline="cot"), RunSpec(dataset="finqa", pipeline="finqa_pot"),
                 RunSpec(dataset="sara", pipeline="cot"), RunSpec(demo_table="all", demo_paragraphs="all")):
        assert (spec.demo_table, spec.demo_paragraphs) == ("all", "all")
    assert (RunSpec(demo_paragraphs="all").demo_table, RunSpec(demo_paragraphs="all").demo_paragraphs) == (
        "gold_rows", "all")  # each setting on its own
    # whole demos keep the key recorded before the default changed; the new default has a key of its own
    whole = RunSpec(route="", selector="seer", attributes=("modality", "answer_type"), demo_table="all",
                    demo_paragraphs="all")
    assert whole.key == "tatqa|pot|seer|b2048|m4|local/qwen2.5-coder-1.5b-instruct|b7234d21"  # committed
    assert RunSpec(route="", selector="seer", attributes=("modality", "answer_type")).key != whole.key
    # a stored row's spec recorded before demos were cut reads back as whole demos
    old = {k: v for k, v in asdict(whole).items() if k not in ("demo_table", "demo_paragraphs")}
    assert RunSpec.from_dict(old).key == whole.key


def test_build_pipeline_cuts_tatqa_program_demos_by_default_and_takes_whole_ones():
    from helpers import HashingEmbedder, WordCounter

    def built(**options):
        return build_pipeline("tatqa", options.pop("pipeline", "pot"), embedder=HashingEmbedder(),
                              token_counter=WordCounter(), **options)

    assert built().demo_cut == {"demo_table": "gold_rows", "demo_table_rows": 4, "demo_paragraphs": "gold"}
    assert built(demo_table="all", demo_paragraphs="all").demo_cut == {}
    assert built(demo_paragraphs="all").demo_cut == {"demo_table": "gold_rows", "demo_table_rows": 4}
    assert built(pipeline="cot").demo_cut == {}
    with pytest.raises(ValueError, match="demo_table must be one of"):
        built(demo_table="some")


BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
#: the non-inferiority margin of the default's rule, in points (docs/selection_objective.md, "The default follows
#: the evidence": the tokens gate's margin)
NON_INFERIORITY_MARGIN = 5.0


def test_the_default_is_what_the_rule_picks_from_the_committed_rows():
    """The documented rule applied to the committed rows of the tokens run: each run of the suite an arm (in the
    suite's order, which breaks ties), the most accurate arm among those asked every question, then the fewest mean
    prompt tokens among the arms whose lower 90 % bound by document of (arm - most accurate) is >= -5 points. The
    chosen run's settings must be the package's defaults: its selector with its parameters, and its demo cut."""
    suite = load_suite(BENCHMARKS / "tatqa_tokens.toml")
    rows = load_rows(BENCHMARKS.parent / suite.output)
    order = [run.key for run in suite.runs]
    arms = read_arms(rows, lambda spec: RunSpec.from_dict(spec).key, order)
    questions = sorted(set().union(*(answers.keys() for answers in arms.values())))
    assert set(questions) == set(suite.runs[0].example_ids)  # the run is complete: the rule decides on all of it
    choice = fewest_tokens_non_inferior(arms, questions, margin=NON_INFERIORITY_MARGIN, order=order)
    chosen = next(row.spec for row in rows if row.run == choice["chosen"])

    # the default selector is the chosen run's selector with the chosen run's parameters (its token price): the same
    # class of selection, every setting equal
    default, measured = make_selector(DEFAULT_SELECTOR), make_selector(chosen["selector"], **chosen["selector_params"])
    assert SelectionConfig().selector == DEFAULT_SELECTOR and isinstance(default, SELECTORS[chosen["selector"]])
    assert vars(default) == vars(measured)
    assert vars(default)["token_price"] == chosen["selector_params"]["token_price"] > 0  # a priced default

    # the demo cut, the route, the budget and M of a default TAT-QA program run are the chosen run's
    cut = {"demo_table": chosen["demo_table"], "demo_paragraphs": chosen["demo_paragraphs"]}
    assert task_named("tatqa").default_demo_cut("pot") == cut
    default_run = RunSpec()
    assert (default_run.dataset, default_run.pipeline) == (chosen["dataset"], chosen["pipeline"])
    for setting in ("demo_table", "demo_paragraphs", "route", "budget", "max_exemplars"):
        assert getattr(default_run, setting) == chosen[setting], setting


def test_every_committed_row_is_still_a_run_of_a_committed_suite():
    """Changing a default must not orphan committed results: the suites writing to a results directory still name
    every run its rows record (a suite pins the old value, as ``route = ""`` and ``demo_table = "all"`` do)."""
    keys: dict[Path, set] = {}
    for path in sorted(BENCHMARKS.glob("*.toml")):
        suite = load_suite(path)
        if suite.output:
            keys.setdefault(BENCHMARKS.parent / suite.output, set()).update(run.key for run in suite.runs)
    checked = 0
    for out, named in keys.items():
        if any(out.glob("predictions.jsonl*")):
            stored = {row.run for row in load_rows(out)}
            assert stored <= named, f"{out.name}: rows of runs no suite names: {sorted(stored - named)}"
            checked += 1
    assert checked >= 4  # the committed results directories with rows


def _rows(selectors, right):
    """Four questions on two documents, one run per selector; ``right[selector]``: the questions it got right."""
    rows = []
    for selector in selectors:
        spec = {"dataset": "tatqa", "pipeline": "pot", "selector": selector, "budget": 2048, "max_exemplars": 4,
                "model": "m"}
        rows += [{"run": f"run-{selector}", "spec": spec, "example_id": f"q{i}", "doc_id": f"d{i // 2}",
                  "answer": "a", "correct": i in right[selector], "em": float(i in right[selector]),
                  "f1": float(i in right[selector]), "exemplar_ids": [], "prompt_tokens": 100,
                  "within_budget": True, "error": None, "lm_calls": 1} for i in range(4)]
    return rows


def test_comparisons_refer_to_the_default_else_the_earlier_default_of_the_committed_reports():
    from knapsack_dspy.bench.scoring.comparisons import EARLIER_DEFAULT, compare_selectors
    from knapsack_dspy.bench.scoring.run_metrics import aggregate

    right = {"priced_case_coverage": {0, 1, 2}, "kate_within_budget": {0}, "seer": {0, 1}}
    for selectors, reference in ((["seer", "kate_within_budget", "priced_case_coverage"], "priced_case_coverage"),
                                 (["seer", "kate_within_budget"], EARLIER_DEFAULT),
                                 (["seer", "case_coverage"], "seer")):  # neither: the suite's first run
        rows = _rows(selectors, {**right, "case_coverage": {1}})
        compared = compare_selectors(rows, aggregate(rows, {}))
        assert compared and {entry["run_a"] for entry in compared} == {f"run-{reference}"}
        assert len(compared) == len(selectors) - 1
