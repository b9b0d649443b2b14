"""The throughput measurements' defined load: one busy-loop Python process beside the run.

    with busy_loop(True) as spinner:   # spinner: the subprocess.Popen (None when not enabled)
        ...  # measured beside it

The process is this script's own child and is stopped by its pid when the block ends.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys


@contextlib.contextmanager
def busy_loop(enabled: bool = True):
    """One busy-loop process while the block runs (nothing when not ``enabled``)."""
    if not enabled:
        yield None
        return
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        yield spinner
    finally:
        spinner.terminate()
        spinner.wait(timeout=30)
