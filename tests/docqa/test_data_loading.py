"""Loading the hand-written fixtures (official schemas) into uniform dspy.Examples; sources and splits."""

from __future__ import annotations

import gzip
import json
import shutil
import warnings
from pathlib import Path

import pytest

import knapsack_dspy  # noqa: F401  (offline defaults before dspy / datasets)
from knapsack_dspy.docqa.data import FIELDS, DataError, load_examples, load_statutes
from knapsack_dspy.docqa.data.example_fields import validate_fields

FIXTURES = Path(__file__).parents[1] / "fixtures"
FINQA = FIXTURES / "finqa_small.json"
TATQA = FIXTURES / "data_tatqa_small.json"
SARA = FIXTURES / "data_sara_small.json"
CASES = FIXTURES / "data_finqa_cases_small.csv"


def by_id(examples) -> dict:
    return {ex.id: ex for ex in examples}


def test_tatqa_questions_become_uniform_examples():
    examples = load_examples("tatqa", path=TATQA)
    assert [ex.id for ex in examples] == ["q-a-1", "q-a-2", "q-a-3", "q-a-4", "q-b-1", "q-b-2"]
    for ex in examples:
        validate_fields(ex)
        assert set(ex.keys()) == set(FIELDS) and ex.dataset == "tatqa"
        assert set(ex.inputs().keys()) == {"question", "table", "paragraphs"}
        assert ex.program == ""
    ex = by_id(examples)
    # the context's table uid is the document id; rows exactly as written, header first
    assert ex["q-a-1"].doc_id == "7f3c2a10-0000-4000-8000-00000000a001"
    assert ex["q-a-1"].table[3] == ["Capital additions", "(7,227)", "(7,321)"]
    # paragraphs are sorted by "order" (the file lists order 2 first)
    assert ex["q-a-1"].paragraphs[0] == "Results of operations"
    assert ex["q-a-1"].paragraphs[1].startswith("Sales grew")
    # span -> the one string; multi-span -> list; arithmetic -> number as in the file; count -> as in the file
    assert ex["q-a-1"].answer == "1,204" and ex["q-a-1"].answer_value == 1204.0
    assert ex["q-a-2"].answer == ["North America", "Europe"] and ex["q-a-2"].answer_value is None
    assert ex["q-a-3"].answer == 9.47 and ex["q-a-3"].scale == "percent"
    assert ex["q-a-4"].answer == "2" and ex["q-a-4"].answer_value == 2.0
    assert ex["q-b-1"].answer == "(7,227)" and ex["q-b-1"].answer_value == -7227.0
    # answer_from -> modality; rel_paragraphs (1-based orders) -> 0-based positions, + "table"
    assert [ex[q].modality for q in ("q-a-1", "q-a-2", "q-a-3")] == ["table", "text", "hybrid"]
    assert ex["q-a-2"].gold_evidence == ["text_1"]
    assert ex["q-a-3"].gold_evidence == ["text_2", "text_0", "table"]
    assert ex["q-a-1"].gold_evidence == ["table"]
    # derivation -> operators in evaluation order, step count, template
    assert ex["q-a-3"].derivation == "(1,318-1,204)/1,204"
    assert ex["q-a-3"].operators == ["subtract", "divide"] and ex["q-a-3"].num_steps == 2
    assert ex["q-a-3"].program_template == "subtract(X_0,X_1),divide(#0,X_1)"
    assert ex["q-b-2"].operators == ["add", "multiply", "divide"]  # unary minus on a group: * -1
    assert ex["q-a-1"].num_steps == 0 and ex["q-a-4"].num_steps == 0 and ex["q-a-4"].operators == []
    assert ex["q-a-4"].answer_type == "count" and ex["q-a-4"].derivation == "North America##Europe"
    assert ex["q-a-1"].extra == {"order": 1, "req_comparison": False}


def test_tatqa_examples_do_not_share_mutable_values():
    a, b = load_examples("tatqa", path=TATQA, limit=2)
    assert a.table == b.table and a.table is not b.table
    a.operators.append("add")
    assert b.operators == []


