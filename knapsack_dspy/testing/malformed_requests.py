"""Malformed requests to ``kdspy serve``: each must get a 4xx with a one-line reason.

Shared by ``tests/harness/test_serve.py`` and ``benchmarks/serve_load.py``; a value is a raw body (``bytes``) or
JSON to send.
"""

from __future__ import annotations


def _deep(levels: int) -> bytes:
    return b'{"question": "q", "table": ' + b"[" * levels + b"]" * levels + b"}"


#: Requests ``kdspy serve`` must answer with a 4xx and a one-line reason.
MALFORMED_REQUESTS = {
    "not JSON": b"{question: what}",
    "cut JSON": b'{"question": "what',
    "not UTF-8": b'{"question": "\xff\xfe"}',
    "empty body": b"",
    "a JSON list": [1, 2, 3],
    "a JSON string": "question",
    "no question": {"table": [], "paragraphs": []},
    "empty question": {"question": ""},
    "blank question": {"question": "   "},
    "question a number": {"question": 7},
    "question null": {"question": None},
    "question a list": {"question": ["what"]},
    "table a string": {"question": "q", "table": "a,b"},
    "table rows not lists": {"question": "q", "table": ["a", "b"]},
    "a cell an object": {"question": "q", "table": [[{"a": 1}]]},
    "a cell a boolean": {"question": "q", "table": [[True]]},
    "paragraphs a string": {"question": "q", "paragraphs": "text"},
    "a paragraph a number": {"question": "q", "paragraphs": [1]},
    "an unknown field": {"question": "q", "tabel": []},
    "a lone surrogate": b'{"question": "what \\ud800 is it"}',
    "a huge integer": b'{"question": "q", "table": [[' + b"9" * 5000 + b"]]}",
    "nested too deeply": _deep(100_000),
    "a question too long": {"question": "word " * 2000},
    "too many cells": {"question": "q", "table": [["1"] * 100] * 600},
    "a huge body": {"question": "q", "paragraphs": ["x" * 2_000_000]},
}
