"""A GGUF's byte-level BPE tokenizer in process (``llm/bpe_tokenizer.py``): built from the GGUF metadata as a
tiktoken encoding when it can reproduce llama.cpp's tokenization (GPT-2 byte-level BPE, a known pre-tokenizer,
merges in id order), else ``None``. On the real model it counts every demo prompt of the real pools as the
server does (``tests/optimizer/test_pool_measurement_batches.py``, slow)."""

from __future__ import annotations

import struct
from pathlib import Path

from knapsack_dspy.llm.bpe_tokenizer import _byte_decoder, bpe_encoding

_STRING, _ARRAY, _INT32 = 8, 9, 5


def _string(text: str) -> bytes:
    data = text.encode()
    return struct.pack("<Q", len(data)) + data


def write_gguf(path: Path, metadata: dict) -> Path:
    """A GGUF header holding ``metadata`` (str values, lists of str or of int)."""
    entries = []
    for key, value in metadata.items():
        if isinstance(value, str):
            entries.append(_string(key) + struct.pack("<I", _STRING) + _string(value))
        elif value and isinstance(value[0], str):
            entries.append(_string(key) + struct.pack("<IIQ", _ARRAY, _STRING, len(value))
                           + b"".join(map(_string, value)))
        else:
            entries.append(_string(key) + struct.pack("<IIQ", _ARRAY, _INT32, len(value))
                           + struct.pack(f"<{len(value)}i", *value))
    path.write_bytes(b"GGUF" + struct.pack("<IQQ", 3, 0, len(entries)) + b"".join(entries))
    return path


def byte_level(text: str) -> str:
    by_byte = {b: ch for ch, b in _byte_decoder().items()}
    return "".join(by_byte[b] for b in text.encode())


def vocabulary(merges=("a b", "ab c"), model="gpt2", pre="qwen2") -> dict:
    tokens = [byte_level(bytes([b]).decode("latin-1")) if b < 128 else
              next(ch for ch, v in _byte_decoder().items() if v == b) for b in range(256)]
    tokens += ["ab", "abc", "<|end|>"]
    return {"tokenizer.ggml.model": model, "tokenizer.ggml.pre": pre, "tokenizer.ggml.tokens": tokens,
            "tokenizer.ggml.token_type": [1] * 258 + [3], "tokenizer.ggml.merges": list(merges)}


def test_a_byte_level_bpe_becomes_an_encoding_with_its_ids_and_special_tokens(tmp_path):
    encoding = bpe_encoding(write_gguf(tmp_path / "t.gguf", vocabulary()))
    space = 32
    assert encoding.encode("abc abc<|end|>ab", allowed_special="all") == [257, space, 257, 258, 256]
    assert encoding.encode("xé") == [ord("x"), *"é".encode()]  # bytes without a merge stay bytes


def test_tokenizers_it_cannot_reproduce_give_none(tmp_path):
    assert bpe_encoding(write_gguf(tmp_path / "spm.gguf", vocabulary(model="llama"))) is None
    assert bpe_encoding(write_gguf(tmp_path / "pre.gguf", vocabulary(pre="some-new-regex"))) is None
    # "ab c" listed before "a b": llama.cpp's merge order is not the ids' order tiktoken merges by
    assert bpe_encoding(write_gguf(tmp_path / "order.gguf", vocabulary(merges=("ab c", "a b")))) is None
