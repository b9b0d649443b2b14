"""A task and a selector from outside the package: a tiny distribution declares them as entry points
(``knapsack_dspy.tasks``, ``knapsack_dspy.selectors``), is installed into a fresh virtual environment, and
``kdspy bench --selection-only`` runs its task with its selector there -- no import, no edit of knapsack-dspy.

The environment is made by this interpreter's ``venv`` and sees this interpreter's installed packages (a ``.pth``
adding its site directories: a venv made from a venv with ``--system-site-packages`` would see the base
interpreter's instead); knapsack-dspy comes from the checkout under test (``PYTHONPATH``, checked). The package is
installed offline (``pip install --no-deps --no-build-isolation --no-index``). Slow: the real embedder loads.
"""

import json
import os
import site
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]

PYPROJECT = """\
[build-system]
requires = ["setuptools"]
build-backend = "setuptools.build_meta"

[project]
name = "kdspy-toy-plugin"
version = "0.1"

[project.entry-points."knapsack_dspy.tasks"]
toyplug = "kdspy_toy_plugin.toyplug:TASK"
broken = "kdspy_toy_plugin.missing:TASK"

[project.entry-points."knapsack_dspy.selectors"]
first_ids = "kdspy_toy_plugin.selectors:FirstIdsSelector"

[tool.setuptools]
packages = ["kdspy_toy_plugin"]
"""

TASK_MODULE = '''\
"""A toy table + text task: its files, its record parser, its metric."""
from knapsack_dspy.docqa.data.example_fields import blank_fields
from knapsack_dspy.docqa.data.loader import DatasetSpec
from knapsack_dspy.docqa.tasks import Task


def parse(record, split):
    fields = blank_fields("toyplug")
    fields.update(id=record["id"], doc_id=record["doc"], question=record["question"], table=record["table"],
                  paragraphs=record["text"], answer=record["answer"])
    return [fields]


def score(example, prediction):
    right = str(getattr(prediction, "answer", "") or "").strip() == example.answer
    return {"correct": right, "em": float(right)}


TASK = Task(name="toyplug", files=DatasetSpec("toyplug", "toyplug", ("{split}.jsonl",), parse, ("pool", "eval")),
            score=score, score_name="exact match", pipelines=("few_shot",), compile_splits=("pool", "eval"),
            attributes=(), description="a toy task from outside the package")
'''

SELECTOR_MODULE = '''\
"""A selector: the eligible exemplars of the smallest ids that fit, up to M."""
from knapsack_dspy.selection import ExemplarSelector
from knapsack_dspy.selection.selectors.base import candidates, greedy_fill, make_selection


class FirstIdsSelector(ExemplarSelector):
    name = "first_ids"

    def select(self, pool, request):
        idx, sims = candidates(pool, request)
        order = sorted(idx, key=lambda i: pool.ids[i])
        return make_selection(pool, request, greedy_fill(order, pool, request.capacity, self.max_exemplars), sims)
'''

SUITE = """\
name = "toyplug"
dataset = "toyplug"
pool_split = "pool"
eval_split = "eval"
pipeline = "few_shot"
selector = ["first_ids", "kate_within_budget"]
budget = 4000
max_exemplars = 2
model = "openai/stub-model"
"""


def _record(k: int, split: str) -> dict:
    """Pool ``p00``..., questions ``e00``... (no question is a pool exemplar's: those would be left out)."""
    question = f"What was the revenue of unit {k}?" if split == "pool" else f"How much did unit {k} earn in 2019?"
    return {"id": f"{split[0]}{k:02d}", "doc": f"{split}-doc{k}", "question": question,
            "table": [["", "2019"], [f"Revenue {k}", str(100 + k)]], "text": [f"Unit {k} grew."],
            "answer": str(100 + k)}


def _run(args: list, **kw) -> subprocess.CompletedProcess:
    done = subprocess.run(args, capture_output=True, text=True, timeout=600, **kw)
    assert done.returncode == 0, f"{args}: {done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    return done


@pytest.fixture(scope="module")
def venv(tmp_path_factory):
    """A virtual environment with the toy package installed: its python."""
    root = tmp_path_factory.mktemp("outside")
    package = root / "toy"
    (package / "kdspy_toy_plugin").mkdir(parents=True)
    (package / "pyproject.toml").write_text(PYPROJECT)
    (package / "kdspy_toy_plugin" / "__init__.py").write_text("")
    (package / "kdspy_toy_plugin" / "toyplug.py").write_text(TASK_MODULE)
    (package / "kdspy_toy_plugin" / "selectors.py").write_text(SELECTOR_MODULE)
    env_dir = root / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", str(env_dir)])
    python = env_dir / "bin" / "python"
    purelib = Path(_run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"])
                   .stdout.strip())
    lines = [f"import site; site.addsitedir({d!r})" for d in site.getsitepackages() if Path(d).is_dir()]
    (purelib / "kdspy_parent_site.pth").write_text("\n".join(lines) + "\n")
    _run([str(python), "-m", "pip", "install", "--no-deps", "--no-build-isolation", "--no-index", "--no-cache-dir",
          "--disable-pip-version-check", "-q", str(package)], cwd=root)
    return python


def test_an_installed_task_and_selector_run_in_the_bench(venv, tmp_path):
    data = tmp_path / "data"
    (data / "toyplug").mkdir(parents=True)
    for split, n in (("pool", 12), ("eval", 4)):
        (data / "toyplug" / f"{split}.jsonl").write_text("".join(json.dumps(_record(k, split)) + "\n"
                                                                 for k in range(n)))
    (tmp_path / "suite.toml").write_text(SUITE)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "KDSPY_DATA_DIR": str(data), "KDSPY_CACHE_DIR": str(tmp_path / "c"),
           "PYTHONWARNINGS": "default"}
    where = _run([str(venv), "-c", "import knapsack_dspy; print(knapsack_dspy.__file__)"], env=env, cwd=tmp_path)
    assert Path(where.stdout.strip()).is_relative_to(ROOT)  # the checkout under test, not another install

    done = _run([str(venv), "-m", "knapsack_dspy.cli.main", "bench", "suite.toml", "--selection-only", "--quiet",
                 "--out", "out"], env=env, cwd=tmp_path)
    rows = [json.loads(line) for line in (tmp_path / "out" / "predictions.jsonl").read_text().splitlines()]
    assert len(rows) == 8 and {r["spec"]["dataset"] for r in rows} == {"toyplug"}
    mine = [r for r in rows if r["spec"]["selector"] == "first_ids"]
    assert len(mine) == 4 and all(sorted(r["exemplar_ids"]) == ["p00", "p01"] for r in mine)  # its picks
    assert all(len(r["exemplar_ids"]) == 2 for r in rows if r["spec"]["selector"] == "kate_within_budget")
    # the broken entry point of the same package: left out with one line naming it and its distribution
    warned = [line for line in done.stderr.splitlines() if "PluginWarning" in line]
    assert len(warned) == 1, done.stderr
    assert ("the knapsack_dspy.tasks entry point 'broken = kdspy_toy_plugin.missing:TASK' of kdspy-toy-plugin 0.1 "
            "is left out: ModuleNotFoundError") in warned[0]
