"""Worker pools that die with their parent (issue 28, defect 3)."""

from __future__ import annotations

import os
import signal
import time

import pytest

from tensor_eqsat.workers import kill_workers_on_sigterm, process_pool


def _pid() -> int:
    return os.getpid()


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    try:  # a zombie not yet reaped still answers kill(0)
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


@pytest.mark.skipif(not hasattr(signal, "SIGTERM") or os.name != "posix", reason="POSIX signals")
def test_sigterm_kills_the_pools_workers_and_reaches_the_previous_handler():
    seen: list[int] = []
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: seen.append(signum))
    try:
        with process_pool(2) as pool, kill_workers_on_sigterm(pool):
            pids = {pool.submit(_pid).result() for _ in range(8)}
            handler = signal.getsignal(signal.SIGTERM)
            os.kill(os.getpid(), signal.SIGTERM)
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline and not all(_gone(p) for p in pids):
                time.sleep(0.05)
            assert all(_gone(p) for p in pids)
            assert seen == [signal.SIGTERM]
        assert signal.getsignal(signal.SIGTERM) is not handler  # the previous one is back
        assert pids and os.getpid() not in pids
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_a_pool_runs_its_initializer_after_the_parent_watch(tmp_path):
    marker = tmp_path / "m"
    with process_pool(1, _touch, (str(marker),)) as pool:
        assert pool.submit(_pid).result() != os.getpid()
    assert marker.read_text() == "ok"


def _touch(path: str) -> None:
    with open(path, "w") as f:
        f.write("ok")


def _handlers() -> tuple[object, object]:
    return signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)


@pytest.mark.skipif(os.name != "posix", reason="POSIX signals")
@pytest.mark.parametrize("ignore_sigint", [False, True])
def test_workers_take_sigterms_default_and_may_ignore_ctrl_c(ignore_sigint):
    # A forked worker inherited the parent's SIGTERM handler (which stopped the parent's pool from
    # inside the worker); the MCTS pool's workers ignore the Ctrl-C a terminal sends the group.
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: None)
    try:
        with process_pool(1, ignore_sigint=ignore_sigint) as pool:
            sigint, sigterm = pool.submit(_handlers).result()
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert sigterm == signal.SIG_DFL
    assert sigint == (signal.SIG_IGN if ignore_sigint else signal.default_int_handler)


@pytest.mark.skipif(os.name != "posix", reason="POSIX signals")
def test_a_ctrl_c_during_submit_is_raised_after_it_not_lost():
    from tensor_eqsat.workers import deferred_sigint

    # SIGINT as an interactive Python has it, whatever the runner inherited (a suite started in
    # the background of a non-interactive shell runs with SIGINT ignored).
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)

    reached = []
    with pytest.raises(KeyboardInterrupt), deferred_sigint():
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.05)
        reached.append("end of block")  # not interrupted inside
    assert reached == ["end of block"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    signal.signal(signal.SIGINT, previous)


@pytest.mark.skipif(os.name != "posix", reason="POSIX signals")
def test_the_first_submit_forks_with_ctrl_c_deferred(monkeypatch):
    import tensor_eqsat.workers as workers

    entered = []
    real = workers.deferred_sigint

    def spy():
        entered.append(1)
        return real()

    monkeypatch.setattr(workers, "deferred_sigint", spy)
    with process_pool(1) as pool:
        assert pool.submit(_pid).result() != os.getpid()
    assert entered == [1]
