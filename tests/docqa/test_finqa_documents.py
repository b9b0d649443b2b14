"""FinQA with documents end to end: evidence found from gold programs, splits by page, demos cut to their evidence,
FinQA-DSL and Python program of thought through the bench (DummyLM), official scoring, case-based pools."""

import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest
from dspy.utils import DummyLM
from helpers import HashingEmbedder, WordCounter

from knapsack_dspy.bench.execution.runner import run_suite
from knapsack_dspy.bench.programs.run_program import without_eval_questions
from knapsack_dspy.bench.reporting.rescoring import rescore_row
from knapsack_dspy.bench.results.store import load_rows
from knapsack_dspy.bench.scoring.example_scores import score_prediction
from knapsack_dspy.bench.suites.suite import suite_from_dict
from knapsack_dspy.docqa.data import load_examples
from knapsack_dspy.docqa.data.document_parts import document_part
from knapsack_dspy.docqa.data.gold_programs import synthesise_python_program
from knapsack_dspy.docqa.data.program_evidence import demo_evidence, program_evidence, program_reads_shown
from knapsack_dspy.docqa.pipelines.hybrid_retriever import HybridRetriever
from knapsack_dspy.docqa.sandbox import execute_program
from knapsack_dspy.docqa.sandbox.cell_numbers import TEXT, parse_cell
from knapsack_dspy.docqa.tasks import build_pipeline

FIXTURE = Path(__file__).parents[1] / "fixtures" / "finqa_docs_small.json"
CASES = Path(__file__).parents[1] / "fixtures" / "data_finqa_cases_small.csv"


@pytest.fixture(scope="module")
def records():
    return list(load_examples("finqa", path=FIXTURE))


def test_records_without_gold_inds_get_the_evidence_their_program_reads(records):
    by_id = {ex.id: ex for ex in records}
    expected = {"AAA/2018/page_10.pdf-1": (["table_1"], "table"),    # 1200, 1000: the revenue row
                "AAA/2018/page_10.pdf-2": (["table_2"], "table"),    # -450 / -400 written "-450 ( 450 )"
                "BBB/2019/page_22.pdf-1": (["text_2"], "text"),      # 2.5 and 40 in one sentence
                "CCC/2016/page_5.pdf-1": (["table_1"], "table"),     # table_average(net sales, none)
                "DDD/2017/page_40.pdf-1": (["table_1", "text_1"], "hybrid"),
                "EEE/2015/page_3.pdf-1": (["table_1"], "table")}     # const_1000 is no evidence
    for record_id, (evidence, modality) in expected.items():
        example = by_id[record_id]
        assert example.extra["program_evidence"] == evidence, record_id
        assert example.modality == modality and example.gold_evidence == []
    assert program_evidence("not a program", [], []) == []
    # gold_inds, when given, are the evidence (and the program's are not computed)
    official = list(load_examples("finqa", path=Path(__file__).parents[1] / "fixtures" / "finqa_small.json"))
    assert all(ex.gold_evidence and "program_evidence" not in ex.extra for ex in official)


def test_what_a_program_reads_is_counted_in_the_context_a_prompt_shows():
    table = [["", "2018", "2017"], ["revenue", "$ 1200", "$ 1000"], ["net sales", "5%", "7%"]]
    paragraphs = ["Costs were 2.5 million in 2018.", "Headcount rose by 40."]
    program = "subtract(1200, 1000), divide(#0, const_1000), add(2.5, 40), table_average(net sales, none)"
    assert program_reads_shown(program, table, paragraphs) == (5, 5)  # four numbers and one row; #0 / const_ not
    assert program_reads_shown(program, table[:2], paragraphs[:1]) == (3, 5)  # 40 and the net sales row dropped
    assert program_reads_shown(program, [table[0]], []) == (0, 5)  # a header holds no fact
    assert program_reads_shown("divide(5%, 2)", [["", "a"], ["x", "0.05"]], []) == (1, 2)  # 5% read as 0.05
    assert program_reads_shown("not a program", table, paragraphs) is None


def test_finqa_cells_with_their_spelling_in_parentheses_are_numbers():
    assert parse_cell("-29.6 ( 29.6 )") == -29.6
    assert parse_cell("$ -96.1 ( 96.1 )") == -96.1
    assert parse_cell("9.9% ( 9.9 % )") == 9.9
    assert parse_cell("2.5 ( 3.5 )") is TEXT  # another number in parentheses: not a spelling
    assert parse_cell("revenue ( 12 )") is TEXT


