"""Decode threads follow the other processes' CPU load (``llm/cpu_load.py``, ``local_server._default_threads``)."""

import subprocess
import sys
import time

import pytest

from knapsack_dspy.llm import cpu_load, local_server
from knapsack_dspy.llm.cpu_load import decode_threads_for, other_busy_cores


def _clock(values):
    values = list(values)
    return lambda: values.pop(0)


def test_other_cores_are_the_systems_busy_time_minus_this_processs():
    # the CPUs spent 1.5 CPU-seconds, this process 0.5 of them, over the interval: one other core busy
    system = _clock([100.0, 101.5])
    own = _clock([10.0, 10.5])
    started = time.perf_counter()
    seen = other_busy_cores(1.0, system_seconds=system, own_seconds=own, sleep=lambda s: time.sleep(0.05),
                            cores=64, reuse=False)
    elapsed = time.perf_counter() - started
    assert 1.0 / elapsed <= seen <= 1.0 / 0.05  # one CPU-second over the time that really passed


def test_unreadable_system_time_means_no_known_load():
    assert other_busy_cores(0.0, system_seconds=lambda: None, own_seconds=lambda: 0.0, sleep=lambda s: None,
                            cores=2, reuse=False) == 0.0
    second_fails = _clock([5.0, None])
    assert other_busy_cores(0.0, system_seconds=second_fails, own_seconds=lambda: 0.0,
                            sleep=lambda s: time.sleep(0.001), cores=2, reuse=False) == 0.0


def test_this_process_using_more_than_the_system_saw_is_not_negative_load():
    assert other_busy_cores(0.0, system_seconds=_clock([1.0, 1.1]), own_seconds=_clock([0.0, 0.3]),
                            sleep=lambda s: time.sleep(0.001), cores=2, reuse=False) == 0.0


def test_other_load_is_at_most_the_usable_cores_and_is_reused_for_a_while(monkeypatch):
    monkeypatch.setattr(cpu_load, "_last", None)
    busy = other_busy_cores(0.0, system_seconds=_clock([0.0, 30.0]), own_seconds=lambda: 0.0,
                            sleep=lambda s: time.sleep(0.01), cores=2)
    assert busy == 2.0  # a busy host's other CPUs are not ours to count
    again = other_busy_cores(0.0, system_seconds=lambda: pytest.fail("measured again"), cores=2)
    assert again == 2.0
    monkeypatch.setattr(cpu_load, "_last", (time.monotonic() - cpu_load.REUSE_SECONDS - 1, 2.0))
    assert other_busy_cores(0.0, system_seconds=_clock([0.0, 0.0]), own_seconds=lambda: 0.0,
                            sleep=lambda s: time.sleep(0.01), cores=2) == 0.0  # too old: measured again


def test_usable_cores_follow_the_affinity_mask_and_a_cgroup_quota():
    assert cpu_load.usable_cores(affinity=lambda: {0, 1, 2, 3}, quota=lambda: None) == 4
    assert cpu_load.usable_cores(affinity=lambda: {0, 1, 2, 3}, quota=lambda: 1.5) == 2
    assert cpu_load.usable_cores(affinity=lambda: {5}, quota=lambda: 8.0) == 1
    assert cpu_load.usable_cores(affinity=lambda: {0, 1}, quota=lambda: 0.2) == 1


def test_cgroup_quota_files(tmp_path):
    v2, quota, period = tmp_path / "cpu.max", tmp_path / "quota", tmp_path / "period"
    missing = (str(tmp_path / "no-quota"), str(tmp_path / "no-period"))
    v2.write_text("max 100000\n")
    assert cpu_load.cgroup_cpu_limit(str(v2), missing) is None
    v2.write_text("250000 100000\n")
    assert cpu_load.cgroup_cpu_limit(str(v2), missing) == 2.5
    quota.write_text("-1\n")
    period.write_text("100000\n")
    assert cpu_load.cgroup_cpu_limit(str(tmp_path / "none"), (str(quota), str(period))) is None
    quota.write_text("50000\n")
    assert cpu_load.cgroup_cpu_limit(str(tmp_path / "none"), (str(quota), str(period))) == 0.5
    assert cpu_load.cgroup_cpu_limit(str(tmp_path / "none"), missing) is None


