"""The tokenizer a GGUF file carries, read from its metadata (no model loaded), and its fingerprint.

Two embedded models whose tokenizers are identical -- the same vocabulary, token types, merges, special token ids
and pre-tokenizer (the ``tokenizer.ggml.*`` entries) -- give the same token ids for any text, so the smaller one can
count tokens for the larger (``local_models.LocalModelSpec.tokenizer``, ``token_counter``). The chat template
(``tokenizer.chat_template``) is compared apart: the Qwen2.5-Coder 0.5B and 1.5B templates differ only inside
the tool-calling branch (``{`` written as ``{{`` in one string), which prompts without tools never reach.
``benchmarks/tokenizer_identity.py`` checks both and compares the two models' token ids on every pool prompt.

The GGUF header (https://github.com/ggml-org/ggml/blob/master/docs/gguf.md): magic ``GGUF``, version, tensor count,
metadata count, then each metadata entry as key, value type and value, all little-endian.
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
from collections.abc import Callable
from typing import Any, BinaryIO

from knapsack_dspy.errors import KnapsackDspyError

__all__ = ["GGUFError", "metadata_fingerprint", "read_metadata", "read_tokenizer_metadata", "tokenizer_fingerprint"]

# value types: uint8, int8, uint16, int16, uint32, int32, float32, bool, string, array, uint64, int64, float64
_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
_STRING, _ARRAY = 8, 9
#: The metadata that decides how text becomes token ids (and how chat messages become text).
TOKENIZER_KEYS_PREFIX = "tokenizer."
_MAX_STRING = 1 << 26  # 64 MiB: a chat template or a token is far shorter


class GGUFError(KnapsackDspyError, ValueError):
    """The file is not a GGUF file this reader understands (the message names the file)."""


def _read(handle: BinaryIO, fmt: str):
    size = struct.calcsize(fmt)
    data = handle.read(size)
    if len(data) != size:
        raise EOFError("unexpected end of file")
    return struct.unpack(fmt, data)[0]


def _string(handle: BinaryIO) -> str:
    length = _read(handle, "<Q")
    if length > _MAX_STRING:
        raise ValueError(f"a string of {length} bytes")
    data = handle.read(length)
    if len(data) != length:
        raise EOFError("unexpected end of file")
    return data.decode("utf-8", "surrogateescape")


def _value(handle: BinaryIO, kind: int, keep: bool) -> Any:
    if kind in _SCALARS:
        return _read(handle, _SCALARS[kind])
    if kind == _STRING:
        return _string(handle)
    if kind == _ARRAY:
        item_kind, count = _read(handle, "<I"), _read(handle, "<Q")
        if item_kind in _SCALARS and not keep:  # skip fixed-size arrays we do not need
            handle.seek(count * struct.calcsize(_SCALARS[item_kind]), os.SEEK_CUR)
            return None
        return [_value(handle, item_kind, keep) for _ in range(count)]
    raise ValueError(f"unknown metadata value type {kind}")


def read_tokenizer_metadata(path: str | os.PathLike) -> dict[str, Any]:
    """The ``tokenizer.*`` metadata entries of a GGUF file (vocabulary, merges, token types, special ids, chat
    template, ...). Reads only the header."""
    return read_metadata(path, lambda key: key.startswith(TOKENIZER_KEYS_PREFIX))


def read_metadata(path: str | os.PathLike, wanted: Callable[[str], bool]) -> dict[str, Any]:
    """The metadata entries of a GGUF file whose key ``wanted`` accepts. Reads only the header."""
    try:
        with open(path, "rb") as handle:
            if handle.read(4) != b"GGUF":
                raise GGUFError(f"{os.fspath(path)!r} is not a GGUF file (no GGUF magic)")
            version = _read(handle, "<I")
            if version < 2:
                raise GGUFError(f"{os.fspath(path)!r}: GGUF version {version} is not supported")
            _read(handle, "<Q")  # tensors
            entries = _read(handle, "<Q")
            out: dict[str, Any] = {}
            for _ in range(entries):
                key = _string(handle)
                keep = wanted(key)
                value = _value(handle, _read(handle, "<I"), keep)
                if keep:
                    out[key] = value
            return out
    except (EOFError, ValueError, struct.error) as exc:
        if isinstance(exc, GGUFError):
            raise
        raise GGUFError(f"{os.fspath(path)!r}: cannot read the GGUF metadata ({exc})") from None


def tokenizer_fingerprint(path: str | os.PathLike, *, with_chat_template: bool = False) -> str:
    """sha256 of the file's ``tokenizer.ggml.*`` metadata (canonical JSON; with ``tokenizer.chat_template`` too
    when asked): equal fingerprints, identical tokenizers."""
    return metadata_fingerprint(read_tokenizer_metadata(path), with_chat_template=with_chat_template)


def metadata_fingerprint(metadata: dict[str, Any], *, with_chat_template: bool = False) -> str:
    """:func:`tokenizer_fingerprint` of metadata already read (other keys than ``tokenizer.*`` are left out)."""
    metadata = {key: value for key, value in metadata.items()
                if key.startswith(TOKENIZER_KEYS_PREFIX + "ggml.")
                or (with_chat_template and key.startswith(TOKENIZER_KEYS_PREFIX))}
    canonical = json.dumps(metadata, sort_keys=True, ensure_ascii=False, default=repr)
    return hashlib.sha256(canonical.encode("utf-8", "surrogateescape")).hexdigest()
