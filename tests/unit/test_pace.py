"""The process's pace (issue 44): predictions made for idle cores, scaled by how much slower the
process runs now, and checks learned at the pace they ran at, so a throughput learned under load
does not starve the search on idle cores, nor one learned on idle cores overrun the budget."""

from __future__ import annotations

import threading
import time

import pytest

import tensor_eqsat.pace as pace
from tensor_eqsat.check import Throughput

linux = pytest.mark.skipif(pace.sample() is None, reason="the kernel gives no scheduler statistics")


def _busy(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


@linux
def test_the_pace_is_one_on_idle_cores_and_counts_the_time_the_threads_waited(monkeypatch):
    start = pace.sample()
    _busy(0.1)
    assert start is not None and 1.0 <= pace.pace_since(start) <= pace.PACE_RANGE[1]
    # The kernel's totals, as read: ran 1.0 s, waited 0.5 s in the span.
    readings = iter([pace.Sample(2.0, 1.0), pace.Sample(3.0, 1.5)])
    monkeypatch.setattr(pace, "sample", lambda: next(readings))
    assert pace.pace_since(pace.sample()) == pytest.approx(1.5)


def test_a_span_too_short_or_unreadable_reads_one_and_a_long_wait_is_bounded(monkeypatch):
    monkeypatch.setattr(pace, "sample", lambda: pace.Sample(1.01, 9.0))
    assert pace.pace_since(pace.Sample(1.0, 0.0)) == 1.0  # ran 10 ms: says nothing
    assert pace.pace_since(pace.Sample(0.0, 0.0)) == pace.PACE_RANGE[1]  # 9 s waited for 1 s run
    monkeypatch.setattr(pace, "sample", lambda: None)
    assert pace.pace_since() == 1.0


@linux
def test_every_thread_of_the_process_is_counted():
    before = pace.sample()
    stop = threading.Event()

    def spin() -> None:
        while not stop.is_set():
            pass

    worker = threading.Thread(target=spin, daemon=True)
    worker.start()
    # The main thread sleeps; the worker runs. On a loaded machine it may get little of the
    # CPU, so the sample is read until it shows 0.1 s run (within 10 s), not at a fixed time.
    end = time.perf_counter() + 10.0
    during = pace.sample()
    while during is not None and before is not None and during.ran - before.ran < 0.1:
        if time.perf_counter() > end:
            break
        time.sleep(0.05)
        during = pace.sample()
    stop.set()
    worker.join()
    assert before is not None and during is not None
    assert during.ran - before.ran >= 0.1


def test_a_paced_throughput_predicts_for_the_pace_now_and_learns_at_the_pace_it_ran(tmp_path, monkeypatch):
    t = Throughput.load("ort:cpu", tmp_path)
    idle = t.predict(100_000_000, 0)
    monkeypatch.setattr("tensor_eqsat.check.pace_since", lambda start=None: 2.0)
    t.measure_pace()
    assert t.pace == 2.0 and t.predict(100_000_000, 0) == pytest.approx(2 * idle)
    # A check that took twice the idle prediction at pace 2 teaches the idle factor again.
    t.record(100_000_000, 0, 2 * idle, pace=2.0)
    assert Throughput.load("ort:cpu", tmp_path).predict(100_000_000, 0) == pytest.approx(idle)
    t.record(100_000_000, 0, 2 * idle)  # (no pace given: the one it predicts with)
    assert Throughput.load("ort:cpu", tmp_path).predict(100_000_000, 0) == pytest.approx(idle)
    # Unpaced (a caller's own throughput), the same check teaches twice the factor.
    u = Throughput.load("torch:cuda", tmp_path)
    u.record(100_000_000, 0, 2 * u.predict(100_000_000, 0))
    assert Throughput.load("torch:cuda", tmp_path).factors(1.0)["bytes_factor"] == pytest.approx(2.0)


def test_a_check_teaches_its_seconds_over_the_pace_it_ran_at(tmp_path, monkeypatch):
    from tensor_eqsat.check import Checker
    from tensor_eqsat.clock import Deadline
    from tensor_eqsat.ir.graph import Graph

    g = Graph()
    g.output(g.relu(g.matmul(g.input((4, 8), name="x"), g.weight((8, 8)))))
    t = Throughput.load("interpreter:cpu", tmp_path)
    seen = []
    monkeypatch.setattr(Throughput, "record", lambda self, *a, **k: seen.append(k.get("pace", a[4:5])))
    monkeypatch.setattr("tensor_eqsat.check.pace_since", lambda start=None: 1.7)
    c = Checker(g, g, backend="interpreter", device="cpu", seed=0, throughput=t)
    outcome = c.check(g, g, None, Deadline.after(None))
    assert outcome.verdict is not None and outcome.verdict.ok
    assert seen == [1.7]
