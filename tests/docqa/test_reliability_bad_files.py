"""Reliability: bad files through every reader and scorer -> one line naming the file, exit 2, no traceback.

Readers reached through the command line: the data loaders (``kdspy compile --pool PATH``), the three
scorers' gold and prediction files (``kdspy score``), ``kdspy ask`` inputs and program files, suite files
(``kdspy bench``). Bad files: a gzip bomb (the size limit is lowered to 1 MB here), 30,000 nested ``[``, a
5,000-digit integer, broken gzip, bytes that are not UTF-8, an empty file, a directory. The library-level
bounds (``knapsack_dspy.file_limits``) and the loader / scorer parity on bad gold values are tested below.
"""

from __future__ import annotations

import gzip
import json
import os
import re
from pathlib import Path

import pytest

import knapsack_dspy  # noqa: F401
from knapsack_dspy.cli.main import main
from knapsack_dspy.docqa.data import DataError, load_examples
from knapsack_dspy.docqa.metrics.errors import ScoringInputError
from knapsack_dspy.file_limits import FileLimitError, LongInteger, parse_json, read_file_bytes

FIXTURES = Path(__file__).parents[1] / "fixtures"
TATQA_GOLD = FIXTURES / "metrics_tatqa_gold.json"
FINQA_GOLD = FIXTURES / "finqa_metric_gold.json"
FINQA_PREDICTIONS = FIXTURES / "finqa_metric_predictions_gold.json"
SARA_CASES = [
    {"id": "s151_a_pos", "type": "entailment", "label": "Entailment", "text": "t", "question": "q"},
    {
        "id": "tax_case_1",
        "type": "numerical",
        "answer": "$15037",
        "answer_value": 15037,
        "text": "t",
        "question": "q",
    },
]


def _bad_file(tmp_path: Path, kind: str, suffix: str = ".json") -> Path:
    path = tmp_path / f"bad_{kind}{suffix}"
    if kind == "bomb":  # 3 MB of JSON in a ~3 KB gzip file; the limit is 1 MB in these tests
        path = path.with_name(path.name + ".gz")
        path.write_bytes(gzip.compress(b"[" + b" " * 3_000_000 + b"]"))
    elif kind == "deep":
        path.write_text("[" * 30_000)  # deeper than 100 levels, fewer values than the limit (40,000 at 1 MB)
    elif kind == "long_int":
        path.write_text("[" + "7" * 5000 + "]")
    elif kind == "broken_gzip":
        path = path.with_name(path.name + ".gz")
        path.write_bytes(b"\x1f\x8b\x08\x00" + b"garbage" * 10)
    elif kind == "not_utf8":
        path.write_bytes(b'["\xff\xfe"]')
    elif kind == "empty":
        path.write_text("")
    elif kind == "directory":
        path.mkdir()
    else:  # pragma: no cover
        raise ValueError(kind)
    return path


KINDS = ("bomb", "deep", "long_int", "broken_gzip", "not_utf8", "empty", "directory")


@pytest.fixture(autouse=True)
def _small_size_limit(monkeypatch):
    monkeypatch.setenv("KDSPY_MAX_FILE_MB", "1")


def _one_error_line(capsys, code: int, path: Path) -> str:
    captured = capsys.readouterr()
    assert code == 2, captured
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1, captured.err
    assert "Traceback" not in captured.err
    assert path.name in lines[0], lines[0]
    return lines[0]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(
    "dataset, good_gold, good_predictions",
    [("tatqa", TATQA_GOLD, None), ("sara", None, None), ("finqa", FINQA_GOLD, FINQA_PREDICTIONS)],
)
@pytest.mark.parametrize("side", ["gold", "predictions"])
def test_scorers_refuse_bad_files_in_one_line(
    tmp_path, capsys, kind, dataset, good_gold, good_predictions, side
):
    if dataset == "sara":
        good_gold = tmp_path / "cases.json"
        good_gold.write_text(json.dumps(SARA_CASES))
    if good_predictions is None:
        good_predictions = tmp_path / "pred.json"
        good_predictions.write_text("{}")
    bad = _bad_file(tmp_path, kind)
    gold, predictions = (bad, good_predictions) if side == "gold" else (good_gold, bad)
    code = main(["score", dataset, "--gold", str(gold), "--predictions", str(predictions), "--json"])
    line = _one_error_line(capsys, code, bad)
    if kind == "bomb":
        assert "1 MB, the size limit" in line and "KDSPY_MAX_FILE_MB" in line
    if kind == "deep":
        assert "nests record 0 deeper than 100 levels" in line


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(
    "dataset, suffix", [("tatqa", ".json"), ("tatqa", ".jsonl"), ("sara", ".json"), ("finqa", ".json")]
)
def test_data_loaders_refuse_bad_files_in_one_line(tmp_path, capsys, kind, dataset, suffix):
    bad = _bad_file(tmp_path, kind, suffix)
    code = main(
        [
            "compile",
            "--dataset",
            dataset,
            "--pool",
            str(bad),
            "--val",
            str(bad),
            "-o",
            str(tmp_path / "p.json"),
            "--quiet",
        ]
    )
    line = _one_error_line(capsys, code, bad)
    if kind == "bomb":
        assert "size limit" in line


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("option", ["--input", "--table", "--text", "program"])
def test_ask_refuses_bad_input_files_in_one_line(tmp_path, capsys, kind, option):
    bad = _bad_file(tmp_path, kind, ".json" if option in ("--input", "program") else ".txt")
    if option == "program":
        argv = ["ask", str(bad), "--question", "q?"]
    else:
        argv = ["ask", str(tmp_path / "never-read.json"), option, str(bad), "--question", "q?"]
    code = main(argv)
    if option in ("--table", "--text") and kind in ("deep", "long_int", "empty"):
        # any characters make a table or a text: the file is fine, the missing program is the error
        assert "never-read.json" in _one_error_line(capsys, code, tmp_path / "never-read.json")
        return
    _one_error_line(capsys, code, bad)