def test_python_gold_programs_of_the_documents_verify_strictly(records):
    for example in records:
        gold = synthesise_python_program(example)
        assert gold.verified, (example.id, gold.reason)
        result = execute_program(gold.code, example.table)
        assert result.ok and result.answer == pytest.approx(example.answer) if example.answer_type != "yes-no" \
            else result.answer == example.answer
    # the second 1000 of subtract(1200, 1000), divide(#0, 1000) is the 2017 revenue, not a "/ 1000" constant
    assert synthesise_python_program(records[0]).code.endswith("ans = step_0 / table_query_1")
    assert 'table["cost of sales", "2018"]' in synthesise_python_program(records[1]).code


def test_train_docs_parts_split_by_page(tmp_path, records):
    folder = tmp_path / "finqa"
    folder.mkdir()
    shutil.copy(FIXTURE, folder / "train_docs.json")
    pool = load_examples("finqa", split="train_docs_pool", data_dir=tmp_path)
    evalset = load_examples("finqa", split="train_docs_eval", data_dir=tmp_path)
    assert sorted(ex.id for ex in [*pool, *evalset]) == sorted(ex.id for ex in records)
    assert not {ex.doc_id for ex in pool} & {ex.doc_id for ex in evalset}
    assert all(document_part(ex.doc_id) == "eval" for ex in evalset)
    assert {ex.doc_id for ex in evalset} and {ex.doc_id for ex in pool}  # the fixture's pages fall on both sides


def test_a_document_demo_is_cut_to_its_evidence(records):
    retriever = HybridRetriever(top_n_paragraphs=2, embedder=HashingEmbedder())
    example = records[4]  # DDD: the total-debt row and the sentence with 200
    rows, sentences = demo_evidence(example)
    assert (rows, sentences) == ([1], [1])
    row_ids, paragraph_ids = retriever.evidence_context(example.question, example.table, example.paragraphs,
                                                        rows, sentences)
    assert row_ids == [0, 1]  # the header and the evidence row
    assert 1 in paragraph_ids and len(paragraph_ids) == 2  # the evidence sentence + the most similar other one
    # a text-only program shows no table; evidence beyond top_n is all kept
    assert retriever.evidence_context("q", example.table, example.paragraphs, [], [0, 2, 3])[0] == []
    assert retriever.evidence_context("q", example.table, example.paragraphs, [], [0, 2, 3])[1] == [0, 2, 3]
    assert demo_evidence({"dataset": "tatqa", "program": ""}) is None


@pytest.mark.parametrize("pipeline", ["finqa_pot", "python_pot"])
def test_pipeline_demos_show_the_evidence_and_queries_the_retrieved_document(records, pipeline):
    program = build_pipeline("finqa", pipeline, embedder=HashingEmbedder(), token_counter=WordCounter(),
                             selector="kate", max_exemplars=2, attributes=(), top_n_paragraphs=2)
    demo = program.render_demo(records[2])  # BBB: the answer is in one sentence
    assert demo["table"] == ""  # the program reads no cell
    assert "2.5 million shares" in demo["text"] and len(demo["text"].splitlines()) == 2
    query = program.prompt_inputs(records[2])
    assert "dividends declared per share" in query["table"]  # a query shows its table
    if pipeline == "python_pot":
        assert demo["program"].endswith("ans = text_variable_0 * text_variable_1")
    else:
        assert demo["program"] == "multiply(2.5, 40)"


def test_scoring_python_and_dsl_programs_the_official_way(records):
    example = records[0]
    python = score_prediction(example, SimpleNamespace(answer=0.2, scale="", program="ans = 0.2", language="python"))
    assert python["correct"] and python["program_correct"] is None
    dsl = score_prediction(example, SimpleNamespace(answer=0.2, scale="", program=example.program, language="finqa"))
    assert dsl["correct"] and dsl["program_correct"]
    assert not score_prediction(example, SimpleNamespace(answer=20.0, scale="", program="ans = 20.0",
                                                         language="python"))["correct"]  # 20 % is 0.2 in FinQA
    row = {"run": "r", "example_id": example.id, "answer": 0.2, "output": "ans = 0.2",
           "spec": {"pipeline": "python_pot"}}
    assert rescore_row(row, example)["correct"] and rescore_row(row, example)["program_correct"] is None


