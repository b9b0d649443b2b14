"""The base install is the optimizer: a fresh venv with ``pip install <this checkout>`` (no extra) runs the README's
"Any DSPy program" example -- answered by ``DummyLM`` -- and has none of the extras' packages; ``kdspy`` says which
extra its commands need. Slow: it installs torch (CPU) and DSPy's dependencies from the package index."""

import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.slow, pytest.mark.install]

EXAMPLE = textwrap.dedent('''
    import dspy
    from dspy.utils import DummyLM

    import knapsack_dspy
    from knapsack_dspy import KnapsackFewShot, selection_log

    facts = [("What is the capital of France?", "Paris"), ("What is the capital of Peru?", "Lima"),
             ("How many legs does a spider have?", "8"), ("How many legs does an ant have?", "6"),
             ("What colour is the sky on a clear day?", "blue"), ("What colour is fresh grass?", "green"),
             ("What is 12 + 30?", "42"), ("What is 7 * 6?", "42")]
    trainset = [dspy.Example(question=q, answer=a).with_inputs("question") for q, a in facts]

    dspy.configure(lm=DummyLM([{"reasoning": "Santiago is the capital.", "answer": "Santiago"}] * 4))
    program = KnapsackFewShot(max_exemplars=3, budget=1024, progress=False).compile(
        dspy.ChainOfThought("question -> answer"), trainset=trainset)

    with selection_log() as log:
        prediction = program(question="What is the capital of Chile?")
    print("ANSWER", prediction.answer, len(log[0].info["ids"]), log[0].info["within_budget"])
    program.save("qa.json")
    again = KnapsackFewShot.load(dspy.ChainOfThought("question -> answer"), "qa.json")
    print("LOADED", type(again).__name__)
    import sys
    print("MODULES", sorted({m.split(".")[1] for m in sys.modules if m.startswith("knapsack_dspy.")}))
''')


def test_the_base_install_runs_the_any_dspy_program_example(tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    # --no-compile: no .pyc for torch's and DSPy's thousands of modules (a minute of the test; imports compile what
    # they load)
    pip = [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-compile"]
    subprocess.run([*pip, "torch==2.13.0"], check=True, timeout=1800)  # the CPU build, as the README says
    # built from a copy: pip's in-tree build writes build/ and an .egg-info, which must not land in the checkout
    # while the other tests of make test's parallel pass read it
    source = tmp_path / "source"
    shutil.copytree(ROOT / "knapsack_dspy", source / "knapsack_dspy", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, source / name)
    subprocess.run([*pip, str(source)], check=True, timeout=1800)
    listed = subprocess.run([str(python), "-m", "pip", "list", "--format=freeze"], check=True, capture_output=True,
                            text=True).stdout.lower()
    installed = {re.split("==| @ ", line)[0] for line in listed.splitlines()}
    assert "dspy" in installed and "knapsack-dspy" in installed
    # (sympy comes with torch)
    assert not installed & {"matplotlib", "datasets", "mlflow", "ray", "fastapi", "faiss-cpu", "xllamacpp"}

    (tmp_path / "example.py").write_text(EXAMPLE)
    env = {"PATH": f"{venv / 'bin'}:/usr/bin:/bin", "HOME": str(tmp_path), "HF_HUB_OFFLINE": "1",
           "KDSPY_CACHE_DIR": str(tmp_path / "cache")}
    done = subprocess.run([str(python), "example.py"], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = dict(line.split(" ", 1) for line in done.stdout.splitlines() if " " in line)
    answer, chosen, within = lines["ANSWER"].split()
    assert answer == "Santiago" and 1 <= int(chosen) <= 3 and within == "True"  # the default: up to M, each worth it
    assert lines["LOADED"] == "ChainOfThought"
    assert "docqa" not in lines["MODULES"] and "bench" not in lines["MODULES"]

    kdspy = subprocess.run([str(venv / "bin" / "kdspy"), "score", "tatqa", "--gold", "g", "--predictions", "p"],
                           env=env, capture_output=True, text=True, timeout=300)
    assert kdspy.returncode == 2 and "pip install 'knapsack-dspy[bench]'" in kdspy.stderr
