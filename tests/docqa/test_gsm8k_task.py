"""GSM8K as a task (``docqa/tasks/gsm8k.py``): its records, its pool / tuning split, DSPy's tutorial metric, and a
plain DSPy program (``ProgramQA``) compiled by ``KnapsackFewShot`` and by DSPy's optimizers in the bench, answered by
``DummyLM``."""

import gzip
import json
import re
from pathlib import Path

import dspy
import pytest
from dspy.utils import DummyLM
from helpers import DATA, HashingEmbedder, WordCounter, needs_gsm8k

from knapsack_dspy.bench.execution.runner import run_suite
from knapsack_dspy.bench.results.store import load_rows
from knapsack_dspy.bench.suites.suite import SuiteError, suite_from_dict
from knapsack_dspy.docqa.data import load_examples
from knapsack_dspy.docqa.data.document_parts import document_part
from knapsack_dspy.docqa.data.errors import DataError
from knapsack_dspy.docqa.data.gsm8k import (
    normalised_question,
    parse_gsm8k_record,
    readable_solution,
    solution_operators,
)
from knapsack_dspy.docqa.metrics.gsm8k import answer_integer, score_gsm8k_answer
from knapsack_dspy.docqa.pipelines.pipeline import load_program, save_program
from knapsack_dspy.docqa.pipelines.program_qa import ProgramQA, ProgramSpecError, make_program
from knapsack_dspy.docqa.tasks import TASKS, build_pipeline
from knapsack_dspy.docqa.tasks.gsm8k import operation_kind
from knapsack_dspy.teleprompt.knapsack_few_shot import KnapsackFewShot

ROOT = Path(__file__).resolve().parents[2]
NATALIA = {"question": "Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in "
                       "May. How many clips did Natalia sell altogether in April and May?",
           "answer": "Natalia sold 48/2 = <<48/2=24>>24 clips in May.\nNatalia sold 48+24 = <<48+24=72>>72 clips "
                     "altogether in April and May.\n#### 72"}


def make_cot_program():
    """A factory a suite names by its dotted path (``test_gsm8k_task:make_cot_program``)."""
    return dspy.ChainOfThought("question -> answer")


def test_a_record_becomes_an_example_with_a_readable_solution():
    fields = parse_gsm8k_record(NATALIA)[0]
    assert fields["answer"] == "72" and fields["answer_value"] == 72.0
    assert fields["derivation"] == ("Natalia sold 48/2 = 24 clips in May.\n"
                                    "Natalia sold 48+24 = 72 clips altogether in April and May.")
    assert fields["operators"] == ["divide", "add"] and fields["num_steps"] == 2
    assert fields["extra"]["solution"] == NATALIA["answer"] and fields["dataset"] == "gsm8k"
    assert fields["id"].startswith("gsm8k-") and fields["doc_id"].startswith("q-")
    # the same question up to case and spacing is the same document (the split's unit)
    again = parse_gsm8k_record({**NATALIA, "question": "  " + NATALIA["question"].upper()})[0]
    assert again["doc_id"] == fields["doc_id"]
    assert normalised_question("A  b\nC") == "a b c"


def test_annotations_are_read_and_removed():
    # the text states the result (with thousands commas): the annotation goes
    assert readable_solution("He makes 22500*20=$<<22500*20=450000>>450,000\n#### 450,000") == \
        "He makes 22500*20=$450,000"
    # a result the text does not state is spelled out
    assert readable_solution("So <<3*4=12>> pens.\n#### 12") == "So 3*4 = 12 pens."
    assert solution_operators("<<100-50-30-15=5>> <<-2*3=-6>> <<5*-3=-15>>") == [
        "subtract", "subtract", "subtract", "multiply", "multiply"]
    assert parse_gsm8k_record({"question": "q?", "answer": "x\n#### 1,080"})[0]["answer"] == "1080"
    with pytest.raises(DataError, match="no '#### <answer>' line"):
        parse_gsm8k_record({"question": "q?", "answer": "no final line"})
    assert operation_kind(dspy.Example(operators=["divide", "add", "add"])) == "add+divide"


@pytest.mark.parametrize(("answer", "gold", "right"), [
    ("72", "72", True), ("$1,080", "1080", True), ("18 kg", "18", True), ("72.0", "72", True),
    ("The answer is 5.", "5", True), ("5\nbecause 6", "5", True), ("6\n5", "5", False), ("73", "72", False),
    ("3.75", "3", True),  # DSPy's rule keeps the integer part
    ("-5", "5", True),  # and drops signs
    ("", "0", False), (None, "0", False), ("none", "0", False),  # no number is wrong (DSPy's reads it as 0)
])
def test_the_metric_reads_the_final_number_as_dspys_tutorials_do(answer, gold, right):
    assert score_gsm8k_answer(answer, gold) is right


