"""Test doubles shared by several test files (real behaviour, just cheaper than the real models)."""

from __future__ import annotations

import gzip
import hashlib
import importlib.util
import json
import os
import re
import sys
from pathlib import Path

import numpy as np
import pytest

#: the shared data (``KDSPY_DATA_DIR``, else ``../shared/data`` beside the checkout)
DATA = Path(os.environ.get("KDSPY_DATA_DIR", Path(__file__).resolve().parents[2] / "shared" / "data"))
#: skips a test module without the TAT-QA dev split
needs_tatqa = pytest.mark.skipif(not (DATA / "tatqa" / "dev_pool.json.gz").exists(), reason="TAT-QA data not found")
needs_gsm8k = pytest.mark.skipif(not (DATA / "gsm8k" / "train.jsonl.gz").exists(), reason="GSM8K data not found")
#: the checkout (its ``benchmarks/`` and ``experiments/`` scripts)
ROOT = Path(__file__).resolve().parents[1]


def write_gsm8k_head(root: Path, problems: int) -> Path:
    """``root/gsm8k/train.jsonl``: the first ``problems`` problems of the shared GSM8K train split, a smaller GSM8K
    (its ``pool`` and ``tune`` parts are cut from them by the same hash as from the whole). Returns ``root``."""
    (root / "gsm8k").mkdir(parents=True, exist_ok=True)
    with gzip.open(DATA / "gsm8k" / "train.jsonl.gz", "rt") as fh:
        (root / "gsm8k" / "train.jsonl").write_text("".join(line for _, line in zip(range(problems), fh, strict=False)))
    return root


def write_tatqa_pool_head(root: Path, contexts: int) -> Path:
    """``root/tatqa``: the first ``contexts`` contexts of TAT-QA's ``dev_pool`` (a smaller pool), beside links to the
    other TAT-QA files of the shared data (``dev_tune``, the official ``dev`` and its sample predictions), unchanged.
    Returns ``root``."""
    folder = root / "tatqa"
    folder.mkdir(parents=True, exist_ok=True)
    with gzip.open(DATA / "tatqa" / "dev_pool.json.gz") as fh:
        (folder / "dev_pool.json").write_text(json.dumps(json.loads(fh.read())[:contexts]))
    for source in sorted((DATA / "tatqa").iterdir()):
        if not source.name.startswith("dev_pool.") and not (folder / source.name).exists():
            (folder / source.name).symlink_to(source)
    return root


def script_module(relative: str):
    """A script of the checkout (``benchmarks/whole_prompt_gate.py``) imported as a module named by its file."""
    path = ROOT / relative
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = module
    spec.loader.exec_module(module)
    return module



class HashingEmbedder:
    """Deterministic bag-of-words embedder (hashed tokens, L2-normalised): no model download, no torch."""

    def __init__(self, dim: int = 64):
        self.dim = dim
        self.model_id = f"hashing-{dim}"
        self.calls = 0

    def encode(self, texts):
        self.calls += 1
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for token in re.findall(r"\w+", str(text).lower()):
                h = int(hashlib.md5(token.encode()).hexdigest(), 16)
                out[row, h % self.dim] += 1.0 if (h >> 8) % 2 else -1.0
            norm = np.linalg.norm(out[row])
            out[row] = out[row] / norm if norm else out[row]
            if not norm:
                out[row, 0] = 1.0
        return out


class WordCounter:
    """Counts whitespace tokens of each message plus 4 per message (like a chat template) and 3 for the
    reply priming: additive per message, as real chat tokenizers are."""

    model = "word-counter"
    context_window = 4096

    def count_messages(self, messages):
        return 3 + sum(4 + len(str(m.get("content", "")).split()) for m in messages)

    def count_text(self, text):
        return len(str(text).split())


class FieldFillingLM:
    """Builds a DSPy ``BaseLM`` that answers any ChatAdapter prompt: it reads the output fields named in the system
    message and fills each (``values[field]`` when given, a callable of the messages, else a short text). For
    DSPy's own optimizers (MIPROv2's proposer, GEPA's reflection), whose signatures a fixed DummyLM cannot know."""

    def __new__(cls, values=None):
        import dspy
        from dspy.clients.base_lm import BaseLM

        class _FieldFilling(BaseLM):
            def __init__(self):
                super().__init__(model="field-filling", model_type="chat", temperature=0.0, max_tokens=1000,
                                 cache=False)
                self.values = dict(values or {})
                self.prompts: list[list[dict]] = []

            def forward(self, prompt=None, messages=None, **kwargs):
                from litellm import Choices, Message, ModelResponse, Usage

                self.prompts.append(list(messages))
                system = messages[0]["content"]
                outputs = system.split("Your output fields are:", 1)[1].split("All interactions", 1)[0]
                names = re.findall(r"\d+\. `(\w+)`", outputs)
                values = {}
                for name in names:
                    value = self.values.get(name, f"some {name}")
                    values[name] = value(messages) if callable(value) else value
                if "Outputs will be a JSON object" in system:  # JSONAdapter (GEPA's reflection uses it)
                    text = json.dumps(values)
                else:
                    text = "\n\n".join([*(f"[[ ## {k} ## ]]\n{v}" for k, v in values.items()),
                                         "[[ ## completed ## ]]"])
                return ModelResponse(choices=[Choices(message=Message(role="assistant", content=text))],
                                     usage=Usage(prompt_tokens=1, completion_tokens=1, total_tokens=2),
                                     model="field-filling")

        del dspy
        return _FieldFilling()


def bench_on_tatqa_slice(suite, out, monkeypatch, counter, pool_size: int = 40, tune_size: int = 3):
    """``run_suite(suite)`` into ``out`` on the first ``pool_size`` TAT-QA ``dev_pool`` questions as the pool and
    the first ``tune_size`` of ``dev_tune`` as the questions (hashing embedder, ``counter`` for every model):
    ``(metrics, rows, report.md's text)``."""
    from knapsack_dspy.bench.execution import runner
    from knapsack_dspy.bench.programs import run_program
    from knapsack_dspy.bench.results.store import load_rows
    from knapsack_dspy.docqa.data import load_examples

    pool = list(load_examples("tatqa", split="dev_pool", data_dir=DATA))[:pool_size]
    tune = list(load_examples("tatqa", split="dev_tune", data_dir=DATA))[:tune_size]
    monkeypatch.setattr(run_program, "load_split", lambda spec, which, data_dir: pool if which == "pool" else tune)
    metrics = runner.run_suite(suite, out, embedder=HashingEmbedder(), token_counter_factory=lambda m: counter,
                               progress=False, log=lambda message: None)
    return metrics, load_rows(out), (out / "report.md").read_text()