@pytest.mark.parametrize("content", ["a = " + "[" * 50_000, "name = 'x'\n" + "#" * 2_000_000, "\xff"])
def test_bench_refuses_bad_suite_files_in_one_line(tmp_path, capsys, content):
    suite = tmp_path / "suite.toml"
    suite.write_bytes(content.encode("latin-1"))
    _one_error_line(capsys, main(["bench", str(suite), "--out", str(tmp_path / "out")]), suite)


# -- the bounds themselves -----------------------------------------------------------------------------------
def test_a_gzip_bomb_is_read_no_further_than_the_limit(tmp_path):
    bomb = tmp_path / "bomb.bin"  # gzip by its magic bytes, whatever the name
    bomb.write_bytes(gzip.compress(b"0" * 5_000_000))
    with pytest.raises(FileLimitError, match="decompresses to more than 1 MB"):
        read_file_bytes(bomb)
    assert len(read_file_bytes(bomb, limit_bytes=6_000_000)) == 5_000_000
    plain = tmp_path / "plain.json"
    plain.write_bytes(b"0" * 2_000_000)
    with pytest.raises(FileLimitError, match="is larger than 1 MB"):
        read_file_bytes(plain)


def test_the_size_limit_setting_must_be_a_positive_number(tmp_path, monkeypatch):
    monkeypatch.setenv("KDSPY_MAX_FILE_MB", "lots")
    with pytest.raises(FileLimitError, match="KDSPY_MAX_FILE_MB must be a positive number"):
        read_file_bytes(tmp_path)


def test_nesting_is_checked_before_parsing_and_names_the_record():
    assert parse_json('[{"a": "[[[[[[[[[[[[[[[[["}, [1, [2]]]', max_depth=3) == [{"a": "[" * 17}, [1, [2]]]
    with pytest.raises(FileLimitError, match="nests record 2 deeper than 3 levels"):
        parse_json('[[1], "]]]]", [[[[1]]]]]', max_depth=3)
    with pytest.raises(FileLimitError, match="nests deeper than 100 levels"):
        parse_json('{"a": ' + "[" * 200 + "]" * 200 + "}")
    with pytest.raises(FileLimitError):
        parse_json(b"[" * 100_000)


def test_the_number_of_values_is_limited_before_parsing(tmp_path, monkeypatch, capsys):
    from knapsack_dspy import file_limits

    monkeypatch.setattr(file_limits, "VALUES_PER_MB", 1000)  # the size limit is 1 MB here
    assert parse_json('[{"a": ",,,,,"}]' * 1) == [{"a": ",,,,,"}]  # separators inside strings do not count
    with pytest.raises(FileLimitError, match=r"holds more than 1,000 JSON values .*the value limit"):
        parse_json("[" + "1," * 1000 + "1]")
    with pytest.raises(FileLimitError, match="more than 1,000 JSON values"):
        parse_json("[" + '{"a": 1},' * 400 + "{}]")  # keys count too
    gold = tmp_path / "gold.json"
    gold.write_text("[" + "[]," * 2000 + "[]]")
    predictions = tmp_path / "pred.json"
    predictions.write_text("{}")
    line = _one_error_line(
        capsys, main(["score", "tatqa", "--gold", str(gold), "--predictions", str(predictions)]), gold
    )
    assert "the value limit" in line
    table = tmp_path / "t.csv"
    table.write_text("a,b\n" * 600)
    line = _one_error_line(capsys, main(["ask", "p.json", "--table", str(table), "--question", "q?"]), table)
    assert "more than 1,000 values" in line


