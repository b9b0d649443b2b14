"""Cheaper compile and ask: the 1.5B model's tokens counted by the 0.5B (one tokenizer), tokenizers compared from
GGUF metadata, rendered demos kept on disk for the same code, compile's imports without LiteLLM."""

from __future__ import annotations

import struct
import subprocess
import sys
from pathlib import Path

import pytest

from knapsack_dspy import disk_memo
from knapsack_dspy.llm import local_server, local_token_counter
from knapsack_dspy.llm.gguf_tokenizer import GGUFError, read_tokenizer_metadata, tokenizer_fingerprint
from knapsack_dspy.llm.local_models import LOCAL_MODELS, same_tokenizer
from knapsack_dspy.llm.local_token_counter import LocalTokenCounter
from knapsack_dspy.llm.local_weights import LocalWeightsError

BIG, SMALL = "local/qwen2.5-coder-1.5b-instruct", "local/qwen2.5-coder-0.5b-instruct"


def _string(text: str) -> bytes:
    data = text.encode()
    return struct.pack("<Q", len(data)) + data


def write_gguf(path: Path, tokens: list[str], template: str, eos: int = 2) -> Path:
    """A GGUF header with a tokenizer (and one unrelated array, which the reader skips)."""
    entries = [
        _string("general.architecture") + struct.pack("<I", 8) + _string("qwen2"),
        _string("tokenizer.ggml.tokens") + struct.pack("<IIQ", 9, 8, len(tokens)) + b"".join(map(_string, tokens)),
        _string("tokenizer.ggml.token_type") + struct.pack("<IIQ", 9, 5, len(tokens))
        + struct.pack(f"<{len(tokens)}i", *([1] * len(tokens))),
        _string("tokenizer.ggml.eos_token_id") + struct.pack("<II", 4, eos),
        _string("tokenizer.chat_template") + struct.pack("<I", 8) + _string(template),
        _string("general.sizes") + struct.pack("<IIQ", 9, 10, 3) + struct.pack("<3Q", 1, 2, 3),
    ]
    path.write_bytes(b"GGUF" + struct.pack("<IQQ", 3, 0, len(entries)) + b"".join(entries))
    return path


def test_gguf_tokenizer_metadata_and_fingerprints(tmp_path):
    a = write_gguf(tmp_path / "a.gguf", ["<s>", "a", "b"], "{{ messages }}")
    metadata = read_tokenizer_metadata(a)
    assert metadata == {"tokenizer.ggml.tokens": ["<s>", "a", "b"], "tokenizer.ggml.token_type": [1, 1, 1],
                        "tokenizer.ggml.eos_token_id": 2, "tokenizer.chat_template": "{{ messages }}"}
    other_template = write_gguf(tmp_path / "b.gguf", ["<s>", "a", "b"], "{{ tools }}")
    other_vocab = write_gguf(tmp_path / "c.gguf", ["<s>", "a", "c"], "{{ messages }}")
    other_eos = write_gguf(tmp_path / "d.gguf", ["<s>", "a", "b"], "{{ messages }}", eos=1)
    assert tokenizer_fingerprint(a) == tokenizer_fingerprint(other_template)  # the template is compared apart
    assert tokenizer_fingerprint(a, with_chat_template=True) != tokenizer_fingerprint(other_template,
                                                                                     with_chat_template=True)
    assert len({tokenizer_fingerprint(p) for p in (a, other_vocab, other_eos)}) == 3
    (tmp_path / "x.gguf").write_bytes(b"GGML" + bytes(20))
    with pytest.raises(GGUFError, match="not a GGUF file"):
        read_tokenizer_metadata(tmp_path / "x.gguf")
    (tmp_path / "cut.gguf").write_bytes(a.read_bytes()[:60])
    with pytest.raises(GGUFError, match="cannot read the GGUF metadata"):
        read_tokenizer_metadata(tmp_path / "cut.gguf")


def test_the_two_embedded_models_share_one_tokenizer_smallest_first():
    big, small = LOCAL_MODELS["qwen2.5-coder-1.5b-instruct"], LOCAL_MODELS["qwen2.5-coder-0.5b-instruct"]
    assert big.tokenizer == small.tokenizer and len(big.tokenizer) == 64
    assert [spec.model for spec in same_tokenizer(BIG)] == [SMALL, BIG]


