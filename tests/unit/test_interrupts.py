"""Ctrl-C ends a command promptly even when its KeyboardInterrupt is lost (issue 36, item 5)."""

from __future__ import annotations

import os
import signal
import time

import pytest

from tensor_eqsat import interrupts
from tensor_eqsat.workers import before_sigterm

pytestmark = pytest.mark.skipif(os.name != "posix", reason="POSIX signals")


@pytest.fixture(autouse=True)
def ctrl_c_raises():
    """SIGINT as an interactive Python has it (KeyboardInterrupt), whatever the runner inherited:
    a test suite started in the background of a non-interactive shell runs with SIGINT ignored,
    and an ignored Ctrl-C is, rightly, left ignored."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


@pytest.fixture
def ended(monkeypatch):
    """What would end the process: recorded (with the seconds waited) instead."""
    calls: list[float] = []
    monkeypatch.setattr(interrupts, "_end_now", calls.append)
    monkeypatch.setattr(interrupts, "GRACE_S", 0.3)
    monkeypatch.setattr(interrupts, "INSIST_S", 0.1)
    return calls


def _wait_for(calls: list[float], seconds: float = 5.0) -> None:
    end = time.monotonic() + seconds
    while not calls and time.monotonic() < end:
        time.sleep(0.01)


def test_ctrl_c_raises_keyboard_interrupt_and_the_handler_is_restored(ended):
    before = signal.getsignal(signal.SIGINT)
    with pytest.raises(KeyboardInterrupt), interrupts.ending_on_ctrl_c():
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(5)
    assert signal.getsignal(signal.SIGINT) is before
    time.sleep(0.5)  # past the grace: the block ended in time, so nothing is ended
    assert ended == []


def test_a_swallowed_ctrl_c_ends_the_process_after_the_grace(ended):
    t0 = time.monotonic()
    with interrupts.ending_on_ctrl_c():
        try:
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(5)
        except KeyboardInterrupt:
            pass  # lost, as in an at-fork hook or a finalizer
        _wait_for(ended)
    assert ended == [0.3]
    assert time.monotonic() - t0 < 3


def test_a_second_ctrl_c_shortens_the_grace(ended, monkeypatch):
    monkeypatch.setattr(interrupts, "GRACE_S", 30.0)
    with interrupts.ending_on_ctrl_c():
        for _ in range(2):
            try:
                os.kill(os.getpid(), signal.SIGINT)
                time.sleep(5)
            except KeyboardInterrupt:
                pass
        _wait_for(ended)
    assert ended == [0.1]


def test_until_exit_keeps_the_watchdog_after_a_ctrl_c_and_stops_raising(ended):
    previous = signal.getsignal(signal.SIGINT)
    try:
        with pytest.raises(KeyboardInterrupt), interrupts.ending_on_ctrl_c(until_exit=True):
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(5)
        os.kill(os.getpid(), signal.SIGINT)  # during the exit: no KeyboardInterrupt, the deadline nearer
        time.sleep(0.05)
        _wait_for(ended)
        assert ended == [0.1]
    finally:
        signal.signal(signal.SIGINT, previous)


def test_without_ctrl_c_until_exit_changes_nothing_after_the_block(ended):
    before = signal.getsignal(signal.SIGINT)
    with interrupts.ending_on_ctrl_c(until_exit=True):
        pass
    assert signal.getsignal(signal.SIGINT) is before and ended == []


def test_the_real_end_runs_the_running_blocks_cleanups_and_exits_130(monkeypatch):
    done, exits = [], []
    monkeypatch.setattr(os, "_exit", exits.append)
    with (
        before_sigterm(lambda: done.append("tmp removed")),
        before_sigterm(lambda: done.append("workers killed")),
    ):
        interrupts._end_now(3.0)
    assert done == ["workers killed", "tmp removed"] and exits == [130]