def test_the_strings_are_skipped_in_slices_exactly_as_a_full_scan_would(monkeypatch):
    """``file_limits._structure`` (brackets, commas and colons outside strings, a megabyte at a time) against
    a regular expression over the whole text, on random JSON with escapes, at slice sizes down to 1 byte."""
    import random

    from knapsack_dspy import file_limits

    string = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
    rng = random.Random(0)
    values = ['a"b', "c\\", '\\\\"', "[{,:}]", "x" * 300, 5, [1, {}], "\\" * 5, ""]
    for _ in range(300):
        document = json.dumps(
            [
                {f"k{i}": rng.choice(values) for i in range(rng.randrange(30))}
                for _ in range(rng.randrange(40))
            ]
        ).encode()
        monkeypatch.setattr(file_limits, "_SLICE", rng.choice([1, 2, 3, 7, 64, 1 << 20]))
        expected = string.sub(b"", document).translate(None, file_limits._DELETE)
        assert file_limits._structure(document) == expected


def test_over_long_integers_are_set_aside_not_raised():
    value = parse_json("[" + "9" * 5000 + ", -" + "8" * 4301 + ", 4300, 1.5]")
    assert isinstance(value[0], LongInteger) and value[0].digits == 5000
    assert repr(value[1]) == "<integer of 4301 digits>"
    assert value[2:] == [4300, 1.5]


def test_loaders_name_file_record_and_field_for_bad_values(tmp_path):
    context = json.loads(TATQA_GOLD.read_text())[0]
    question = context["questions"][0]
    question.update(answer_type="arithmetic", answer="LONG", scale="")
    path = tmp_path / "tatqa.json"
    path.write_text(json.dumps([context]).replace('"LONG"', "1" + "0" * 5000))
    with pytest.raises(DataError) as info:
        load_examples("tatqa", path=path)
    assert (info.value.index, info.value.field) == (0, "questions[0].answer")
    assert str(path) in str(info.value) and "<integer of 5001 digits>" in str(info.value)
    path.write_text(json.dumps([context]).replace('"LONG"', "1" + "0" * 400))  # beyond the float range
    with pytest.raises(DataError, match=r"record 0 .*field 'questions\[0\].answer': expected a number"):
        load_examples("tatqa", path=path)


# -- scorers check gold values as the loaders do -------------------------------------------------------------
def _tatqa_gold_with(tmp_path, **changes) -> Path:
    contexts = json.loads(TATQA_GOLD.read_text())
    contexts[0]["questions"][0].update(changes)
    path = tmp_path / "gold.json"
    path.write_text(json.dumps(contexts))
    return path


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"answer_type": "ratio"}, r"field 'answer_type': expected one of \['span'"),
        ({"answer_type": "arithmetic", "answer": {"value": 5}}, "field 'answer': expected a number"),
        ({"answer_type": "arithmetic", "answer": 10**400}, "field 'answer': expected a number"),
        ({"answer_type": "arithmetic", "answer": 10**300, "scale": "billion"}, "too large to score"),
        ({"scale": "dozens"}, "field 'scale': expected one of"),
    ],
)
def test_tatqa_scorer_rejects_gold_the_loader_rejects(tmp_path, changes, message):
    from knapsack_dspy.docqa.metrics.tatqa import load_tatqa_gold

    with pytest.raises(ScoringInputError, match=message):
        load_tatqa_gold(_tatqa_gold_with(tmp_path, **changes))


def test_tatqa_scorer_rejects_a_duplicate_uid_as_the_loader_does(tmp_path):
    from knapsack_dspy.docqa.metrics.tatqa import load_tatqa_gold

    contexts = json.loads(TATQA_GOLD.read_text())
    contexts[0]["questions"].append(dict(contexts[0]["questions"][0]))
    path = tmp_path / "gold.json"
    path.write_text(json.dumps(contexts))
    with pytest.raises(ScoringInputError, match="field 'uid': duplicate uid"):
        load_tatqa_gold(path)
    with pytest.raises(DataError, match="duplicate id"):
        load_examples("tatqa", path=path)


@pytest.mark.parametrize("dataset", ["tatqa", "sara"])
def test_a_prediction_given_twice_is_an_error_not_the_last_one_silently(tmp_path, capsys, dataset):
    gold = TATQA_GOLD if dataset == "tatqa" else tmp_path / "cases.json"
    if dataset == "sara":
        gold.write_text(json.dumps(SARA_CASES))
    key, value = ("q-span", '["x", ""]') if dataset == "tatqa" else ("tax_case_1", "5")
    predictions = tmp_path / "pred.json"
    predictions.write_text(f'{{"{key}": {value}, "{key}": {value}}}')
    line = _one_error_line(
        capsys, main(["score", dataset, "--gold", str(gold), "--predictions", str(predictions)]), predictions
    )
    assert f"names the key '{key}' twice" in line


