"""Committed results (issue 22, item 10): rows kept compressed, as ``predictions.jsonl.xz`` (what
``benchmarks/commit_rows.sh`` writes) or as the older ``predictions.jsonl.gz``, are read wherever rows are read
(``kdspy report``, ``--rescore``, the comparison scripts), a run continuing there decompresses them only when it
writes, and rows of older code (a spec without ``pool_dataset``) report without a traceback."""

import errno
import gzip
import importlib.util
import io
import json
import logging
import lzma
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from knapsack_dspy.bench.programs import run_program
from knapsack_dspy.bench.reporting.exemplar_index import index_exemplars
from knapsack_dspy.bench.reporting.rescoring import rescore_results
from knapsack_dspy.bench.results import store as results_store
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


_OPENERS = {".xz": lzma.open, ".gz": gzip.open}
_DECOMPRESS = {".xz": lzma.decompress, ".gz": gzip.decompress}


def _committed(directory: Path, rows: list[dict], suffix: str = ".gz") -> Path:
    """A results directory as committed: its rows compressed (``suffix``), no predictions.jsonl."""
    directory.mkdir(parents=True)
    with _OPENERS[suffix](directory / f"predictions.jsonl{suffix}", "wt", encoding="utf-8") as out:
        out.writelines(json.dumps(row) + "\n" for row in rows)
    (directory / "suite.json").write_text(json.dumps({"name": "committed", "runs": [OLD_SPEC]}))
    return directory


@pytest.fixture(params=[".xz", ".gz"])
def committed(request, tmp_path, small_data):
    """(results directory, data directory, the committed rows file): each compressed form in turn."""
    out = _committed(tmp_path / "results", _rows(small_data), request.param)
    return out, small_data, out / f"predictions.jsonl{request.param}"


def test_report_reads_committed_compressed_rows_and_leaves_them_as_they_are(committed, capsys):
    out, data_dir, packed = committed
    before = packed.read_bytes()
    assert main(["report", str(out), "--data-dir", str(data_dir), "--quiet"]) == 0
    printed = capsys.readouterr()
    assert "Traceback" not in printed.out + printed.err
    assert (out / "page.html").is_file() and (out / "report.md").is_file()
    assert packed.read_bytes() == before
    assert not (out / "predictions.jsonl").exists()  # read, not decompressed
    page = (out / "page.html").read_text(encoding="utf-8")
    assert _rows(data_dir)[0]["exemplar_ids"][0] in page  # the exemplars were read from the pool split


def test_report_on_rows_whose_spec_lacks_pool_dataset_after_decompressing(committed, capsys):
    out, data_dir, packed = committed
    (out / "predictions.jsonl").write_bytes(_DECOMPRESS[packed.suffix](packed.read_bytes()))
    packed.unlink()
    assert main(["report", str(out), "--data-dir", str(data_dir), "--quiet"]) == 0
    assert "Traceback" not in capsys.readouterr().err


def test_the_exemplar_index_reads_the_pool_of_a_spec_without_pool_dataset(small_data):
    rows = _rows(small_data)
    index = index_exemplars(rows, Path("/nonexistent"), lambda split: run_program.load_split(split, "pool", small_data))
    assert not index.notes
    first = index.of_row[RUN, rows[0]["example_id"]]
    assert [index.exemplars[key]["source"].startswith("the pool") for key in first] == [True, True]


def test_rescore_reads_and_rewrites_committed_rows_in_their_form(committed):
    out, data_dir, packed = committed
    counts = rescore_results(out, data_dir=data_dir, log=lambda message: None)
    assert counts["rows"] == 4 and counts["changed"] == 4  # "no such answer" is not right after all
    assert not (out / "predictions.jsonl").exists()
    assert [p.name for p in sorted(out.glob("predictions.jsonl*"))] == [packed.name]
    text = _DECOMPRESS[packed.suffix](packed.read_bytes())  # still this form: the other one cannot read it
    assert [json.loads(line)["correct"] for line in text.splitlines()] == [False] * 4
    assert [r["correct"] for r in load_rows(packed)] == [False] * 4


def test_a_run_continuing_on_committed_rows_decompresses_them_when_it_writes(committed, caplog):
    out, data_dir, packed = committed
    before = packed.read_bytes()
    rows = _rows(data_dir)
    with ResultsStore(out / "predictions.jsonl") as store:  # a run that writes nothing changes nothing
        assert store.done(RUN, rows[0]["example_id"]) and not store.done(RUN, "new")
    assert not (out / "predictions.jsonl").exists()
    with caplog.at_level(logging.WARNING), ResultsStore(out / "predictions.jsonl") as store:
        assert not store.append(rows[0])  # already there
        assert store.append({**rows[0], "example_id": "new"})
    assert any(f"held only {packed.name}: decompressed it to predictions.jsonl" in r.getMessage()
               for r in caplog.records)
    assert [r["example_id"] for r in load_rows(out / "predictions.jsonl")] == [r["example_id"] for r in rows] + ["new"]
    assert packed.read_bytes() == before  # left as it was
    assert rows_file(out) == out / "predictions.jsonl"  # from now on the plain file is the one read