def test_answer_integer():
    assert answer_integer("It costs $1,234.50 in total") == 1234
    assert answer_integer("no digits") is None


def _records(n: int) -> list[dict]:
    out = []
    for k in range(n):
        a, b = 3 + k, 2 + k % 5
        if k % 2:
            question = f"Tom has {a} boxes of {b} apples. How many apples does he have?"
            answer = f"He has {a}*{b} = <<{a}*{b}={a * b}>>{a * b} apples.\n#### {a * b}"
        else:
            question = f"Ann had {a} coins and found {b} more. How many coins does she have?"
            answer = f"She has {a}+{b} = <<{a}+{b}={a + b}>>{a + b} coins.\n#### {a + b}"
        out.append({"question": question, "answer": answer})
    return out


@pytest.fixture
def gsm8k_data(tmp_path, monkeypatch):
    data = tmp_path / "data"
    (data / "gsm8k").mkdir(parents=True)
    with gzip.open(data / "gsm8k" / "train.jsonl.gz", "wt") as fh:
        fh.write("\n".join(json.dumps(r) for r in _records(60)) + "\n")
    monkeypatch.setenv("KDSPY_DATA_DIR", str(data))
    monkeypatch.setenv("KDSPY_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    return data


def test_pool_and_tuning_parts_split_by_the_stated_hash_rule(gsm8k_data):
    pool, tune = load_examples("gsm8k", "pool"), load_examples("gsm8k", "tune")
    whole = load_examples("gsm8k", "train")
    assert len(pool) + len(tune) == len(whole) == 60 and pool and tune
    assert not {normalised_question(e.question) for e in pool} & {normalised_question(e.question) for e in tune}
    assert all(document_part(e.doc_id) == "eval" for e in tune)
    assert all(document_part(e.doc_id) == "pool" for e in pool)
    assert TASKS["gsm8k"].compile_splits == ("pool", "tune")


@needs_gsm8k
def test_the_shared_train_split_cuts_into_the_documented_parts():
    pool, tune = load_examples("gsm8k", "pool", data_dir=DATA), load_examples("gsm8k", "tune", data_dir=DATA)
    assert (len(pool), len(tune)) == (5278, 2195)  # docs/gsm8k.md, docqa/data/gsm8k.py


def test_program_specs():
    assert isinstance(make_program("cot:question -> answer"), dspy.ChainOfThought)
    assert isinstance(make_program("predict:question -> answer"), dspy.Predict)
    assert isinstance(make_program("test_gsm8k_task:make_cot_program"), dspy.ChainOfThought)
    for bad, message in (("cot:question", "not a DSPy signature"), ("no_such_module_x:f", "cannot import"),
                         ("test_gsm8k_task:NATALIA", "is not a dspy.Module"), ("plain", "a program is named")):
        with pytest.raises(ProgramSpecError, match=message):
            make_program(bad)


def _suite(**over):
    raw = {"name": "gsm", "dataset": "gsm8k", "pool_split": "pool", "eval_split": "tune", "pipeline": "cot",
           "selector": ["case_coverage", "dspy_knn", "dspy_labeled", "no_demos"], "budget": 800,
           "max_exemplars": 2, "model": "openai/dummy", "limit": 4, "order_seed": 1}
    raw.update(over)
    return suite_from_dict(raw)


def _bench(out, suite, answer="12"):
    return run_suite(suite, out, embedder=HashingEmbedder(), token_counter_factory=lambda m: WordCounter(),
                     lm_factory=lambda spec: DummyLM([{"reasoning": "I add.", "answer": answer}] * 100),
                     progress=False, log=lambda msg: None)


def test_a_plain_program_runs_in_the_bench_under_our_selectors_and_dspys(gsm8k_data, tmp_path):
    _bench(tmp_path / "sel", _suite(selection_only=True))
    rows = load_rows(tmp_path / "sel")
    by = {}
    for row in rows:
        by.setdefault(row["spec"]["selector"], []).append(row)
    assert set(by) == {"case_coverage", "dspy_knn", "dspy_labeled", "no_demos"}
    assert all(len(r) == 4 for r in by.values())
    for name in ("case_coverage", "dspy_knn", "dspy_labeled"):
        assert all(len(r["exemplar_ids"]) == 2 and r["prompt_tokens"] > 0 for r in by[name]), name
    assert all(r["within_budget"] for r in by["case_coverage"])
    assert all(r["exemplar_ids"] == [] for r in by["no_demos"])
    pool_ids = {e.id for e in load_examples("gsm8k", "pool")}
    assert all(set(r["exemplar_ids"]) <= pool_ids for r in rows)

    _bench(tmp_path / "lm", _suite())
    rows = load_rows(tmp_path / "lm")
    assert len(rows) == 16 and not any(r.get("error") for r in rows)
    tune = {e.id: e for e in load_examples("gsm8k", "tune")}
    for row in rows:
        assert row["correct"] == (tune[row["example_id"]].answer == "12")
        assert row["output"] == "I add." and row["lm_calls"] is not None
    assert "case_coverage" in (tmp_path / "lm" / "report.md").read_text()


def test_a_suite_names_any_program(gsm8k_data, tmp_path):
    suite = _suite(pipeline=["cot:question -> answer", "test_gsm8k_task:make_cot_program"],
                   selector="kate_within_budget", selection_only=True)
    assert len(suite.runs) == 2
    _bench(tmp_path / "any", suite)
    rows = load_rows(tmp_path / "any")
    assert len(rows) == 8 and all(len(r["exemplar_ids"]) == 2 for r in rows)
    with pytest.raises(SuiteError, match="not a DSPy signature"):
        _suite(pipeline="cot:question")
    with pytest.raises(SuiteError, match="unknown pipeline 'pot' for gsm8k"):
        _suite(pipeline="pot")


def test_a_compiled_program_saves_and_loads_with_its_derived_kinds(gsm8k_data, tmp_path):
    pool, tune = load_examples("gsm8k", "pool"), load_examples("gsm8k", "tune")
    student = build_pipeline("gsm8k", "cot", embedder=HashingEmbedder(), token_counter=WordCounter(),
                             selector="case_coverage", max_exemplars=2, budget=800)
    assert isinstance(student, ProgramQA)
    program = KnapsackFewShot(progress=False, token_counter=WordCounter()).compile(student, trainset=pool,
                                                                                 valset=tune[:4])
    report = program.compile_report["predictors"]["program.predict"]
    assert report["kinds"].startswith("derived (2 kinds from reasoning, answer)")
    demo = program.select.demos[0]
    assert set(demo) == {"question", "reasoning", "answer"} and "<<" not in demo["reasoning"]
    path = save_program(program, tmp_path / "p.json")
    again = load_program(path, embedder=HashingEmbedder(), token_counter=WordCounter())
    assert isinstance(again, ProgramQA) and again.select.pool_attributes["kind"] == \
        program.select.pool_attributes["kind"]
    assert [again.select_for(e)["ids"] for e in tune[:4]] == [program.select_for(e)["ids"] for e in tune[:4]]


def readme_tutorial() -> str:
    """The Python block of the README's GSM8K tutorial."""
    section = (ROOT / "README.md").read_text().split("## Tutorial: GSM8K", 1)[1]
    return re.search(r"```python\n(.*?)```", section, re.DOTALL).group(1)


def test_the_readme_tutorial_runs_as_written_with_a_stand_in_lm(gsm8k_data, monkeypatch, capsys):
    from dspy.datasets.gsm8k import gsm8k_metric

    from knapsack_dspy.teleprompt import knapsack_few_shot

    code = readme_tutorial()
    assert 'dspy.ChainOfThought("question -> answer")' in code and "KnapsackFewShot(" in code
    lm = DummyLM([{"reasoning": "She has 3+2 = 5 coins.", "answer": "5"}] * 40)
    monkeypatch.setattr(dspy, "LM", lambda *args, **kwargs: lm)
    monkeypatch.setattr(knapsack_few_shot, "TextEmbedder", HashingEmbedder)
    previous, namespace = dspy.settings.lm, {}
    try:
        exec(compile(code, "README.md", "exec"), namespace)
    finally:
        dspy.configure(lm=previous)
    program, devset, trainset = namespace["program"], namespace["devset"], namespace["trainset"]
    assert len(devset) == 3 and len(trainset) == len(load_examples("gsm8k", "pool"))
    assert all(e.reasoning and "<<" not in e.reasoning for e in trainset)  # worked solutions, readable
    # the kinds came from the pool itself, not the similarity-only fallback
    assert program.compile_report["predictors"]["predict"]["kinds"].startswith("derived")
    calls = lm.history[-len(devset):]
    assert len(lm.history) == len(devset)  # compiling asked no LM: one call per question
    for call in calls:
        demos = sum(m["role"] == "assistant" for m in call["messages"])
        assert 1 <= demos <= 8
    # the printed score is DSPy's metric over the devset's questions, answered "5"
    expected = 100 * sum(gsm8k_metric(e, dspy.Prediction(answer="5")) for e in devset) / len(devset)
    assert abs(float(capsys.readouterr().out.strip().splitlines()[-1]) - expected) < 0.01
