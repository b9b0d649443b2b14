"""Bad input: DataError names the file, record, id and field; skip_invalid skips and reports instead."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

import knapsack_dspy  # noqa: F401
from knapsack_dspy.docqa.data import DataError, DataWarning, load_examples
from knapsack_dspy.docqa.data.example_fields import blank_fields, validate_fields

FIXTURES = Path(__file__).parents[1] / "fixtures"
TATQA_BROKEN = FIXTURES / "data_tatqa_broken.json"
FINQA_BROKEN = FIXTURES / "data_finqa_broken.json"
CASES_BROKEN = FIXTURES / "data_finqa_cases_broken.csv"


def test_tatqa_first_bad_context_raises_with_its_location():
    with pytest.raises(DataError) as info:
        load_examples("tatqa", path=TATQA_BROKEN)
    error = info.value
    assert (error.source, error.index, error.field, error.problem) == (str(TATQA_BROKEN), 1, "table.uid", "missing")
    assert str(error) == f"{TATQA_BROKEN}: record 1: field 'table.uid': missing"


def test_tatqa_skip_invalid_keeps_the_good_questions_and_reports_the_rest():
    with pytest.warns(DataWarning, match=r"loaded 2 examples from 5 records; skipped 6 invalid record\(s\) "
                                         r"\(7 questions lost\)"):
        examples = load_examples("tatqa", path=TATQA_BROKEN, skip_invalid=True)
    assert [ex.id for ex in examples] == ["good-0", "good-2"]
    skipped = [(s.index, s.record_id, s.field, s.questions_lost) for s in examples.report.skipped]
    assert skipped == [
        (1, None, "table.uid", 2),  # a bad context loses all its questions
        (2, "bad-type", "questions[1].answer_type", 1),  # a bad question loses only itself
        (2, "bad-rel", "questions[2].rel_paragraphs", 1),
        (2, "good-0", "id", 1),  # duplicate question id
        (3, "ctx-3", "table.table", 1),  # empty table: TAT-QA questions need one
        (4, "ctx-4", "paragraphs[0].text", 1),
    ]
    messages = [s.message for s in examples.report.skipped]
    assert "got 'ratio'" in messages[1] and "orders [1]" in messages[2]
    assert "duplicate id (first seen in record 0)" in messages[3]
    assert examples.report.n_skipped == 7


def test_finqa_broken_records():
    with pytest.raises(DataError, match=r"data_finqa_broken\.json: record 1 \(id 'TST/2019/page_1\.pdf-1'\): "
                                        r"field 'qa\.program': missing$"):
        load_examples("finqa", path=FINQA_BROKEN)
    with pytest.warns(DataWarning):
        examples = load_examples("finqa", path=FINQA_BROKEN, skip_invalid=True)
    assert [ex.id for ex in examples] == ["TST/2019/page_0.pdf-1", "TST/2019/page_9.pdf-1"]
    found = {s.index: (s.field, s.problem) for s in examples.report.skipped}
    assert set(found) == {1, 2, 3, 4, 5, 6, 7, 8}
    assert found[2] == ("pre_text", "expected a list of strings, got str")
    assert found[3] == ("table", "empty table (a table is required)")
    assert found[4][0] == "qa.program" and "unknown operation 'modulo'" in found[4][1]
    assert found[5] == ("id", "duplicate id (first seen in record 0)")
    assert found[6][0] == "qa.gold_inds" and "'text_9'" in found[6][1]
    assert found[7] == ("qa.exe_ans", "expected a number or 'yes'/'no', got 'maybe'")
    assert found[8] == (None, "expected a FinQA record object, got list")


def test_finqa_cases_broken_rows():
    with pytest.warns(DataWarning):
        examples = load_examples("finqa_cases", split="train", path=CASES_BROKEN, skip_invalid=True)
    assert [ex.id for ex in examples] == ["finqa-train-0", "finqa-train-5"]
    messages = [s.message for s in examples.report.skipped]
    assert messages[0] == f"{CASES_BROKEN}: record 1: row has 4 fields, the header has 8 (line 3)"
    assert "record 2 (id 'finqa-train-2'): field 'answer'" in messages[1]
    assert "field 'program': invalid FinQA program 'add(40 80)'" in messages[2]
    assert "several modality flags set" in messages[3]


@pytest.mark.parametrize(("name", "content", "expected"), [
    ("truncated.json", b'[{"id": "a", "qa": ', r"truncated\.json: invalid JSON at line 1 column 20"),
    ("object.json", b'{"data": []}', r"expected a JSON array of records, got a JSON dict"),
    ("bad.json.gz", b"this is not gzip", r"bad\.json\.gz: not a valid gzip file"),
    ("latin1.json", '[{"id": "café"}]'.encode("latin-1"), r"latin1\.json: not UTF-8 text"),
    ("empty.csv", b"", r"empty CSV file \(no header row\)"),
    ("table.xlsx", b"", r"table\.xlsx: unsupported file type; expected one of \.json, \.json\.gz"),
])
def test_unreadable_files(tmp_path, name, content, expected):
    path = tmp_path / name
    path.write_bytes(content)
    with pytest.raises(DataError, match=expected):
        load_examples("finqa", path=path, skip_invalid=True)  # a broken file is not a skippable record


def test_missing_file_and_directory(tmp_path):
    with pytest.raises(DataError, match=r"nothing\.json: file not found"):
        load_examples("sara", path=tmp_path / "nothing.json")
    (tmp_path / "dir.json").mkdir()
    with pytest.raises(DataError, match=r"dir\.json: is a directory"):
        load_examples("sara", path=tmp_path / "dir.json")


def test_jsonl_bad_line_is_one_skippable_record(tmp_path):
    good = {"id": "tax_case_1", "text": "Alice earned $10.", "question": "How much tax?", "type": "numerical",
            "answer": "$0", "answer_value": 0}
    path = tmp_path / "cases.jsonl.gz"
    lines = [json.dumps(good), '{"id": "broken", ', json.dumps(good | {"id": "tax_case_2"})]
    path.write_bytes(gzip.compress("\n".join(lines).encode()))
    with pytest.raises(DataError, match=r"record 1: invalid JSON on line 2 column"):
        load_examples("sara", path=path)
    with pytest.warns(DataWarning, match="skipped 1 invalid"):
        examples = load_examples("sara", path=path, skip_invalid=True)
    assert [ex.id for ex in examples] == ["tax_case_1", "tax_case_2"]
    assert examples[0].answer_value == 0.0


@pytest.mark.parametrize(("change", "field", "problem"), [
    ({"type": "ruling"}, "type", "expected one of ['entailment', 'numerical'], got 'ruling'"),
    ({"label": "Maybe"}, "label", "expected one of ['Entailment', 'Contradiction'], got 'Maybe'"),
    ({"text": ""}, "text", "empty string"),
    ({"question": None}, "question", "missing"),
    ({"id": ["x"]}, "id", "expected a string id, got list"),
])
def test_sara_bad_cases(tmp_path, change, field, problem):
    case = {"id": "s2_a_pos", "text": "Alice's spouse died in 2017.", "question": "Section 2(a) applies.",
            "type": "entailment", "label": "Entailment"} | change
    path = tmp_path / "cases.json"
    path.write_text(json.dumps([case]))
    with pytest.raises(DataError) as info:
        load_examples("sara", path=path)
    assert (info.value.index, info.value.field, info.value.problem) == (0, field, problem)


def test_numerical_sara_case_needs_a_dollar_amount(tmp_path):
    case = {"id": "tax_case_9", "text": "facts", "question": "How much tax?", "type": "numerical", "answer": "unknown"}
    path = tmp_path / "cases.json"
    path.write_text(json.dumps([case]))
    with pytest.raises(DataError, match=r"record 0 \(id 'tax_case_9'\): field 'answer': no dollar amount"):
        load_examples("sara", path=path)


@pytest.mark.parametrize(("question_change", "field", "problem"), [
    ({"scale": "dozens"}, "questions[0].scale", "expected one of ['', 'thousand', 'million', 'billion', 'percent']"),
    ({"answer_from": "chart"}, "questions[0].answer_from", "expected one of ['table', 'text', 'table-text']"),
    ({"answer": ["a", "b"]}, "questions[0].answer", "a span answer must be one string"),
    ({"answer_type": "arithmetic", "answer": "lots"}, "questions[0].answer", "expected a number for a arithmetic"),
    ({"rel_paragraphs": "1"}, "questions[0].rel_paragraphs", "expected a list of paragraph orders, got str"),
    ({"derivation": None}, "questions[0].derivation", "missing"),
])
def test_tatqa_bad_question_fields(tmp_path, question_change, field, problem):
    question = {"uid": "q1", "question": "What?", "answer": ["x"], "derivation": "", "answer_type": "span",
                "answer_from": "table", "rel_paragraphs": [], "scale": ""} | question_change
    context = {"table": {"uid": "t1", "table": [["a", "b"]]}, "paragraphs": [], "questions": [question]}
    path = tmp_path / "ctx.json"
    path.write_text(json.dumps([context]))
    with pytest.raises(DataError) as info:
        load_examples("tatqa", path=path)
    assert info.value.index == 0 and info.value.record_id == "q1" and info.value.field == field
    assert info.value.problem.startswith(problem)


def test_tatqa_table_cells_must_be_text(tmp_path):
    context = {"table": {"uid": "t1", "table": [["a", {"b": 1}]]}, "paragraphs": [], "questions": []}
    path = tmp_path / "ctx.json"
    path.write_text(json.dumps([context]))
    with pytest.raises(DataError, match=r"record 0 \(id 't1'\): field 'table\.table': row 0 cell 1: "
                                        r"expected a string, got dict"):
        load_examples("tatqa", path=path)


def test_validate_fields_lists_every_problem():
    fields = blank_fields("tatqa") | {"id": "x"}
    validate_fields(fields)
    bad = fields | {"table": [["a", 1]], "num_steps": 2, "scale": "dozens", "answer_value": "1"}
    with pytest.raises(ValueError, match=r"table=.*; answer_value='1'; scale='dozens'; num_steps=2"):
        validate_fields(bad)
    with pytest.raises(ValueError, match=r"unknown fields \['label'\], missing \['extra'\]"):
        validate_fields({k: v for k, v in fields.items() if k != "extra"} | {"label": 1})


def test_tatqa_duplicate_paragraph_orders(tmp_path):
    context = {"table": {"uid": "t1", "table": [["a"]]}, "questions": [],
               "paragraphs": [{"uid": "p1", "order": 1, "text": "x"}, {"uid": "p2", "order": "1", "text": "y"}]}
    path = tmp_path / "ctx.json"
    path.write_text(json.dumps([context]))
    with pytest.raises(DataError, match=r"record 0 \(id 't1'\): field 'paragraphs\[1\]\.order': duplicate "
                                        r"paragraph order 1"):
        load_examples("tatqa", path=path)
