"""Committed results (issue 22, item 10): rows kept as ``predictions.jsonl.gz`` are read wherever rows are read
(``kdspy report``, ``--rescore``, the comparison scripts), a run continuing there decompresses them only when it
writes, and rows of older code (a spec without ``pool_dataset``) report without a traceback."""

import gzip
import importlib.util
import json
import logging
from pathlib import Path

import pytest

from knapsack_dspy.bench.programs import run_program
from knapsack_dspy.bench.reporting.exemplar_index import index_exemplars
from knapsack_dspy.bench.reporting.rescoring import rescore_results
from knapsack_dspy.bench.results.store import ResultsFileError, ResultsStore, load_rows, rows_file
from knapsack_dspy.bench.scoring import paired_runs, results_diff
from knapsack_dspy.cli.main import main
from knapsack_dspy.docqa.data import load_examples

ROOT = Path(__file__).resolve().parents[2]
RUN = "tatqa|pot|seer|b2048|m2|m|0123abcd"
#: a spec as rows of older code stored it: no pool_dataset, no eval_path / pool_path
OLD_SPEC = {"dataset": "tatqa", "pipeline": "pot", "selector": "seer", "budget": 2048, "max_exemplars": 2,
            "model": "m", "eval_split": "dev_tune", "pool_split": "dev_pool"}


def _rows(data_dir: Path) -> list[dict]:
    questions = list(load_examples("tatqa", split="dev_tune", data_dir=data_dir))[:4]
    pool = list(load_examples("tatqa", split="dev_pool", data_dir=data_dir))[:6]
    rows = []
    for i, example in enumerate(questions):
        rows.append({"run": RUN, "spec": OLD_SPEC, "example_id": example.id, "doc_id": example.get("doc_id"),
                     "exemplar_ids": [pool[i].id, pool[i + 1].id], "prompt_tokens": 900, "within_budget": True,
                     "answer": "no such answer", "scale": "", "output": "ans = 0", "error": None, "lm_calls": 1,
                     "gold": "x", "em": 1.0, "f1": 1.0, "correct": True})  # stored right: a re-score corrects it
    return rows


def _committed(directory: Path, rows: list[dict]) -> Path:
    """A results directory as committed: its rows gzipped, no predictions.jsonl."""
    directory.mkdir(parents=True)
    with gzip.open(directory / "predictions.jsonl.gz", "wt", encoding="utf-8") as out:
        out.writelines(json.dumps(row) + "\n" for row in rows)
    (directory / "suite.json").write_text(json.dumps({"name": "committed", "runs": [OLD_SPEC]}))
    return directory


@pytest.fixture()
def committed(tmp_path, small_data):
    return _committed(tmp_path / "results", _rows(small_data)), small_data


def test_report_reads_committed_gzipped_rows_and_leaves_them_as_they_are(committed, capsys):
    out, data_dir = committed
    before = (out / "predictions.jsonl.gz").read_bytes()
    assert main(["report", str(out), "--data-dir", str(data_dir), "--quiet"]) == 0
    printed = capsys.readouterr()
    assert "Traceback" not in printed.out + printed.err
    assert (out / "page.html").is_file() and (out / "report.md").is_file()
    assert (out / "predictions.jsonl.gz").read_bytes() == before
    assert not (out / "predictions.jsonl").exists()  # read, not decompressed
    page = (out / "page.html").read_text(encoding="utf-8")
    assert _rows(data_dir)[0]["exemplar_ids"][0] in page  # the exemplars were read from the pool split


def test_report_on_rows_whose_spec_lacks_pool_dataset_after_gunzip(committed, capsys):
    out, data_dir = committed
    (out / "predictions.jsonl").write_bytes(gzip.decompress((out / "predictions.jsonl.gz").read_bytes()))
    (out / "predictions.jsonl.gz").unlink()
    assert main(["report", str(out), "--data-dir", str(data_dir), "--quiet"]) == 0
    assert "Traceback" not in capsys.readouterr().err


def test_the_exemplar_index_reads_the_pool_of_a_spec_without_pool_dataset(small_data):
    rows = _rows(small_data)
    index = index_exemplars(rows, Path("/nonexistent"), lambda split: run_program.load_split(split, "pool", small_data))
    assert not index.notes
    first = index.of_row[RUN, rows[0]["example_id"]]
    assert [index.exemplars[key]["source"].startswith("the pool") for key in first] == [True, True]


def test_rescore_reads_and_rewrites_committed_rows_gzipped(committed):
    out, data_dir = committed
    counts = rescore_results(out, data_dir=data_dir, log=lambda message: None)
    assert counts["rows"] == 4 and counts["changed"] == 4  # "no such answer" is not right after all
    assert not (out / "predictions.jsonl").exists()
    rows = load_rows(out / "predictions.jsonl.gz")
    assert [r["correct"] for r in rows] == [False] * 4


def test_a_run_continuing_on_committed_rows_decompresses_them_when_it_writes(committed, caplog):
    out, data_dir = committed
    before = (out / "predictions.jsonl.gz").read_bytes()
    rows = _rows(data_dir)
    with ResultsStore(out / "predictions.jsonl") as store:  # a run that writes nothing changes nothing
        assert store.done(RUN, rows[0]["example_id"]) and not store.done(RUN, "new")
    assert not (out / "predictions.jsonl").exists()
    with caplog.at_level(logging.WARNING), ResultsStore(out / "predictions.jsonl") as store:
        assert not store.append(rows[0])  # already there
        assert store.append({**rows[0], "example_id": "new"})
    assert any("decompressed it to predictions.jsonl" in r.getMessage() for r in caplog.records)
    assert [r["example_id"] for r in load_rows(out / "predictions.jsonl")] == [r["example_id"] for r in rows] + ["new"]
    assert (out / "predictions.jsonl.gz").read_bytes() == before  # left as it was
    assert rows_file(out) == out / "predictions.jsonl"  # from now on the plain file is the one read


def test_the_comparison_scripts_read_committed_rows(committed):
    out, _ = committed
    assert len(results_diff.read_rows(out, "run")) == 4
    assert set(paired_runs.scores(out)["seer"]["em"]) == {r["example_id"] for r in load_rows(out)}
    spec = importlib.util.spec_from_file_location("selection_agreement", ROOT / "benchmarks" / "selection_agreement.py")
    selection_agreement = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(selection_agreement)
    rows = selection_agreement.read_rows(out)
    assert [r.example_id for r in rows] == [r.example_id for r in load_rows(out)]
    assert selection_agreement.agreement(rows, "seer", "seer")[0]["questions"] == 4


def test_a_damaged_gzip_file_is_one_line(tmp_path, capsys):
    out = tmp_path / "results"
    out.mkdir()
    whole = gzip.compress(b"".join(json.dumps({"run": RUN, "example_id": f"q{i}"}).encode() + b"\n"
                                   for i in range(200)))
    (out / "predictions.jsonl.gz").write_bytes(whole[: len(whole) // 2])
    with pytest.raises(ResultsFileError, match=r"not a whole gzip file"):
        load_rows(out)
    assert main(["report", str(out), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "not a whole gzip file" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
