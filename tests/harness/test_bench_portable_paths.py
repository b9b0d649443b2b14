"""What ``kdspy bench`` writes holds no path of the machine it ran on (issue 48): ``suite.json`` names the suite
file relative to where the bench ran (``paths.portable_path``), and a failed row's traceback names each file
from its ``site-packages`` or ``knapsack_dspy`` folder on (``paths.portable_traceback``). A bench's files are
checked in ``test_reliability_lm_faults.py`` (a refused LM call: a row with a traceback), the committed ones by
``tests/test_repository_paths.py``."""

from __future__ import annotations

import traceback
from pathlib import Path

import pytest

from knapsack_dspy.paths import portable_path, portable_traceback


# -- portable_path -------------------------------------------------------------------------------------------
def test_a_relative_path_is_kept_as_given(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert portable_path("benchmarks/x.toml") == "benchmarks/x.toml"
    assert portable_path(Path("../elsewhere/x.toml")) == "../elsewhere/x.toml"


def test_an_absolute_path_inside_the_current_directory_is_relative_to_it(tmp_path, monkeypatch):
    (tmp_path / "benchmarks").mkdir()
    monkeypatch.chdir(tmp_path)
    assert portable_path(tmp_path / "benchmarks" / "x.toml") == "benchmarks/x.toml"


def test_an_absolute_path_in_the_data_directory_names_the_variable(tmp_path, monkeypatch):
    data, work = tmp_path / "data", tmp_path / "work"
    (data / "tatqa").mkdir(parents=True)
    work.mkdir()
    monkeypatch.chdir(work)
    monkeypatch.setenv("KDSPY_DATA_DIR", str(data))
    assert portable_path(data / "tatqa" / "dev.json") == "$KDSPY_DATA_DIR/tatqa/dev.json"


def test_an_absolute_path_elsewhere_keeps_its_name_alone(tmp_path, monkeypatch):
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    monkeypatch.delenv("KDSPY_DATA_DIR", raising=False)
    assert portable_path(tmp_path / "research" / "report.toml") == "report.toml"


# -- portable_traceback --------------------------------------------------------------------------------------
def _traceback_through(path: Path) -> str:
    """A real traceback whose innermost frame is in ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("def fail():\n    raise ValueError('boom')\n")
    code = compile(path.read_text(), str(path), "exec")
    namespace: dict = {}
    exec(code, namespace)
    try:
        namespace["fail"]()
    except ValueError as exc:  # its frames from fail() on (not this test's own file)
        return "".join(traceback.format_exception(type(exc), exc, exc.__traceback__.tb_next))
    raise AssertionError("no exception")


@pytest.mark.parametrize("inside, shown", [
    ("venv/lib/python3.11/site-packages/dspy/clients/lm.py", "site-packages/dspy/clients/lm.py"),
    ("venv/lib/python3/dist-packages/litellm/main.py", "dist-packages/litellm/main.py"),
    ("pinned/789939d/knapsack_dspy/bench/example_runner.py", "knapsack_dspy/bench/example_runner.py"),
    ("research/script.py", "script.py"),
])
def test_a_traceback_names_its_files_without_the_machines_folders(tmp_path, monkeypatch, inside, shown):
    monkeypatch.chdir(Path(__file__).parent)
    monkeypatch.delenv("KDSPY_DATA_DIR", raising=False)
    text = _traceback_through(tmp_path / inside)
    portable = portable_traceback(text)
    assert str(tmp_path) in text and str(tmp_path) not in portable
    assert f'File "{shown}", line 2, in fail' in portable
    assert portable.replace(f'"{shown}"', f'"{tmp_path / inside}"') == text  # nothing else changed


def test_names_that_are_not_paths_stay():
    text = 'Traceback (most recent call last):\n  File "<string>", line 1, in <module>\nValueError: x\n'
    assert portable_traceback(text) == text
