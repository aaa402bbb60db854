"""The one timer's runs of several calls (``min_run_ms``): a call of a fraction of a millisecond
is timed in runs of consecutive calls, every arm alike, and reported per call (issue 42)."""

from __future__ import annotations

import time
from contextlib import nullcontext

from tensor_eqsat.target.runtime import _calls_per_run, time_alternating


class _Runtime:
    """A runtime whose models sleep ``sleep_s`` of real time a call (which sizes the runs) and
    advance a fake clock by ``tick_ns`` (which the timings read)."""

    name, device, threads = "fake", "cpu", 1

    def __init__(self, sleep_s: float, tick_ns: int = 1000) -> None:
        self.sleep_s, self.tick_ns, self.now = sleep_s, tick_ns, 0
        self.calls: dict[str, int] = {}

    def unavailable(self):
        return None

    def prepare(self, model, *, seed=0):
        self.calls[model] = 0

        def run():
            self.calls[model] += 1
            self.now += self.tick_ns
            if self.sleep_s:
                time.sleep(self.sleep_s)

        return run

    def clock(self):
        return lambda: self.now

    def session(self):
        return nullcontext()


def test_a_run_is_one_call_by_default():
    rt = _Runtime(sleep_s=0.0)
    t = time_alternating(["a", "b"], rt, runs=8, blocks=2, warmup=3)
    assert rt.calls == {"a": 11, "b": 11}
    assert t.runs == 8 and all(x == 0.001 for ts in t.times for x in ts)


def test_short_calls_are_timed_in_runs_of_several_reported_per_call():
    # 0.5 ms or more a call (a sleep overshoots, more on a loaded machine): runs of 2-10 calls
    rt = _Runtime(sleep_s=0.0005)
    t = time_alternating(["a", "b"], rt, runs=8, blocks=2, warmup=3, min_run_ms=5.0)
    per_run = (rt.calls["a"] - 3) / 8
    assert rt.calls["a"] == rt.calls["b"]  # every arm the same number of calls a run
    assert per_run == int(per_run) and 2 <= per_run <= 10
    # each run's clock covered all its calls; the times are per call
    assert t.runs == 8 and all(abs(x - 0.001) < 1e-12 for ts in t.times for x in ts)


def test_calls_long_enough_alone_stay_one_a_run():
    rt = _Runtime(sleep_s=0.003)
    time_alternating(["a"], rt, runs=2, blocks=1, warmup=1, min_run_ms=2.5)
    assert rt.calls == {"a": 3}


def test_calls_per_run():
    assert _calls_per_run(0.0004, 2.0) == 5
    assert _calls_per_run(0.0004, 0.0) == 1
    assert _calls_per_run(0.002, 2.0) == 1
    assert _calls_per_run(0.0, 2.0) > 1000  # a call too fast to time: many a run, not a division by 0