def _oracle_lm(records):
    def factory(spec):
        if spec.pipeline == "python_pot":
            answers = {ex.question: {"program": synthesise_python_program(ex).code} for ex in records}
        else:
            answers = {ex.question: {"program": ex.program} for ex in records}
        return DummyLM(answers)
    return factory


def test_bench_answers_finqa_documents_with_dsl_and_python_programs(tmp_path, records, monkeypatch):
    from knapsack_dspy.bench.programs import run_program
    pool = [ex for ex in records if document_part(ex.doc_id) == "pool"]
    evalset = [ex for ex in records if document_part(ex.doc_id) == "eval"]
    monkeypatch.setattr(run_program, "load_split", lambda spec, which, data_dir: pool if which == "pool" else evalset)
    suite = suite_from_dict({"name": "t", "dataset": "finqa", "pipeline": ["finqa_pot", "python_pot"],
                             "selector": "kate", "budget": 3000, "max_exemplars": 2, "attributes": [],
                             "model": "openai/dummy"})
    run_suite(suite, tmp_path, embedder=HashingEmbedder(), token_counter_factory=lambda model: WordCounter(),
              lm_factory=_oracle_lm(records), progress=False, log=lambda msg: None)
    rows = load_rows(tmp_path)
    assert len(rows) == 2 * len(evalset)
    assert all(r["correct"] for r in rows), [(r["example_id"], r["answer"], r["gold"], r["error"]) for r in rows]
    by_pipeline = {r["spec"]["pipeline"]: r for r in rows}
    assert by_pipeline["finqa_pot"]["program_correct"] is True
    assert by_pipeline["python_pot"]["program_correct"] is None
    pool_ids = {ex.id for ex in pool}
    assert all(set(r["exemplar_ids"]) <= pool_ids and r["exemplar_ids"] for r in rows)


def test_a_case_pool_leaves_out_the_questions_asked(tmp_path, records, monkeypatch):
    from knapsack_dspy.bench.programs import run_program
    cases = list(load_examples("finqa_cases", path=CASES, split="train"))
    asked = records[:2]
    copy = cases[0].copy(id="finqa-train-asked", question=asked[0].question.upper() + "  ")  # other id and spelling
    pool = [copy, *cases]
    assert without_eval_questions(pool, asked) == cases
    monkeypatch.setattr(run_program, "load_split", lambda spec, which, data_dir: pool if which == "pool" else asked)
    logged = []
    suite = suite_from_dict({"name": "t", "dataset": "finqa", "pool_dataset": "finqa_cases", "pipeline": "finqa_pot",
                             "selector": "kate", "budget": 3000, "max_exemplars": 2, "attributes": []})
    run_suite(suite, tmp_path, embedder=HashingEmbedder(), token_counter_factory=lambda model: WordCounter(),
              progress=False, log=logged.append, selection_only=True)
    assert "pool finqa_cases: 1 examples ask an eval question and are left out" in logged
    rows = load_rows(tmp_path)
    assert rows and all(copy.id not in r["exemplar_ids"] and r["exemplar_ids"] for r in rows)


def test_pool_dataset_leaves_existing_run_keys_alone():
    plain = suite_from_dict({"selector": "seer"}).runs[0]
    assert suite_from_dict({"selector": "seer", "pool_dataset": ""}).runs[0].key == plain.key
    assert suite_from_dict({"selector": "seer", "pool_dataset": "finqa_cases"}).runs[0].key != plain.key


def test_the_finqa_docs_suite_splits_pool_and_questions_by_page():
    from knapsack_dspy.bench.suites.suite import load_suite

    suite = load_suite(Path(__file__).resolve().parents[2] / "benchmarks" / "finqa_docs.toml")
    assert {(r.pool_dataset, r.pool_split, r.eval_split) for r in suite.runs} == {
        ("", "train_docs_pool", "train_docs_eval"), ("finqa_cases", "train", "train_docs_eval")}
    assert {r.pipeline for r in suite.runs} == {"finqa_pot", "python_pot"}