def test_the_comparison_scripts_read_committed_rows(committed):
    out, _, _ = committed
    assert len(results_diff.read_rows(out, "run")) == 4
    assert set(paired_runs.scores(out)["seer"]["em"]) == {r["example_id"] for r in load_rows(out)}
    spec = importlib.util.spec_from_file_location("selection_agreement", ROOT / "benchmarks" / "selection_agreement.py")
    selection_agreement = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(selection_agreement)
    rows = selection_agreement.read_rows(out)
    assert [r.example_id for r in rows] == [r.example_id for r in load_rows(out)]
    assert selection_agreement.agreement(rows, "seer", "seer")[0]["questions"] == 4


@pytest.mark.parametrize("suffix, kind", [(".xz", "xz"), (".gz", "gzip")])
def test_a_damaged_compressed_file_is_one_line(tmp_path, capsys, suffix, kind):
    out = tmp_path / "results"
    out.mkdir()
    compress = {".xz": lzma.compress, ".gz": gzip.compress}[suffix]
    whole = compress(b"".join(json.dumps({"run": RUN, "example_id": f"q{i}"}).encode() + b"\n" for i in range(200)))
    (out / f"predictions.jsonl{suffix}").write_bytes(whole[: len(whole) // 2])
    with pytest.raises(ResultsFileError, match=rf"not a whole {kind} file"):
        load_rows(out)
    assert main(["report", str(out), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert f"not a whole {kind} file" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_decompressing_says_whether_the_rows_could_not_be_read_or_written(tmp_path, monkeypatch):
    """``decompress_rows`` (run_pinned.sh, a resumed run): an unreadable or damaged compressed file is named as the
    one that cannot be read, a full disk as the plain file that cannot be written; nothing is left half-written."""

    out = tmp_path / "results"
    out.mkdir()
    rows = b"".join(json.dumps({"run": RUN, "example_id": f"q{i}"}).encode() + b"\n" for i in range(50))
    packed = out / "predictions.jsonl.xz"
    packed.write_bytes(lzma.compress(rows))
    cannot_read = rf"^cannot read {re.escape(str(packed))}: Permission denied$"
    cannot_write = rf"^cannot write {re.escape(str(out / 'predictions.jsonl'))}: No space left on device; free some"

    def refused(*args, **kwargs):
        raise PermissionError(errno.EACCES, "Permission denied")

    def full_disk(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    class UnreadableStream(io.BytesIO):  # opens, then fails to read (an I/O error, not a damaged file)
        def read(self, *args):
            refused()

    failures = [  # (what fails, where, its replacement, the message)
        ("the compressed file cannot be opened", results_store, "open_for_reading", refused, cannot_read),
        ("it opens, cannot be read", results_store, "open_for_reading", lambda _: UnreadableStream(), cannot_read),
        ("no temporary file can be made", results_store.tempfile, "mkstemp", full_disk, cannot_write),
        ("the temporary file cannot be synced", results_store.os, "fsync", full_disk, cannot_write),
    ]
    for what, target, name, replacement, message in failures:
        with monkeypatch.context() as patch:
            patch.setattr(target, name, replacement)
            with pytest.raises(ResultsFileError, match=message):
                results_store.decompress_rows(out)
        assert sorted(p.name for p in out.iterdir()) == ["predictions.jsonl.xz"], what  # nothing half-written
    packed.write_bytes(lzma.compress(rows)[:100])
    with pytest.raises(ResultsFileError, match=rf"^{re.escape(str(packed))}: not a whole xz file"):
        results_store.decompress_rows(out)
    assert sorted(p.name for p in out.iterdir()) == ["predictions.jsonl.xz"]
    packed.write_bytes(lzma.compress(rows))
    assert results_store.decompress_rows(out) == out / "predictions.jsonl"
    assert (out / "predictions.jsonl").read_bytes() == rows and results_store.decompress_rows(out) is None


def test_both_compressed_forms_and_no_plain_file_is_an_error_naming_both(tmp_path, small_data):
    rows = _rows(small_data)
    out = _committed(tmp_path / "results", rows, ".xz")
    with gzip.open(out / "predictions.jsonl.gz", "wt", encoding="utf-8") as fh:
        fh.writelines(json.dumps(row) + "\n" for row in rows[:2])  # an older, shorter copy
    with pytest.raises(ResultsFileError, match=r"both predictions\.jsonl\.xz and predictions\.jsonl\.gz"):
        load_rows(out)
    with pytest.raises(ResultsFileError, match=r"both"):
        ResultsStore(out / "predictions.jsonl")
    (out / "predictions.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    assert len(load_rows(out)) == 4  # the file a run writes wins, as with one compressed form


def test_report_notes_committed_rows_beside_the_plain_file_it_reads(committed, capsys):
    out, data_dir, packed = committed
    (out / "predictions.jsonl").write_text("".join(json.dumps(row) + "\n" for row in _rows(data_dir)[:3]))
    assert main(["report", str(out), "--data-dir", str(data_dir), "--quiet"]) == 0
    printed = capsys.readouterr().out
    assert f"{packed.name} beside it is not read" in printed
    assert "| 3 |" in (out / "report.md").read_text()  # the 3 plain rows, not the 4 committed ones


_GIT_ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}


def _scratch_repo(tmp_path: Path, with_gz: bool):
    """A git repository holding commit_rows.sh and results/ with two rows (and, with ``with_gz``, their committed
    .gz); ``predictions.jsonl`` is ignored, as a run's own file is in this repository. Returns (repo, out, git)."""
    repo, out = tmp_path / "repo", tmp_path / "repo" / "results"
    (repo / "benchmarks").mkdir(parents=True)
    shutil.copy(ROOT / "benchmarks" / "commit_rows.sh", repo / "benchmarks" / "commit_rows.sh")
    out.mkdir()
    (repo / ".gitignore").write_text("predictions.jsonl\n")
    (out / "predictions.jsonl").write_text('{"r": 1}\n{"r": 2}\n')
    if with_gz:
        (out / "predictions.jsonl.gz").write_bytes(gzip.compress((out / "predictions.jsonl").read_bytes()))
    (repo / "other").write_text("x\n")
    env = {**os.environ, **_GIT_ENV}

    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True, text=True).stdout

    git("init", "-q")
    git("add", "-A")
    git("commit", "-qm", "start")
    return repo, out, git


def _commit_rows(repo: Path, out: Path) -> str:
    """One pass of commit_rows.sh (its PID has ended); what it printed."""
    done = subprocess.run([str(repo / "benchmarks" / "commit_rows.sh"), str(out), "999999999", "1"], cwd=repo,
                          env={**os.environ, **_GIT_ENV}, check=True, capture_output=True, text=True)
    return done.stdout + done.stderr


_NEEDS_GIT_AND_XZ = pytest.mark.skipif(shutil.which("xz") is None or shutil.which("git") is None,
                                       reason="needs git and xz")


@_NEEDS_GIT_AND_XZ
def test_commit_rows_commits_xz_in_place_of_the_gz_and_nothing_else(tmp_path):
    repo, out, git = _scratch_repo(tmp_path, with_gz=True)
    with open(out / "predictions.jsonl", "a") as fh:
        fh.write('{"r": 3}\n{"r": 4')  # the last row is still being written
    (repo / "other").write_text("y\n")
    git("add", "other")  # staged by someone else: stays staged
    assert "3 rows committed" in _commit_rows(repo, out)
    assert git("show", "--name-status", "--format=%s", "HEAD").split() == [
        "results:", "3", "rows", "of", "its", "run", "D", "results/predictions.jsonl.gz",
        "A", "results/predictions.jsonl.xz"]
    assert git("status", "--short").splitlines() == ["M  other"]
    assert (out / "predictions.jsonl").read_text().endswith('{"r": 4')  # the run's own file: untouched
    assert lzma.decompress(git_blob(repo, "HEAD:results/predictions.jsonl.xz")) == b'{"r": 1}\n{"r": 2}\n{"r": 3}\n'
    head = git("rev-parse", "HEAD")
    assert _commit_rows(repo, out) == ""  # no new complete row: a second pass commits nothing
    assert git("rev-parse", "HEAD") == head


@_NEEDS_GIT_AND_XZ
def test_commit_rows_without_a_gz_adds_the_xz_then_each_new_row(tmp_path):
    repo, out, git = _scratch_repo(tmp_path, with_gz=False)
    _commit_rows(repo, out)
    assert git("show", "--name-status", "--format=%s", "HEAD").split() == [
        "results:", "2", "rows", "of", "its", "run", "A", "results/predictions.jsonl.xz"]
    with open(out / "predictions.jsonl", "a") as fh:
        fh.write('{"r": 3}\n')
    _commit_rows(repo, out)
    assert git("show", "--name-status", "--format=%s", "HEAD").split() == [
        "results:", "3", "rows", "of", "its", "run", "M", "results/predictions.jsonl.xz"]
    assert git("status", "--short") == ""


def git_blob(repo: Path, name: str) -> bytes:
    return subprocess.run(["git", "show", name], cwd=repo, check=True, capture_output=True).stdout