@pytest.mark.parametrize(("cores", "other", "threads"), [
    (2, 0.0, 2), (2, 0.3, 2), (2, 0.5, 1), (2, 1.0, 1), (2, 3.7, 1), (8, 2.2, 6), (8, 2.6, 5), (1, 0.0, 1),
    (2, float("nan"), 2), (2, -1.0, 2)])
def test_decode_threads_are_the_cores_left_free(cores, other, threads):
    assert decode_threads_for(cores, other) == threads


def test_proc_stat_parsing(tmp_path):
    stat = tmp_path / "stat"
    # user nice system idle iowait irq softirq steal guest guest_nice, in clock ticks
    stat.write_text("cpu  100 0 50 1000 30 5 5 0 0 0\n"
                    "cpu0 60 0 20 500 10 5 0 0 0 0\n"
                    "cpu1 40 0 30 500 20 0 5 0 0 0\n"
                    "intr 1 2 3\n")
    ticks = cpu_load.os.sysconf("SC_CLK_TCK")
    assert cpu_load._busy_seconds(None, str(stat)) == pytest.approx(160 / ticks)  # the whole machine
    assert cpu_load._busy_seconds({1}, str(stat)) == pytest.approx(75 / ticks)  # only the CPUs we may use
    assert cpu_load._busy_seconds({0, 7}, str(stat)) == pytest.approx(160 / ticks)  # cpu7 unknown: the machine
    stat.write_text("intr 1 2 3\n")
    assert cpu_load._busy_seconds(None, str(stat)) is None
    assert cpu_load._busy_seconds(None, str(tmp_path / "missing")) is None


@pytest.mark.skipif(not sys.platform.startswith("linux") or cpu_load.usable_cores() < 2,
                    reason="reads /proc/stat; needs a core for the busy process besides this one")
def test_a_busy_process_beside_is_seen():
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.3)  # the interpreter has started and spins
        seen = other_busy_cores(0.5, reuse=False)
    finally:
        spinner.terminate()
        spinner.wait(timeout=30)
    assert seen >= 0.6  # one core (a little less when the machine also runs other things in bursts)


def test_decode_threads_from_env_or_load(monkeypatch):
    monkeypatch.setattr(local_server, "_usable_cores", lambda: 2)
    monkeypatch.delenv("KDSPY_LOCAL_THREADS", raising=False)
    monkeypatch.delenv("KDSPY_LOCAL_BATCH_THREADS", raising=False)
    monkeypatch.setattr(local_server, "other_busy_cores", lambda **kw: 1.0)
    assert local_server._default_threads() == 1
    monkeypatch.setattr(local_server, "other_busy_cores", lambda **kw: 0.1)
    assert local_server._default_threads() == 2
    monkeypatch.setenv("KDSPY_LOCAL_THREADS", "2")  # a user's number wins over the load
    monkeypatch.setattr(local_server, "other_busy_cores", lambda **kw: 1.0)
    assert local_server._default_threads() == 2
    monkeypatch.delenv("KDSPY_LOCAL_THREADS")
    assert local_server._default_batch_threads() == 2  # prompt processing keeps every core


def test_reproducible_replies_fix_the_threads_and_skip_the_prompt_cache(monkeypatch):
    """``KDSPY_LOCAL_REPRODUCIBLE``: the thread count (which changes a reply's numbers) no longer follows the load,
    and every prompt is processed whole (what the prompt cache held changes them too)."""
    from knapsack_dspy.llm.local_provider import build_request

    monkeypatch.setattr(local_server, "_usable_cores", lambda: 2)
    monkeypatch.delenv("KDSPY_LOCAL_THREADS", raising=False)
    monkeypatch.setattr(local_server, "other_busy_cores", lambda **kw: 1.0)
    messages = [{"role": "user", "content": "hi"}]
    monkeypatch.delenv("KDSPY_LOCAL_REPRODUCIBLE", raising=False)
    assert local_server._default_threads() == 1 and "cache_prompt" not in build_request(messages, {})
    for off in ("0", "false", ""):
        monkeypatch.setenv("KDSPY_LOCAL_REPRODUCIBLE", off)
        assert not local_server.reproducible()
    monkeypatch.setenv("KDSPY_LOCAL_REPRODUCIBLE", "1")
    assert local_server._default_threads() == 2 and build_request(messages, {})["cache_prompt"] is False
    assert build_request(messages, {"cache_prompt": True})["cache_prompt"] is True  # a run that asks for the cache
    monkeypatch.setenv("KDSPY_LOCAL_THREADS", "1")  # a user's number still wins
    assert local_server._default_threads() == 1
