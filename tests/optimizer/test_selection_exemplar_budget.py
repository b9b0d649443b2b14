"""The exemplar budget (SEER's L) beside the whole-prompt budget: what a query's exemplars may take, the settings'
checks and JSON, saved programs, suites, ``kdspy compile``, rows and the report, the Figures 7-8 plots."""

import json

import pytest
from helpers import HashingEmbedder, WordCounter
from test_select_exemplars import compile_tiny, load_tiny, make_examples

from knapsack_dspy.bench.execution.runner import run_suite
from knapsack_dspy.bench.reporting.plots import draw_plot
from knapsack_dspy.bench.reporting.report_tables import report_tables
from knapsack_dspy.bench.results.store import load_rows
from knapsack_dspy.bench.scoring.run_metrics import aggregate
from knapsack_dspy.bench.suites.suite import RunSpec, SuiteError, suite_from_dict
from knapsack_dspy.selection import SelectionConfig, SelectionConfigError


@pytest.fixture(scope="module")
def embedder():
    return HashingEmbedder()


@pytest.fixture(scope="module")
def counter():
    return WordCounter()


def test_the_setting_is_checked_and_round_trips():
    assert SelectionConfig().exemplar_budget is None
    config = SelectionConfig(budget=2048, exemplar_budget=1024)
    assert config.exemplar_capacity(1500) == 1024 and config.exemplar_capacity(700) == 700
    assert SelectionConfig().exemplar_capacity(1500) == 1500
    assert SelectionConfig(exemplar_budget=1024).exemplar_capacity(3000) == 1024  # budget None: the context's
    for bad in (0, -3, 1024.5, True, "1024"):
        with pytest.raises(SelectionConfigError, match="exemplar_budget must be a positive number of tokens"):
            SelectionConfig(exemplar_budget=bad)
    with pytest.raises(SelectionConfigError, match=r"exemplar_budget \(3000\) is larger than the whole prompt's"):
        SelectionConfig(budget=2048, exemplar_budget=3000)
    assert SelectionConfig.from_dict(json.loads(json.dumps(config.to_dict()))) == config
    old = config.to_dict()
    del old["exemplar_budget"]  # a program saved before the setting existed
    assert SelectionConfig.from_dict(old).exemplar_budget is None


def test_the_exemplars_stay_within_their_budget_and_the_prompt_within_its(embedder, counter):
    pool = make_examples(60)
    plain = compile_tiny(embedder, counter, pool, budget=1500, selector="seer")
    bound = compile_tiny(embedder, counter, pool, budget=1500, selector="seer", exemplar_budget=150)
    kate = compile_tiny(embedder, counter, pool, budget=1500, selector="kate", exemplar_budget=150)
    binding = 0
    for query in make_examples(12, seed=4, prefix="q"):
        free = plain.answer.selection(base_tokens=100, question=query.question).selection
        out = bound.answer.selection(base_tokens=100, question=query.question).selection
        assert out["capacity"] == min(1500 - 100 - 50, 150) and out["exemplar_budget"] == 150
        assert out["total_cost"] <= 150 and out["within_budget"]
        binding += free["total_cost"] > 150
        # near the whole budget, the whole prompt's room is what binds
        tight = bound.answer.selection(base_tokens=1400, question=query.question).selection
        assert tight["capacity"] == 1500 - 1400 - 50 and tight["total_cost"] <= 50
        # kate ignores budgets: within_budget says whether its exemplars fit theirs
        top = kate.answer.selection(base_tokens=100, question=query.question).selection
        assert top["within_budget"] == (top["total_cost"] <= 150)
    assert binding  # the exemplar budget changed some selections


def test_a_saved_program_keeps_its_exemplar_budget(tmp_path, embedder, counter):
    program = compile_tiny(embedder, counter, make_examples(40), budget=1500, exemplar_budget=120)
    path = tmp_path / "prog.json"
    program.save(str(path))
    assert json.loads(path.read_text())["answer"]["selection"]["config"]["exemplar_budget"] == 120
    fresh = load_tiny(path, embedder, counter)
    assert fresh.answer.selection.config.exemplar_budget == 120
    query = make_examples(1, seed=8, prefix="q")[0]
    assert fresh.answer.selection(base_tokens=0, question=query.question).selection["capacity"] == 120


