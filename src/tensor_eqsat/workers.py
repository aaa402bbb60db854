"""Worker processes that die with the process that started them.

An MCTS search with ``workers`` > 1 and a benchmark sweep with ``jobs`` > 1 run a pool of worker
processes. When the parent is stopped by a signal it cannot catch (SIGKILL) or does not catch
(SIGTERM, what ``timeout``, CI runners and service managers send), ``ProcessPoolExecutor``'s
shutdown never runs, and its workers, blocked on a pipe, stayed alive forever (issue 28). So:

* every worker calls :func:`exit_with_parent` first: on Linux the kernel sends it SIGKILL when its
  parent dies (``prctl(PR_SET_PDEATHSIG)``), and on every POSIX system a daemon thread polls
  ``os.getppid()`` and exits when the parent is gone (also the fallback where prctl is missing);
* while a pool runs in the main thread, :func:`kill_workers_on_sigterm` makes SIGTERM kill the
  pool's workers before the signal takes its usual course.

``PR_SET_PDEATHSIG`` fires when the *thread* that forked the worker exits, not only the process;
the pools here are created, used and shut down by one call in one thread, so that thread
outlives its workers. Rejected: process groups (``killpg`` from the parent needs the parent to
run, which SIGKILL prevents) and a pipe per worker watched by the worker (what getppid polling
does, without a file descriptor to pass).
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from typing import Any

log = logging.getLogger(__name__)

PARENT_POLL_S = 0.5
"""How often a worker checks that its parent is alive (the fallback to PR_SET_PDEATHSIG)."""

_PR_SET_PDEATHSIG = 1


def _parent_death_signal(sig: int) -> bool:
    """Ask Linux to send ``sig`` to this process when its parent dies; False where unsupported."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        return int(libc.prctl(_PR_SET_PDEATHSIG, sig, 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


def exit_with_parent(parent_pid: int) -> None:
    """Worker initializer: exit as soon as ``parent_pid`` is no longer this process's parent.

    Sets ``PR_SET_PDEATHSIG`` to SIGKILL on Linux (the kernel kills the worker with its parent,
    at once), and starts a daemon thread that polls ``os.getppid()`` every
    :data:`PARENT_POLL_S` seconds and calls ``os._exit(1)`` when it changes (every POSIX
    system). A parent that is already gone makes it exit immediately.
    """
    _parent_death_signal(signal.SIGKILL)
    if os.getppid() != parent_pid:  # died before the death signal was set
        os._exit(1)

    def watch() -> None:
        while os.getppid() == parent_pid:
            time.sleep(PARENT_POLL_S)
        os._exit(1)

    threading.Thread(target=watch, name="exit-with-parent", daemon=True).start()


def init_worker(
    parent_pid: int, initializer: Callable[..., object] | None = None, initargs: tuple[Any, ...] = ()
) -> None:
    """A pool's ``initializer``: :func:`exit_with_parent`, then ``initializer(*initargs)``."""
    exit_with_parent(parent_pid)
    if initializer is not None:
        initializer(*initargs)


def process_pool(
    workers: int,
    initializer: Callable[..., object] | None = None,
    initargs: tuple[Any, ...] = (),
    **kwargs: Any,
) -> ProcessPoolExecutor:
    """A ``ProcessPoolExecutor`` whose workers exit with this process (see the module docstring)."""
    return ProcessPoolExecutor(
        workers, initializer=init_worker, initargs=(os.getpid(), initializer, initargs), **kwargs
    )


def kill_workers(pool: ProcessPoolExecutor) -> None:
    """Kill ``pool``'s worker processes now (SIGKILL) and shut it down without waiting."""
    processes = getattr(pool, "_processes", None) or {}
    for proc in list(processes.values()):
        with contextlib.suppress(Exception):
            proc.kill()
    pool.shutdown(wait=False, cancel_futures=True)


@contextlib.contextmanager
def before_sigterm(cleanup: Callable[[], None]) -> Iterator[None]:
    """While the block runs, SIGTERM first calls ``cleanup``, then is handled as before (the
    previous handler is called; the default action ends the process, as SIGTERM would). A
    ``finally`` does not run when SIGTERM ends the process: this is where such cleanup goes.

    Does nothing outside the main thread (Python runs signal handlers there only) or where
    SIGTERM is ignored. The previous handler is restored on exit.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.getsignal(signal.SIGTERM)
    if previous == signal.SIG_IGN or previous is None:
        yield
        return

    def on_sigterm(signum: int, frame: Any) -> None:
        cleanup()
        signal.signal(signal.SIGTERM, previous)
        if callable(previous):
            previous(signum, frame)
        else:  # SIG_DFL: end the process the way SIGTERM would have
            os.kill(os.getpid(), signal.SIGTERM)

    signal.signal(signal.SIGTERM, on_sigterm)
    try:
        yield
    finally:
        if signal.getsignal(signal.SIGTERM) is on_sigterm:
            signal.signal(signal.SIGTERM, previous)


def kill_workers_on_sigterm(pool: ProcessPoolExecutor) -> contextlib.AbstractContextManager[None]:
    """While the block runs, SIGTERM first kills ``pool``'s workers, then is handled as before
    (see :func:`before_sigterm`)."""

    def stop() -> None:
        log.warning("SIGTERM: stopping %d worker process(es)", len(getattr(pool, "_processes", None) or {}))
        kill_workers(pool)

    return before_sigterm(stop)


def usable_cpus() -> int:
    """CPU cores this process may run on (its affinity mask where the OS has one, as under
    ``taskset`` or a container's cpuset; else ``os.cpu_count()``)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def oversubscription_warning(*, workers: int = 1, threads: int = 1, cpus: int | None = None) -> str | None:
    """A warning when ``workers`` (MCTS worker processes) or ``threads`` (the runtime's threads
    per measured session) exceed the CPU cores, else None. Front ends print it; the run goes on.

    cpus: the cores to compare with. Default :func:`usable_cpus`.

    >>> oversubscription_warning(workers=2, threads=1, cpus=2) is None
    True
    >>> oversubscription_warning(workers=8, cpus=2).split(":")[0]
    '8 MCTS workers on 2 CPU cores'
    >>> oversubscription_warning(workers=1, threads=4, cpus=2).split(":")[0]
    '4 runtime threads on 2 CPU cores'
    """
    cores = usable_cpus() if cpus is None else cpus
    parts = []
    if workers > cores:
        parts.append(
            f"{workers} MCTS workers on {cores} CPU cores: they share the cores, so the search is no "
            "faster and a time limit buys fewer simulations"
        )
    if threads > cores:
        parts.append(
            f"{threads} runtime threads on {cores} CPU cores: measured latencies are slower and "
            "noisier, which can change what the never-slower guard keeps"
        )
    return "; ".join(parts) or None
