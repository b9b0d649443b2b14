"""How many cores other processes keep busy right now: what the embedded model's decode threads are chosen from.

On a machine whose cores are all taken by other work, llama.cpp's decode threads wait for each other at every
layer's barrier and decoding slows down more than it gains from the second thread (1.5B on 2 cores beside one
busy-loop process: 13.5 tok/s with 2 threads, 17.0 with 1; docs/llm.md, "Threads"). Prompt processing is
compute-bound and gains from every core even then (42.5 vs 37.4 tok/s), so only decode threads follow the load.

``other_busy_cores`` samples the system's CPU time (``/proc/stat``) and this process's own (``os.times``) over a
short interval: the difference is what other processes used. Linux only; elsewhere it answers 0.0 (no other
load known), and so does a ``/proc/stat`` that cannot be read.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable

__all__ = ["decode_threads_for", "other_busy_cores"]

_PROC_STAT = "/proc/stat"


def _system_busy_seconds(path: str = _PROC_STAT) -> float | None:
    """CPU seconds all cores have spent not idle since boot (``/proc/stat``'s first line), None if unreadable."""
    try:
        with open(path, encoding="ascii") as handle:
            first = handle.readline().split()
    except OSError:
        return None
    if not first or first[0] != "cpu" or len(first) < 5:
        return None
    try:
        ticks = [int(x) for x in first[1:]]
    except ValueError:
        return None
    idle = ticks[3] + (ticks[4] if len(ticks) > 4 else 0)  # idle + iowait
    busy = sum(ticks[:8]) - idle  # user nice system idle iowait irq softirq steal (guest is inside user)
    return busy / os.sysconf("SC_CLK_TCK")


def _own_seconds() -> float:
    times = os.times()
    return times.user + times.system


def other_busy_cores(interval: float = 0.3, *, system_seconds: Callable[[], float | None] = _system_busy_seconds,
                     own_seconds: Callable[[], float] = _own_seconds,
                     sleep: Callable[[float], None] = time.sleep) -> float:
    """Cores other processes kept busy during the next ``interval`` seconds (0.0 when it cannot be measured)."""
    before_system, before_own, started = system_seconds(), own_seconds(), time.perf_counter()
    if before_system is None:
        return 0.0
    sleep(interval)
    after_system, after_own = system_seconds(), own_seconds()
    elapsed = time.perf_counter() - started
    if after_system is None or elapsed <= 0:
        return 0.0
    other = (after_system - before_system) - (after_own - before_own)
    return max(0.0, other / elapsed)


def decode_threads_for(cores: int, other_busy: float) -> int:
    """Decode threads for ``cores`` usable cores when other processes keep ``other_busy`` cores busy: the cores
    left free (a core counts as taken from half a core of use on), at least one."""
    if not math.isfinite(other_busy) or other_busy < 0:
        other_busy = 0.0
    taken = math.floor(other_busy + 0.5)
    return max(1, int(cores) - taken)
