"""The fingerprint of a chat prompt: what a results row keeps instead of the prompt's text, and what a replay of
recorded replies matches on."""

from __future__ import annotations

import hashlib
import json

__all__ = ["messages_sha256"]


def messages_sha256(messages) -> str:
    """sha256 of the messages' roles and contents as canonical JSON."""
    canonical = [{"role": str(m.get("role", "")), "content": m.get("content")} for m in messages or []]
    return hashlib.sha256(json.dumps(canonical, sort_keys=True, ensure_ascii=False).encode()).hexdigest()
