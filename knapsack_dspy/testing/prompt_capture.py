"""Shared by the throughput scripts (``benchmarks/``, ``experiments/throughput/``): compile a run's program
LM-free and capture the exact prompt a question sends.

``compiled(mode, ...)`` compiles (or reloads from ``out_dir``) the program of a ``RunSpec`` the way ``kdspy bench``
does; ``first_prompt(program, example)`` runs the program with an LM that records the messages of its first call
and stops there (no model is called), so the prompt is rendered by the code that would send it: selection, demo
order, adapter formatting. ``token_ids(messages)`` gives the embedded model's token ids of the templated prompt
(counted by the 0.5B model, whose tokenizer is the 1.5B's: ``LocalModelSpec.tokenizer``).
"""

from __future__ import annotations

import warnings
from dataclasses import replace
from pathlib import Path

import dspy

from knapsack_dspy.bench.programs.run_program import compile_program, load_split, validation_slice
from knapsack_dspy.bench.suites.suite import RunSpec
from knapsack_dspy.llm.local_server import get_local_server
from knapsack_dspy.llm.token_counter import get_token_counter

MODEL = "local/qwen2.5-coder-1.5b-instruct"
#: The issue's comparison: TAT-QA dev_pool -> dev_tune, program of thought, budget 2,048, M = 4.
BASE_SPEC = RunSpec(dataset="tatqa", pipeline="pot", budget=2048, max_exemplars=4,
                    attributes=("modality", "answer_type"), model=MODEL)
#: selector of each mode the throughput measurements compare
MODE_SELECTORS = {"seer": "seer", "hybrid": "hybrid", "static": "static"}


class Captured(Exception):
    """Not an error: how the first call's messages leave the program."""

    def __init__(self, messages):
        super().__init__("prompt captured")
        self.messages = messages


class CaptureLM(dspy.BaseLM):
    """Raises ``Captured`` with the messages of the first call: nothing is sent anywhere."""

    def __init__(self):
        super().__init__(model="capture/prompt", model_type="chat", cache=False)

    def forward(self, prompt=None, messages=None, **kwargs):
        raise Captured(messages if messages is not None else [{"role": "user", "content": prompt}])


def spec_for(mode: str, **settings) -> RunSpec:
    return replace(BASE_SPEC, selector=MODE_SELECTORS[mode], **settings)


def compiled(spec: RunSpec, out_dir: str | Path, data_dir=None):
    """(program, eval examples) of ``spec``: compiled once into ``out_dir/programs``, reloaded after."""
    pool = load_split(spec, "pool", data_dir)
    evalset = load_split(spec, "eval", data_dir)
    program, _ = compile_program(spec, pool, validation_slice(pool, spec), Path(out_dir),
                                 token_counter=get_token_counter(spec.model), progress=False)
    return program, list(evalset)


def first_prompt(program, example) -> list[dict]:
    """The messages of the first LM call ``program`` makes for ``example`` (rendered, not sent)."""
    try:
        with warnings.catch_warnings(), dspy.context(lm=CaptureLM()):
            # DSPy 3.4 notes that BaseLM.forward subclasses are its old interface (CaptureLM is one): not news here
            warnings.filterwarnings("ignore", category=DeprecationWarning, message=".*BaseLM.forward.*")
            program(**program.example_inputs(example))
    except Captured as captured:
        return [{"role": m.get("role"), "content": m.get("content")} for m in captured.messages]
    raise RuntimeError(f"{example.id}: the program made no LM call")


def token_ids(messages: list[dict], model: str = MODEL) -> list[int]:
    """The token ids the embedded model processes for ``messages`` (chat template applied)."""
    server = get_local_server(get_token_counter(model).counting_model())
    return server.tokenize(server.apply_template(messages))