def test_finqa_official_records():
    examples = load_examples("finqa", path=FINQA)
    assert [ex.id for ex in examples] == ["KLX/2018/page_87.pdf-1", "ORB/2016/page_33.pdf-1",
                                          "ORB/2016/page_33.pdf-2"]
    for ex in examples:
        validate_fields(ex)
        assert ex.dataset == "finqa" and ex.scale == "" and ex.derivation == ""
    text_q, table_q, yes_no = examples
    # questions about the same page share the document id
    assert text_q.doc_id == "KLX/2018/page_87.pdf"
    assert table_q.doc_id == yes_no.doc_id == "ORB/2016/page_33.pdf"
    # paragraphs = pre_text + post_text in order (gold text_<i> indexes into them)
    assert len(text_q.paragraphs) == 5
    assert text_q.paragraphs[3] == "we expect the remaining cash payments to be made during 2019 ."
    assert yes_no.paragraphs[4] == yes_no.extra["gold_inds"]["text_4"]
    assert table_q.table[1] == ["first", "$ 1204", "$ 1151"]
    assert text_q.answer == 0.46667 and text_q.answer_value == 0.46667 and text_q.answer_type == "arithmetic"
    assert text_q.program == "subtract(46.2, 31.5), divide(#0, 31.5)"
    assert text_q.operators == ["subtract", "divide"] and text_q.num_steps == 2
    assert text_q.program_template == "subtract(X_0,X_1),divide(#0,X_1)"
    assert text_q.modality == "text" and text_q.gold_evidence == ["text_1"]
    assert table_q.modality == "table" and table_q.operators == ["table_average"]
    assert table_q.program_template == "table_average(X_0)"
    assert yes_no.answer == "yes" and yes_no.answer_value is None and yes_no.answer_type == "yes-no"
    assert yes_no.modality == "hybrid" and yes_no.gold_evidence == ["table_4", "text_4"]
    # leftovers are kept
    assert text_q.extra["program_re"] == "divide(subtract(46.2, 31.5), 31.5)"
    assert text_q.extra["answer"] == "46.7%" and text_q.extra["filename"] == "KLX/2018/page_87.pdf"


def test_finqa_flattened_and_unlabelled_records_from_jsonl(tmp_path):
    official = json.loads(FINQA.read_text())[0]
    flat = {k: v for k, v in official.items() if k != "qa"} | official["qa"]
    flat["id"] = "FLAT-1"
    unlabelled = {"id": "TEST/2020/page_1.pdf-3", "pre_text": ["a ."], "post_text": [],
                  "table": [["", "2020"], ["sales", "5"]], "qa": {"question": "what were sales?"}}
    path = tmp_path / "mixed.jsonl"
    path.write_text(json.dumps(flat) + "\n\n" + json.dumps(unlabelled) + "\n")
    flat_ex, test_ex = load_examples("finqa", path=path)
    reference = load_examples("finqa", path=FINQA)[0]
    for field in ("question", "table", "paragraphs", "answer", "program", "operators", "gold_evidence", "modality"):
        assert flat_ex[field] == reference[field]
    assert flat_ex.doc_id == "KLX/2018/page_87.pdf"  # from filename
    assert test_ex.doc_id == "TEST/2020/page_1.pdf"  # id without the question suffix
    assert test_ex.question == "what were sales?"
    assert (test_ex.answer, test_ex.program, test_ex.operators, test_ex.modality) == ("", "", [], "")


def test_finqa_cases_from_csv_rows():
    examples = load_examples("finqa_cases", split="train", path=CASES)
    assert [ex.id for ex in examples] == [f"finqa-train-{i}" for i in range(6)]
    for ex in examples:
        validate_fields(ex)
        assert ex.table == [] and ex.paragraphs == [] and ex.doc_id == ex.id and ex.dataset == "finqa_cases"
    assert [ex.modality for ex in examples] == ["table", "text", "hybrid", "hybrid", "table", "table"]
    assert examples[0].answer == -0.03219 and examples[0].operators == ["subtract", "divide"]
    assert examples[4].answer == "yes" and examples[4].answer_type == "yes-no" and examples[4].answer_value is None
    # the CSV's own template is used (SEER numbers a numeric row name X_1)
    assert examples[5].program_template == "table_average(X_1)"
    assert examples[3].extra["seer_modality"] == 2 and examples[3].extra["other"] == 1
    assert examples[0].extra["token_prompt_length"] == 231 and "Unnamed: 0" not in examples[0].extra


