"""The cores this process may use, and how many of them other processes keep busy right now: what the embedded
model's threads are chosen from.

On a machine whose cores are all taken by other work, llama.cpp's decode threads wait for each other at every
layer's barrier and decoding slows down more than it gains from the second thread (1.5B on 2 cores beside one
busy-loop process: 13.5 tok/s with 2 threads, 17.0 with 1; docs/llm.md, "Threads"). Prompt processing is
compute-bound and gains from every core even then (42.5 vs 37.4 tok/s), so only decode threads follow the load.

``usable_cores``: the CPUs of this process's affinity mask, capped by a cgroup CPU quota (a container limited
with ``--cpus`` sees every CPU of the host). ``other_busy_cores`` samples the busy time of those CPUs
(``/proc/stat``'s per-CPU lines) and this process's own time (``os.times``) over a short interval: the
difference is what other processes used there, at most the usable cores. Linux only; elsewhere, or when
``/proc/stat`` cannot be read, it answers 0.0 (no other load known). A measurement is reused for a few seconds,
so loading two models in a row samples once.
"""

from __future__ import annotations

import math
import os
import threading
import time
from collections.abc import Callable, Collection

__all__ = ["decode_threads_for", "other_busy_cores", "usable_cores"]

_PROC_STAT = "/proc/stat"
_CGROUP_V2_MAX = "/sys/fs/cgroup/cpu.max"
_CGROUP_V1 = ("/sys/fs/cgroup/cpu/cpu.cfs_quota_us", "/sys/fs/cgroup/cpu/cpu.cfs_period_us")
REUSE_SECONDS = 10.0  # a measurement younger than this is answered again


def _affinity() -> set[int] | None:
    try:
        return set(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        return None


def _read_first_line(path: str) -> str | None:
    try:
        with open(path, encoding="ascii") as handle:
            return handle.readline().strip()
    except (OSError, UnicodeDecodeError):
        return None


def cgroup_cpu_limit(v2_path: str = _CGROUP_V2_MAX, v1_paths: tuple[str, str] = _CGROUP_V1) -> float | None:
    """CPUs a cgroup quota allows this process (``quota / period``), None when there is no quota."""
    line = _read_first_line(v2_path)
    if line:
        parts = line.split()
        if len(parts) == 2 and parts[0] != "max":
            try:
                quota, period = float(parts[0]), float(parts[1])
            except ValueError:
                return None
            return quota / period if quota > 0 and period > 0 else None
        return None
    quota_line, period_line = (_read_first_line(path) for path in v1_paths)
    try:
        quota, period = float(quota_line or "-1"), float(period_line or "0")
    except ValueError:
        return None
    return quota / period if quota > 0 and period > 0 else None


def usable_cores(*, affinity: Callable[[], set[int] | None] = _affinity,
                 quota: Callable[[], float | None] = cgroup_cpu_limit) -> int:
    """Cores this process may run on: its affinity mask, capped by a cgroup CPU quota (rounded up), at least 1."""
    cpus = affinity()
    cores = len(cpus) if cpus else (os.cpu_count() or 1)
    limit = quota()
    if limit is not None:
        cores = min(cores, math.ceil(limit))
    return max(1, cores)


def _busy_seconds(cpus: Collection[int] | None = None, path: str = _PROC_STAT) -> float | None:
    """CPU seconds spent not idle since boot: by the CPUs ``cpus`` (``/proc/stat``'s ``cpuN`` lines), or by the
    whole machine (its first line) when ``cpus`` is None or the per-CPU lines do not name them all (a container
    may renumber them). None when the file cannot be read."""
    try:
        with open(path, encoding="ascii") as handle:
            lines = [line.split() for line in handle if line.startswith("cpu")]
    except (OSError, UnicodeDecodeError):
        return None
    per_cpu, total = {}, None
    for fields in lines:
        try:
            ticks = [int(x) for x in fields[1:9]]
        except ValueError:
            continue
        if len(ticks) < 4:
            continue
        idle = ticks[3] + (ticks[4] if len(ticks) > 4 else 0)  # idle + iowait
        busy = sum(ticks) - idle  # user nice system idle iowait irq softirq steal (guest is inside user)
        if fields[0] == "cpu":
            total = busy
        elif fields[0][3:].isdigit():
            per_cpu[int(fields[0][3:])] = busy
    if cpus is not None and cpus and all(cpu in per_cpu for cpu in cpus):
        return sum(per_cpu[cpu] for cpu in cpus) / os.sysconf("SC_CLK_TCK")
    return None if total is None else total / os.sysconf("SC_CLK_TCK")


def _own_seconds() -> float:
    times = os.times()
    return times.user + times.system


_last: tuple[float, float] | None = None  # (when, cores) of the last measurement
_last_lock = threading.Lock()


def other_busy_cores(interval: float = 0.3, *, system_seconds: Callable[[], float | None] | None = None,
                     own_seconds: Callable[[], float] = _own_seconds,
                     sleep: Callable[[float], None] = time.sleep, cores: int | None = None,
                     reuse: bool = True) -> float:
    """Cores (of the usable ones) other processes kept busy during the next ``interval`` seconds, at most
    ``cores`` (default ``usable_cores()``); 0.0 when it cannot be measured. With ``reuse``, a measurement of the
    last ``REUSE_SECONDS`` is answered again."""
    global _last
    if reuse:
        with _last_lock:
            if _last is not None and time.monotonic() - _last[0] < REUSE_SECONDS:
                return _last[1]
    if system_seconds is None:
        cpus = _affinity()
        system_seconds = lambda: _busy_seconds(cpus)  # noqa: E731
    limit = usable_cores() if cores is None else cores
    before_system, before_own, started = system_seconds(), own_seconds(), time.perf_counter()
    if before_system is None:
        return 0.0
    sleep(interval)
    after_system, after_own = system_seconds(), own_seconds()
    elapsed = time.perf_counter() - started
    if after_system is None or elapsed <= 0:
        return 0.0
    other = (after_system - before_system) - (after_own - before_own)
    measured = min(float(limit), max(0.0, other / elapsed))
    if reuse:
        with _last_lock:
            _last = (time.monotonic(), measured)
    return measured


def decode_threads_for(cores: int, other_busy: float) -> int:
    """Decode threads for ``cores`` usable cores when other processes keep ``other_busy`` cores busy: the cores
    left free (a core counts as taken from half a core of use on), at least one."""
    if not math.isfinite(other_busy) or other_busy < 0:
        other_busy = 0.0
    taken = math.floor(other_busy + 0.5)
    return max(1, int(cores) - taken)
