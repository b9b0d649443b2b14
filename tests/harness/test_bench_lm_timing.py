"""``lm_seconds``: the time one example spends inside its LM calls (failed calls included)."""

import time

import dspy
import pytest
from dspy.utils import DummyLM

from knapsack_dspy.bench.execution.lm_timing import LMTimer


class _SlowLM(DummyLM):
    """DummyLM that takes ``delay`` seconds per call and fails the calls numbered in ``fail`` (0-based)."""

    def __init__(self, answers, delay, fail=()):
        super().__init__(answers)
        self.delay, self.fail, self.calls = delay, set(fail), 0

    def forward(self, prompt=None, messages=None, **kwargs):
        number, self.calls = self.calls, self.calls + 1
        time.sleep(self.delay)
        if number in self.fail:
            raise ConnectionError("dropped")
        return super().forward(prompt=prompt, messages=messages, **kwargs)


def test_the_timer_adds_up_the_time_inside_lm_calls_and_nothing_else():
    lm = _SlowLM([{"answer": "a"}, {"answer": "b"}], delay=0.05)
    predict = dspy.Predict("question -> answer")
    timer = LMTimer()
    with dspy.context(lm=lm, callbacks=[timer]):
        predict(question="one")
        time.sleep(0.2)  # outside an LM call: not counted
        predict(question="two")
    assert 0.1 <= timer.seconds < 0.3
    assert timer.row_fields() == {"lm_seconds": round(timer.seconds, 3)}


def test_a_failed_call_counts_too():
    lm = _SlowLM([{"answer": "a"}], delay=0.05, fail={0, 1})  # the JSON-adapter fallback fails as well
    timer = LMTimer()
    with dspy.context(lm=lm, callbacks=[timer]), pytest.raises(ConnectionError):
        dspy.Predict("question -> answer")(question="one")
    assert timer.seconds >= 0.05 * lm.calls and not timer._started
