"""Tasks are found on first use: nothing imports a task module by hand (``docqa/task_discovery.py``).

In a fresh interpreter ``load_examples("gsm8k", ...)``, ``find_split_file``, ``task_named``, ``TASKS``,
``build_pipeline`` and a suite's checks find every built-in task; ``import knapsack_dspy`` imports none. Every
module of ``docqa/tasks`` but its support modules is a data set's, holding its ``DatasetSpec`` and registering its
task. A task an installed package declares (entry-point group ``knapsack_dspy.tasks``, naming a ``Task``) is
registered when a name is missed; one that cannot be is one warning line.
"""

import dataclasses
import importlib
import importlib.metadata
import json
import os
import pkgutil
import subprocess
import sys
import types
from pathlib import Path

import pytest

from knapsack_dspy.docqa import task_discovery
from knapsack_dspy.docqa.data.loader import DATASETS, DatasetSpec
from knapsack_dspy.docqa.tasks import TASKS, Task, UnknownTaskError, task_named, unregister_task
from knapsack_dspy.plugins import TASKS_GROUP, PluginWarning

ROOT = Path(__file__).resolve().parents[2]
DATA = Path(os.environ.get("KDSPY_DATA_DIR", ROOT.parent / "shared" / "data"))


def _fresh(code: str) -> list[str]:
    env = {**os.environ, "KDSPY_DATA_DIR": str(DATA)}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, env=env, check=True)
    return out.stdout.split()


def test_importing_the_package_imports_no_task():
    loaded = _fresh("import sys, knapsack_dspy; print(sorted(m for m in sys.modules if 'docqa' in m) or 'none')")
    assert loaded == ["none"]


@pytest.mark.skipif(not (DATA / "gsm8k").is_dir() or not (DATA / "sara").is_dir(), reason="no GSM8K / SARA data")
def test_a_fresh_interpreter_finds_every_task_on_first_use():
    out = _fresh(
        "from knapsack_dspy.docqa.data import load_examples, find_split_file\n"
        "print(load_examples('gsm8k', 'pool', limit=1)[0].dataset)\n")
    assert out == ["gsm8k"]
    out = _fresh("from knapsack_dspy.docqa.data import find_split_file\nprint(find_split_file('sara', 'train').name)")
    assert out == ["cases_train.json.gz"]
    out = _fresh("from knapsack_dspy.docqa.tasks.task import task_named\nprint(task_named('finqa_cases').score_name)")
    assert out == ["execution", "accuracy"]
    out = _fresh("from knapsack_dspy.bench.suites.suite import suite_from_dict\n"
                 "s = suite_from_dict({'dataset': 'gsm8k', 'pipeline': 'cot', 'pool_split': 'pool', "
                 "'eval_split': 'tune', 'selector': 'kate'})\nprint(s.runs[0].dataset)")
    assert out == ["gsm8k"]


def test_build_pipeline_from_the_top_finds_the_task_in_a_fresh_interpreter():
    out = _fresh("from knapsack_dspy import build_pipeline\n"
                 "print(type(build_pipeline('gsm8k', 'cot', token_counter=len)).__name__)")
    assert out == ["ProgramQA"]


def _task_modules() -> list[str]:
    package = importlib.import_module(task_discovery.BUILT_IN_TASKS_PACKAGE)
    return sorted(m.name for m in pkgutil.iter_modules(package.__path__)
                  if m.name not in task_discovery.SUPPORT_MODULES and not m.name.startswith("_"))


@pytest.mark.parametrize("module", _task_modules())
def test_each_task_module_holds_its_data_set_and_registers_its_task(module):
    task = TASKS[module]
    mod = sys.modules[f"{task_discovery.BUILT_IN_TASKS_PACKAGE}.{module}"]
    assert mod.FILES is task.files and task.files.name == module and DATASETS[module] is task.files
    assert task in vars(mod).values()


def test_the_built_in_tasks_are_every_task_module():
    assert {"tatqa", "finqa", "finqa_cases", "sara", "gsm8k"} <= set(_task_modules()) <= set(TASKS)


def test_the_loader_names_no_data_set():
    loader = (ROOT / "knapsack_dspy" / "docqa" / "data" / "loader.py").read_text(encoding="utf-8")
    assert not any(f'"{name}"' in loader for name in _task_modules())


# -- plug-ins -------------------------------------------------------------------------------------------------


def _parse(record, split):
    return []


PLUGGED = Task(name="plugged", files=DatasetSpec("plugged", "plugged", ("{split}.jsonl",), _parse, ("eval",)),
               score=lambda example, prediction: {"correct": False}, pipelines=("few_shot",), attributes=())


@pytest.fixture
def installed(monkeypatch):
    """``installed(*entry_points)``: what ``importlib.metadata`` lists for the tasks' group, the plug-ins not read
    yet; the tasks they register are forgotten afterwards."""
    module = types.ModuleType("kdspy_fake_tasks")
    module.PLUGGED = PLUGGED
    module.RENAMED = dataclasses.replace(PLUGGED, name="other", files=dataclasses.replace(PLUGGED.files,
                                                                                         name="other"))
    module.NOT_A_TASK = {"name": "plugged"}
    monkeypatch.setitem(sys.modules, "kdspy_fake_tasks", module)
    monkeypatch.setitem(task_discovery._DONE, "plugins", False)

    def install(*points):
        entry_points = [importlib.metadata.EntryPoint(name=n, value=v, group=TASKS_GROUP) for n, v in points]
        monkeypatch.setattr(importlib.metadata, "entry_points",
                            lambda group=None: [ep for ep in entry_points if ep.group == group])

    yield install
    for name in ("plugged", "other"):
        unregister_task(name)


def test_an_installed_task_is_registered_when_its_name_is_first_missed(installed):
    installed(("plugged", "kdspy_fake_tasks:PLUGGED"))
    assert task_named("plugged") is PLUGGED and DATASETS["plugged"] is PLUGGED.files


def test_a_task_plugin_that_cannot_be_registered_is_one_warning_line(installed):
    installed(("plugged", "kdspy_fake_tasks:NOT_A_TASK"), ("wrong", "kdspy_fake_tasks:RENAMED"),
              ("tatqa", "kdspy_fake_tasks:PLUGGED"), ("gone", "kdspy_no_such_module:TASK"))
    with pytest.warns(PluginWarning) as caught:
        with pytest.raises(UnknownTaskError, match="unknown dataset 'plugged'"):
            task_named("plugged")
    messages = sorted(str(w.message) for w in caught)
    assert len(messages) == 4 and all(m.startswith("the knapsack_dspy.tasks entry point '") for m in messages)
    assert "ModuleNotFoundError" in messages[0]  # gone
    assert "names a Task ('module:TASK'), not dict" in messages[1]  # plugged
    assert "the entry point's name is not its task's ('plugged')" in messages[2]  # tatqa
    assert "the entry point's name is not its task's ('other')" in messages[3]  # wrong
    assert TASKS["tatqa"].score_name == "exact match"  # the built-in one stays


def test_a_task_module_of_an_outside_package_reads_its_own_files(installed, tmp_path):
    (tmp_path / "plugged").mkdir()
    (tmp_path / "plugged" / "eval.jsonl").write_text(json.dumps({"id": "a"}) + "\n")
    installed(("plugged", "kdspy_fake_tasks:PLUGGED"))
    from knapsack_dspy.docqa.data import find_split_file

    assert find_split_file("plugged", "eval", data_dir=tmp_path).name == "eval.jsonl"