def test_suites_set_it_and_check_it():
    run = suite_from_dict({"budget": 4096, "exemplar_budget": 1024}).runs[0]
    assert run.selection_config().exemplar_budget == 1024
    assert RunSpec().key == suite_from_dict({}).runs[0].key  # runs without one keep their keys
    assert run.key != suite_from_dict({"budget": 4096}).runs[0].key
    with pytest.raises(SuiteError) as error:
        suite_from_dict({"runs": [{"budget": 2048, "exemplar_budget": 4096}, {"exemplar_budget": 0},
                                  {"selector": "dspy_knn", "exemplar_budget": 512}]})
    lines = str(error.value).splitlines()[1:]
    assert lines[0].strip().startswith("runs[0] exemplar_budget: exemplar_budget (4096) is larger")
    assert lines[1].strip().startswith("runs[1] exemplar_budget: exemplar_budget must be a positive")
    assert lines[2].strip().startswith("runs[2] exemplar_budget: dspy_knn (a DSPy optimizer)")


def test_rows_report_and_plots_show_the_exemplar_budget(tmp_path, embedder, counter, monkeypatch):
    from knapsack_dspy.bench.programs import run_program
    pool, questions = make_examples(60), make_examples(8, seed=2, prefix="q")
    monkeypatch.setattr(run_program, "load_split", lambda spec, which, data_dir: pool if which == "pool" else questions)
    monkeypatch.setattr(run_program, "_student", lambda spec, embedder=None, token_counter=None: _tiny_student(spec))
    suite = suite_from_dict({"name": "fig8", "selector": ["seer", "kate"], "max_exemplars": [1, 3],
                             "budget": 1500, "reserve_output_tokens": 50, "attributes": [],
                             "runs": [{"exemplar_budget": 100}, {"exemplar_budget": 200}]})
    metrics = run_suite(suite, tmp_path, embedder=embedder, token_counter_factory=lambda model: counter,
                        selection_only=True, progress=False, log=lambda message: None)
    rows = load_rows(tmp_path)
    assert len(rows) == 8 * 8 and all(isinstance(r["exemplar_tokens"], int) for r in rows)
    for row in rows:
        assert row["within_budget"] == (row["exemplar_tokens"] <= row["spec"]["exemplar_budget"])
        if row["spec"]["selector"] == "seer":
            assert row["within_budget"]
    assert any(not r["within_budget"] for r in rows if r["spec"]["selector"] == "kate")
    tables = report_tables(aggregate(rows))
    titles = {t.setting for t in tables if t.setting}
    assert any("exemplars ≤ 100" in title for title in titles) and any("exemplars ≤ 200" in t for t in titles)
    assert any("exemplar tokens" in t.header for t in tables)
    assert all(m.get("mean_exemplar_tokens") is not None for m in metrics.values())
    figure = draw_plot("within_budget_vs_M.png", aggregate(rows))
    titles = sorted(ax.get_title() for ax in figure.axes)
    assert titles == ["exemplars ≤ 100 (prompt ≤ 1500) tokens", "exemplars ≤ 200 (prompt ≤ 1500) tokens"]
    assert "exemplars within theirs" in figure.axes[0].get_ylabel()


def _tiny_student(spec):
    """The bench's student for the tiny examples: a DocumentQA-like pipeline is not needed, TinyQA with the run's
    selection settings and the hooks the runner calls."""
    from test_select_exemplars import TinyQA

    class Student(TinyQA):
        token_counter = WordCounter()

        def selection_config(self, predictor_name):
            return spec.selection_config().with_settings(embed_fields=("question",))

        def example_inputs(self, example):
            return {"question": example.question, "context": example.context, "id": example.id,
                    "doc_id": example.doc_id}

        def select_for(self, example):
            return self.answer.select_demos(question=example.question, context=example.context).info

        @property
        def select(self):
            return self.answer.selection

    return Student()
