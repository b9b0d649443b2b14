"""A GGUF model's byte-level BPE tokenizer in process (a tiktoken encoding), to count many prompts fast.

llama.cpp's server tokenizes roughly 1 MB of text per CPU-second: a TAT-QA demo's prompt (~1.7 KB) takes it ~2.7 ms
of CPU, which is most of what measuring a pool's token costs takes once formatting and requests are batched.
A GGUF whose tokenizer is GPT-2-style byte-level BPE (``tokenizer.ggml.model`` ``gpt2``) with a pre-tokenizer
whose pattern is known here (:data:`PRE_TOKENIZER_PATTERNS`: llama.cpp's ``qwen2``) is the same tokenizer as a
tiktoken ``Encoding`` built from its vocabulary -- the normal tokens (byte-level text decoded to bytes) ranked by
their ids, the control and user-defined tokens as special tokens, found in the text as llama.cpp's
``parse_special`` finds them -- provided merging the pair of lowest rank (tiktoken) is merging the pair of lowest
merge index (llama.cpp): :func:`bpe_encoding` checks that the merges' results have increasing ids and returns
``None`` otherwise. tiktoken encodes the same prompts ~7x faster, in threads.

The counter does not take this on trust (``local_token_counter.LocalTokenCounter``): it compares the encoding's counts
with the server's on a sample of its first batch and on a few prompts of every batch, and a difference switches it
off (a warning; the server counts from then on). Measured identical on every demo prompt of the real TAT-QA and
FinQA pools (``tests/optimizer/test_pool_measurement_batches.py``).
"""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Any

from knapsack_dspy.llm.gguf_tokenizer import read_tokenizer_metadata

__all__ = ["PRE_TOKENIZER_PATTERNS", "bpe_encoding"]

#: llama.cpp's pre-tokenizer regexes (``llama-vocab.cpp``) by ``tokenizer.ggml.pre``, in tiktoken's syntax.
PRE_TOKENIZER_PATTERNS = {
    "qwen2": r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+"
             r"|\s+(?!\S)|\s+",
}
_NORMAL, _CONTROL, _USER_DEFINED = 1, 3, 4  # llama.cpp's token types


def _byte_decoder() -> dict[str, int]:
    """GPT-2's byte-level alphabet: each byte's printable stand-in character -> the byte."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("\u00a1"), ord("\u00ac") + 1),
                 *range(ord("\u00ae"), ord("\u00ff") + 1)]
    chars, extra = list(printable), 0
    for byte in range(256):
        if byte not in printable:
            printable.append(byte)
            chars.append(256 + extra)
            extra += 1
    return {chr(c): b for b, c in zip(printable, chars, strict=True)}


def _merges_follow_ids(ids: dict[str, int], merges: list[str]) -> bool:
    last = -1
    for merge in merges:
        left, _, right = merge.partition(" ")
        merged = ids.get(left + right)
        if merged is None or merged <= last:
            return False
        last = merged
    return True


@functools.lru_cache(maxsize=4)
def _encoding(path: str, size: int, mtime_ns: int) -> Any:
    import tiktoken  # LiteLLM's dependency too; loaded when a local model's pool is measured

    meta = read_tokenizer_metadata(path)
    pattern = PRE_TOKENIZER_PATTERNS.get(str(meta.get("tokenizer.ggml.pre")))
    if meta.get("tokenizer.ggml.model") != "gpt2" or pattern is None:
        return None
    tokens, types = meta.get("tokenizer.ggml.tokens") or [], meta.get("tokenizer.ggml.token_type") or []
    if len(tokens) != len(types) or not _merges_follow_ids({t: i for i, t in enumerate(tokens)},
                                                            meta.get("tokenizer.ggml.merges") or []):
        return None
    decoder = _byte_decoder()
    ranks, special = {}, {}
    for i, (token, kind) in enumerate(zip(tokens, types, strict=True)):
        if kind == _NORMAL:
            try:
                ranks[bytes(decoder[ch] for ch in token)] = i
            except KeyError:  # not byte-level text
                return None
        elif kind in (_CONTROL, _USER_DEFINED):
            special[token] = i
    return tiktoken.Encoding(f"gguf-{Path(path).stem}", pat_str=pattern, mergeable_ranks=ranks,
                             special_tokens=special)


def bpe_encoding(path: str | os.PathLike) -> Any:
    """The tiktoken ``Encoding`` of the GGUF file's tokenizer (see the module docstring), or ``None`` when it is
    not a byte-level BPE this module can reproduce. Built once per file."""
    stat = os.stat(path)
    return _encoding(os.fspath(path), stat.st_size, stat.st_mtime_ns)