@pytest.mark.parametrize(
    "case, message",
    [
        ({"answer": "lots", "answer_value": 15037}, "field 'answer': no dollar amount in 'lots'"),
        ({"answer": "$15037", "answer_value": 99}, "field 'answer_value': 99 is not the answer"),
        ({"answer": "$15037", "answer_value": "lots"}, "field 'answer_value': no dollar amount"),
    ],
)
def test_sara_scorer_and_loader_reject_the_same_gold_amounts(tmp_path, case, message):
    from knapsack_dspy.docqa.metrics.sara import load_sara_gold

    cases = [dict(SARA_CASES[1], **case)]
    path = tmp_path / "cases.json"
    path.write_text(json.dumps(cases))
    with pytest.raises(ScoringInputError, match=re.escape(message)):
        load_sara_gold(path)
    with pytest.raises(DataError, match=re.escape(message)):
        load_examples("sara", path=path)


@pytest.mark.parametrize("prediction", ["1" + "0" * 400, "9" * 5000])
def test_tatqa_scorer_names_the_prediction_it_cannot_score(tmp_path, capsys, prediction):
    predictions = tmp_path / "pred.json"
    predictions.write_text(json.dumps({"q-pct": [prediction, ""]}))
    line = _one_error_line(
        capsys,
        main(["score", "tatqa", "--gold", str(TATQA_GOLD), "--predictions", str(predictions)]),
        predictions,
    )
    assert "uid 'q-pct'" in line and ("too large" in line or "too long" in line)


def test_scorers_reject_over_long_integers_in_predictions(tmp_path, capsys):
    cases = tmp_path / "cases.json"
    cases.write_text(json.dumps(SARA_CASES))
    predictions = tmp_path / "pred.json"
    predictions.write_text('{"tax_case_1": ' + "1" * 5000 + "}")
    line = _one_error_line(
        capsys, main(["score", "sara", "--gold", str(cases), "--predictions", str(predictions)]), predictions
    )
    assert "case id 'tax_case_1'" in line and "<integer of 5000 digits>" in line


def test_the_module_entry_point_prints_errors_in_one_line_too(tmp_path):
    """``python -m knapsack_dspy.cli.main`` (how pinned exports are run) once printed user errors as
    tracebacks: its ``__main__`` copy of UserError was another class than the one the commands raise."""
    import subprocess
    import sys

    bad = _bad_file(tmp_path, "deep")
    predictions = tmp_path / "pred.json"
    predictions.write_text("{}")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "knapsack_dspy.cli.main",
            "score",
            "tatqa",
            "--gold",
            str(bad),
            "--predictions",
            str(predictions),
        ],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
    )
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines() == [
        f"kdspy score: error: {bad}: gold file nests record 0 deeper than 100 levels, the nesting limit"
    ]


def test_printing_a_file_error_imports_no_lm_stack(tmp_path):
    """The one-line error of a failed read looks only at loaded modules: importing DSPy / LiteLLM while the
    read's data is still referenced raised the peak memory of a 200 MB bad file by ~115 MB."""
    import subprocess
    import sys

    bad = _bad_file(tmp_path, "deep")
    (tmp_path / "pred.json").write_text("{}")
    code = (
        "import sys; from knapsack_dspy.cli.main import main; "
        f"code = main(['score', 'tatqa', '--gold', {str(bad)!r}, '--predictions', {str(tmp_path / 'pred.json')!r}]); "
        "print(code, sorted(m for m in ('dspy', 'litellm', 'knapsack_dspy.llm.errors') if m in sys.modules))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
    )
    assert done.stdout.strip() == "2 []", done.stderr
    assert "gold file nests record 0 deeper than 100 levels" in done.stderr


@pytest.mark.parametrize("bad", ["answer_type", "duplicate"])
def test_large_files_are_checked_before_examples_are_built_with_the_same_error(tmp_path, monkeypatch, bad):
    from knapsack_dspy.docqa.data import loader

    contexts = json.loads((FIXTURES / "data_tatqa_small.json").read_text())
    if bad == "answer_type":
        contexts[-1]["questions"][-1]["answer_type"] = "ratio"
    else:
        contexts[-1]["questions"].append(dict(contexts[0]["questions"][0]))
    path = tmp_path / "tatqa.json"
    path.write_text(json.dumps(contexts))
    with pytest.raises(DataError) as built:
        load_examples("tatqa", path=path)
    monkeypatch.setattr(loader, "CHECK_FIRST_RECORDS", 1)
    built_examples = []
    monkeypatch.setattr(loader, "make_example", lambda fields: built_examples.append(fields) or fields)
    with pytest.raises(DataError) as checked:
        load_examples("tatqa", path=path)
    assert str(checked.value) == str(built.value) and built_examples == []
    monkeypatch.undo()
    assert len(load_examples("tatqa", path=FIXTURES / "data_tatqa_small.json")) > 0