def test_the_small_model_counts_for_the_big_one_when_it_is_installed(monkeypatch):
    loaded = []

    class Server:
        def apply_template(self, messages):
            return " ".join(m["content"] for m in messages)

        def tokenize(self, text):
            return text.split()

    def fake_server(model, cache_dir=None):
        loaded.append(model)
        return Server()

    monkeypatch.setattr(local_server, "get_local_server", fake_server)
    monkeypatch.setattr(local_token_counter, "check_local_weights", lambda spec, cache_dir=None: None)
    counter = LocalTokenCounter(BIG)
    assert counter.counting_model() == SMALL
    assert counter.count_text("one two three") == 3 and loaded == [SMALL]
    assert counter.model == BIG and counter.context_window == 4096  # still the big model's counter

    def small_missing(spec, cache_dir=None):
        if spec.model == SMALL:
            raise LocalWeightsError("not installed")

    monkeypatch.setattr(local_token_counter, "check_local_weights", small_missing)
    assert LocalTokenCounter(BIG).counting_model() == BIG  # the model itself when the small one is absent


def test_the_package_fingerprint_follows_every_source_file(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "a.py").write_text("x = 1\n")
    first = disk_memo.package_fingerprint(str(tmp_path / "pkg"))
    disk_memo.package_fingerprint.cache_clear()
    assert disk_memo.package_fingerprint(str(tmp_path / "pkg")) == first
    (tmp_path / "pkg" / "sub").mkdir()
    (tmp_path / "pkg" / "sub" / "b.py").write_text("y = 2\n")
    disk_memo.package_fingerprint.cache_clear()
    second = disk_memo.package_fingerprint(str(tmp_path / "pkg"))
    (tmp_path / "pkg" / "a.py").write_text("x = 2\n")
    disk_memo.package_fingerprint.cache_clear()
    assert len({first, second, disk_memo.package_fingerprint(str(tmp_path / "pkg"))}) == 3
    disk_memo.package_fingerprint.cache_clear()


def test_a_disk_memo_serves_another_process_and_keeps_each_codes_values_apart(tmp_path, monkeypatch):
    monkeypatch.setenv("KDSPY_CACHE_DIR", str(tmp_path))
    calls = []
    first = disk_memo.DiskMemo("things")
    assert first.get_or_compute("k", lambda: calls.append(1) or {"v": 1}) == {"v": 1}
    assert disk_memo.DiskMemo("things").get_or_compute("k", lambda: calls.append(1) or {"v": 2}) == {"v": 1}
    assert calls == [1]  # the second memo (as a new process would) read it from disk
    monkeypatch.setattr(disk_memo, "package_fingerprint", lambda root=None: "another-code-version")
    assert disk_memo.DiskMemo("things").get_or_compute("k", lambda: {"v": 3}) == {"v": 3}
    assert len(list((tmp_path / "things").iterdir())) == 2


def test_a_rendered_demo_comes_from_disk_in_a_new_process(tmp_path, monkeypatch):
    from helpers import HashingEmbedder

    from knapsack_dspy.docqa import tasks
    from knapsack_dspy.docqa.data import load_examples
    from knapsack_dspy.docqa.pipelines import pipeline

    monkeypatch.setenv("KDSPY_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(pipeline, "_rendered_demos_on_disk", disk_memo.DiskMemo("rendered_demos"))
    example = load_examples("tatqa", split="dev_pool")[0]
    program = tasks.build_pipeline("tatqa", "pot", route=None, embedder=HashingEmbedder())
    pipeline._rendered_demos.clear()  # an earlier test may have rendered it in this process: then nothing is written
    first = program.render_demo(example)
    pipeline._rendered_demos.clear()  # what a new process starts with
    monkeypatch.setattr(pipeline._Pipeline, "render_demo", lambda *a, **k: pytest.fail("rendered again"))
    assert program.render_demo(example) == first


def test_compiling_imports_no_litellm():
    code = ("import sys, knapsack_dspy.cli.compile, knapsack_dspy.teleprompt.knapsack_few_shot, "
            "knapsack_dspy.docqa.pipelines.pipeline, knapsack_dspy.llm.token_counter, knapsack_dspy.llm.call_counter; "
            "print('litellm' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).resolve().parents[2])
    assert out.stdout.strip() == "False"
