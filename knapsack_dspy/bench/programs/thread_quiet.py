"""``quiet_in_this_thread()``: what the calling thread prints (``print``, a progress bar on stderr) is dropped while
the block runs; other threads print as usual.

``contextlib.redirect_stdout`` swaps the process-wide ``sys.stdout``: two threads that overlap (``kdspy bench
--workers N``) restore each other's replacement, and the process can be left printing into a discarded buffer.
Here ``sys.stdout`` / ``sys.stderr`` are wrapped once (and again if something swaps them later) in a stream that
drops the writes of threads inside the block and passes every other write through; nothing is restored, so
overlapping blocks cannot undo one another.
"""

from __future__ import annotations

import contextlib
import sys
import threading
from collections.abc import Iterator

__all__ = ["quiet_in_this_thread"]

_state = threading.local()
_install_lock = threading.Lock()


class _ThreadQuietStream:
    """A text stream that drops writes from threads inside ``quiet_in_this_thread``; otherwise ``stream``."""

    def __init__(self, stream):
        self.stream = stream

    def write(self, text: str) -> int:
        if getattr(_state, "depth", 0):
            return len(text)
        return self.stream.write(text)

    def flush(self) -> None:
        if not getattr(_state, "depth", 0):
            self.stream.flush()

    def __getattr__(self, name):  # encoding, isatty, fileno, ...: the wrapped stream's
        return getattr(self.stream, name)


def _install() -> None:
    with _install_lock:
        for name in ("stdout", "stderr"):
            stream = getattr(sys, name)
            if stream is not None and not isinstance(stream, _ThreadQuietStream):
                setattr(sys, name, _ThreadQuietStream(stream))


@contextlib.contextmanager
def quiet_in_this_thread() -> Iterator[None]:
    _install()
    _state.depth = getattr(_state, "depth", 0) + 1
    try:
        yield
    finally:
        _state.depth -= 1
