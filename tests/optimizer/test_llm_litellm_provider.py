"""LiteLLM's red "Provider List" banner: an ordinary DummyLM session prints none of it, and our provider look-ups
ask LiteLLM only where it cannot fail (``llm/litellm_provider.py``), leaving its process-wide settings alone."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from knapsack_dspy.llm.errors import LLMConfigError
from knapsack_dspy.llm.lm_check import check_lm_config
from knapsack_dspy.llm.token_counter import context_window_of

TESTS = Path(__file__).resolve().parents[1]
ROOT = TESTS.parent

SESSION = """
import dspy
from dspy.utils import DummyLM
import knapsack_dspy
from knapsack_dspy import KnapsackFewShot, selection_log
from helpers import HashingEmbedder

facts = [("What is the capital of France?", "Paris"), ("What is the capital of Peru?", "Lima"),
         ("How many legs does a spider have?", "8"), ("How many legs does an ant have?", "6")]
trainset = [dspy.Example(question=q, answer=a).with_inputs("question") for q, a in facts]
dspy.configure(lm=DummyLM([{"reasoning": "r", "answer": "Santiago"}] * 10))
program = KnapsackFewShot(max_exemplars=2, budget=1024, progress=False, embedder=HashingEmbedder()).compile(
    dspy.ChainOfThought("question -> answer"), trainset=trainset)
with selection_log() as log:
    print("ANSWER", program(question="What is the capital of Chile?").answer, len(log[0].info["ids"]))
"""


def test_a_dummy_lm_session_prints_no_provider_list_banner(tmp_path):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(TESTS)]),
           "KDSPY_CACHE_DIR": str(tmp_path / "cache")}
    out = subprocess.run([sys.executable, "-c", SESSION], cwd=tmp_path, env=env, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "ANSWER Santiago 2" in out.stdout
    assert "Provider List" not in out.stdout + out.stderr


def test_provider_look_ups_print_nothing_and_leave_litellms_settings_alone(capsys):
    import litellm

    from knapsack_dspy.llm.litellm_provider import litellm_provider

    before = litellm.suppress_debug_info
    assert litellm_provider("dummy") is None
    assert litellm_provider("foo/bar") is None
    assert litellm_provider("openai/gpt-4o-mini") == ("gpt-4o-mini", "openai")
    assert litellm_provider("gpt-4o-mini") == ("gpt-4o-mini", "openai")  # a bare name LiteLLM's map knows
    assert litellm_provider("anthropic/claude-new-9") == ("claude-new-9", "anthropic")
    assert litellm_provider("openai/gpt-nonexistent-9") == ("gpt-nonexistent-9", "openai")
    assert context_window_of("dummy") is None
    with pytest.raises(LLMConfigError, match="unknown LLM provider 'foo'"):
        check_lm_config("foo/bar")
    assert litellm.suppress_debug_info == before  # not switched off behind the user's back
    out = capsys.readouterr()
    assert "Provider List" not in out.out + out.err