def test_sara_cases():
    entail, contra, tax = load_examples("sara", path=SARA)
    for ex in (entail, contra, tax):
        validate_fields(ex)
        assert ex.table == [] and ex.modality == "text" and len(ex.paragraphs) == 1
    # the case's group: an entailment case's id without its polarity (its twin shares it), a numerical case's id
    assert (entail.doc_id, contra.doc_id, tax.doc_id) == (entail.id[:-4], contra.id[:-4], tax.id)
    assert entail.answer == "Entailment" and entail.answer_type == "entailment" and entail.answer_value is None
    assert entail.extra["statute"] == "7703(b)(3)" and entail.extra["polarity"] == "pos"
    assert contra.answer == "Contradiction" and contra.extra["statute"] == "152(c)(1)(B)"
    assert contra.extra["section"] == "152" and contra.extra["type"] == "entailment"
    assert tax.answer == "$3803" and tax.answer_value == 3803.0 and tax.answer_type == "numerical"
    assert "statute" not in tax.extra and tax.paragraphs[0].startswith("In 2017, Alice was paid $33200.")


def make_data_dir(root: Path) -> Path:
    """A data directory laid out like the shared one, built from the fixtures."""
    (root / "tatqa").mkdir(parents=True)
    (root / "finqa").mkdir()
    (root / "sara" / "statutes").mkdir(parents=True)
    (root / "tatqa" / "dev_tune.json.gz").write_bytes(gzip.compress(TATQA.read_bytes()))
    (root / "tatqa" / "dev_sample_prediction.json").write_text("{}")
    (root / "finqa" / "train_meta.csv.gz").write_bytes(gzip.compress(CASES.read_bytes()))
    (root / "sara" / "cases_train.json.gz").write_bytes(gzip.compress(SARA.read_bytes()))
    statute = "§63. Taxable income defined\r\n\r\n(a) In general"
    (root / "sara" / "statutes" / "section63.txt").write_bytes(statute.encode())
    (root / "sara" / "statutes" / "section2.txt").write_text("§2. Definitions\n")
    (root / "sara" / "statutes" / "section151.txt").write_text("§151. Allowance of deductions\n")
    (root / "sara" / "statutes" / "notes.txt").write_text("not a statute")
    return root


def test_splits_resolve_in_the_data_directory(tmp_path, monkeypatch):
    root = make_data_dir(tmp_path / "data")
    monkeypatch.setenv("KDSPY_DATA_DIR", str(root))
    assert len(load_examples("tatqa", split="dev_tune")) == 6
    assert [ex.id for ex in load_examples("sara")] == ["s7703_b_3_pos", "s152_c_1_B_neg", "tax_case_3"]
    assert len(load_examples("finqa_cases", split="train")) == 6
    # an explicit data_dir wins over the environment variable
    monkeypatch.setenv("KDSPY_DATA_DIR", str(tmp_path / "nowhere"))
    assert len(load_examples("tatqa", split="dev_tune", data_dir=root)) == 6
    with pytest.raises(DataError, match=r"nowhere.*does not exist"):
        load_examples("tatqa", split="dev_tune")


def test_missing_splits_and_bad_arguments_are_explained(tmp_path):
    root = make_data_dir(tmp_path / "data")
    with pytest.raises(DataError, match=r"no tatqa split 'test' in .*tatqa \(available: dev_tune\)$"):
        load_examples("tatqa", split="test", data_dir=root)
    with pytest.raises(DataError, match=r"holds FinQA documents for train_docs and dev_docs only.*finqa_cases.*path="):
        load_examples("finqa", split="train", data_dir=root)
    with pytest.raises(DataError, match="tatqa needs a split"):
        load_examples("tatqa", data_dir=root)
    with pytest.raises(DataError, match="unknown dataset 'wikitq'; expected one of "
                                        "finqa, finqa_cases, gsm8k, sara, tatqa"):
        load_examples("wikitq", split="dev")
    with pytest.raises(DataError, match="limit must be a non-negative int"):
        load_examples("sara", data_dir=root, limit=-1)
    with pytest.raises(DataError, match="unknown source 'ftp:x'"):
        load_examples("sara", data_dir=root, source="ftp:x")


