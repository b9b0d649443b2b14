"""The README's first Python example (any DSPy program, compiled by KnapsackFewShot) runs as written with a stand-in
LM and embedder (fast; the embedded 0.5B model and the real embedder run it in a fresh process in
tests/harness/test_readme_blocks.py)."""

import re
from pathlib import Path

import dspy
from dspy.utils import DummyLM
from helpers import HashingEmbedder

ROOT = Path(__file__).resolve().parents[2]


def readme_example() -> str:
    """The first ```python block of README.md."""
    return re.search(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), re.DOTALL).group(1)


def test_the_first_example_is_a_plain_chain_of_thought():
    code = readme_example()
    assert 'KnapsackFewShot(' in code and 'dspy.ChainOfThought("question -> answer")' in code
    assert 'dspy.LM("local/qwen2.5-coder-0.5b-instruct"' in code


def test_the_readme_example_runs_with_a_stand_in_lm(tmp_path, monkeypatch, capsys):
    from knapsack_dspy.teleprompt import knapsack_few_shot

    lm = DummyLM([{"reasoning": "Like the capitals above.", "answer": "Santiago"}] * 5)
    monkeypatch.setattr(dspy, "LM", lambda *args, **kwargs: lm)
    monkeypatch.setattr(knapsack_few_shot, "TextEmbedder", HashingEmbedder)
    monkeypatch.chdir(tmp_path)
    previous = dspy.settings.lm
    names = {}
    try:
        exec(compile(readme_example(), "README.md", "exec"), names)
    finally:
        dspy.configure(lm=previous)
    out = capsys.readouterr().out
    assert "Provider List" not in out  # LiteLLM's banner about the model "dummy" (issue 22, item 11)
    line = out.strip().splitlines()[-1]
    assert line.split()[0] == "Santiago" and line.endswith("True")
    prompt = lm.history[-1]["messages"]
    chosen = names["log"][0].info["ids"]  # the default prices a demo's tokens: up to max_exemplars=3 of them
    assert 1 <= len(chosen) <= 3 and sum(m["role"] == "assistant" for m in prompt) == len(chosen)
    assert str(chosen) in line
    assert (tmp_path / "qa.json").exists()