def test_limit_and_report():
    examples = load_examples("tatqa", path=TATQA, limit=3)
    assert [ex.id for ex in examples] == ["q-a-1", "q-a-2", "q-a-3"]
    report = examples.report
    assert report.dataset == "tatqa" and report.source == str(TATQA) and report.examples_loaded == 3
    assert report.records_read == 1 and report.skipped == [] and report.seconds >= 0
    assert load_examples("tatqa", path=TATQA, limit=0) == []
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a clean load warns about nothing
        load_examples("finqa", path=FINQA)


def test_statutes(tmp_path):
    root = make_data_dir(tmp_path / "data")
    statutes = load_statutes(data_dir=root)
    assert list(statutes) == ["2", "63", "151"]  # numeric section order; notes.txt ignored
    assert statutes["63"] == "§63. Taxable income defined\r\n\r\n(a) In general"  # bytes untouched
    assert load_statutes(path=root / "sara" / "statutes") == statutes
    (root / "sara" / "statutes" / "section7.txt").write_bytes(b"\xff\xfe bad")
    with pytest.raises(DataError, match=r"section7\.txt: not UTF-8 text"):
        load_statutes(data_dir=root)
    with pytest.raises(DataError, match="statute folder does not exist"):
        load_statutes(path=tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataError, match=r"no section<N>\.txt files"):
        load_statutes(path=tmp_path / "empty")


@pytest.fixture
def hub_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("KDSPY_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_hub_source_goes_through_datasets_load_dataset(tmp_path, hub_cache):
    """``source="hub:<id>"`` calls ``datasets.load_dataset(id, split=...)``; a local folder stands in for the
    hub here (offline), exercising the same code path, including mixed-type answers."""
    folder = tmp_path / "finqa_hub"
    folder.mkdir()
    records = json.loads(FINQA.read_text())
    (folder / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    from_hub = load_examples("finqa", split="train", source=f"hub:{folder}")
    from_file = load_examples("finqa", path=FINQA)
    assert len(from_hub) == len(from_file) == 3
    for hub_ex, file_ex in zip(from_hub, from_file, strict=True):
        # Arrow's JSON reader may round a decimal to a neighbouring double (0.46667 -> 0.46667000000000003)
        for field in ("answer", "answer_value"):
            if isinstance(file_ex[field], float):
                assert hub_ex[field] == pytest.approx(file_ex[field], rel=1e-12)
        same = [f for f in FIELDS if f not in ("answer", "answer_value")]
        assert {f: hub_ex[f] for f in same} == {f: file_ex[f] for f in same}
    assert from_hub.report.source == f"hub:{folder}"
    assert (hub_cache / "hf_datasets").is_dir()  # datasets wrote its cache under the project cache

    tatqa = tmp_path / "tatqa_hub"
    tatqa.mkdir()
    shutil.copy(TATQA, tatqa / "dev.json")  # TAT-QA answers mix lists, numbers and strings
    from_hub = load_examples("tatqa", split="validation", source=f"hub:{tatqa}")
    assert [ex.toDict() for ex in from_hub] == [ex.toDict() for ex in load_examples("tatqa", path=TATQA)]


def test_hub_errors_are_data_errors(tmp_path, hub_cache):
    with pytest.raises(DataError, match="needs a split"):
        load_examples("finqa", source="hub:someone/finqa")
    with pytest.raises(DataError, match=r"hub:.*could not load split 'train'"):
        load_examples("finqa", split="train", source=f"hub:{tmp_path / 'no_such_folder'}")


def test_summary_command(tmp_path, capsys):
    from knapsack_dspy.docqa.data.__main__ import main

    root = make_data_dir(tmp_path / "data")
    assert main(["--data-dir", str(root), "--repeat", "1"]) == 0
    out = capsys.readouterr().out
    assert "tatqa        dev_tune         6" in out
    assert "finqa_cases  train            6" in out and "sara         train            3" in out
    assert "tatqa        dev       error: no tatqa split 'dev'" in out  # listed, not fatal
    assert "statutes: 3 sections (2, 63, 151)" in out
    assert main(["--data-dir", str(tmp_path / "missing")]) == 2
