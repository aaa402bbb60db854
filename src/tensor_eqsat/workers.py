"""Worker processes that die with the process that started them.

An MCTS search with ``workers`` > 1 and a benchmark sweep with ``jobs`` > 1 run a pool of worker
processes. When the parent is stopped by a signal it cannot catch (SIGKILL) or does not catch
(SIGTERM, what ``timeout``, CI runners and service managers send), ``ProcessPoolExecutor``'s
shutdown never runs, and its workers, blocked on a pipe, stayed alive forever (issue 28). So:

* every worker calls :func:`exit_with_parent` first: on Linux the kernel sends it SIGKILL when its
  parent dies (``prctl(PR_SET_PDEATHSIG)``), and on every POSIX system a daemon thread polls
  ``os.getppid()`` and exits when the parent is gone (also the fallback where prctl is missing);
* while a pool runs in the main thread, :func:`kill_workers_on_sigterm` makes SIGTERM kill the
  pool's workers before the signal takes its usual course;
* a worker takes SIGTERM's default action (a forked worker inherited the parent's handler, which
  then tried to stop the parent's pool from inside the worker), and the workers of a pool made
  with ``ignore_sigint`` ignore Ctrl-C: a terminal's Ctrl-C reaches the whole foreground process
  group, and a worker that raised KeyboardInterrupt on its own printed a traceback (idle, or
  in its initializer, which also broke the pool) while the parent was already ending the run.
  The parent kills such workers when its KeyboardInterrupt leaves the pool's block (issue 36);
* a pool's ``submit`` holds a Ctrl-C back while it runs (:func:`deferred_sigint`): the first
  one forks the workers, and a KeyboardInterrupt raised in the parent during the fork is raised
  inside an at-fork hook (logging's ``_releaseLock``), where Python prints it as "Exception
  ignored" and drops it: the run went on as if Ctrl-C had never been pressed.

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
    parent_pid: int,
    initializer: Callable[..., object] | None = None,
    initargs: tuple[Any, ...] = (),
    ignore_sigint: bool = False,
) -> None:
    """A pool's ``initializer``: SIGTERM's default action and SIGINT's (KeyboardInterrupt), or
    SIGINT ignored when ``ignore_sigint`` (a forked worker inherits the parent's handlers: the
    CLI's, or the one :func:`deferred_sigint` sets while the fork runs), :func:`exit_with_parent`,
    then ``initializer(*initargs)``."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_IGN if ignore_sigint else signal.default_int_handler)
    exit_with_parent(parent_pid)
    if initializer is not None:
        initializer(*initargs)


@contextlib.contextmanager
def deferred_sigint() -> Iterator[None]:
    """Hold a Ctrl-C back while the block runs: SIGINT's Python handler is called (raising
    KeyboardInterrupt, by default) when the block ends, not in the middle of it. For code that
    runs Python callbacks where an exception is dropped (``os.fork``'s at-fork hooks). Main
    thread only, and only where SIGINT has a Python handler; elsewhere nothing changes.

    >>> with deferred_sigint():
    ...     pass
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.getsignal(signal.SIGINT)
    if not callable(previous):
        yield
        return
    pending: list[tuple[int, Any]] = []
    signal.signal(signal.SIGINT, lambda signum, frame: pending.append((signum, frame)))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        if pending:
            previous(*pending[0])


class _Pool(ProcessPoolExecutor):
    """A ``ProcessPoolExecutor`` whose ``submit`` (which starts the workers) defers Ctrl-C."""

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        with deferred_sigint():
            return super().submit(fn, *args, **kwargs)


def process_pool(
    workers: int,
    initializer: Callable[..., object] | None = None,
    initargs: tuple[Any, ...] = (),
    *,
    ignore_sigint: bool = False,
    **kwargs: Any,
) -> ProcessPoolExecutor:
    """A ``ProcessPoolExecutor`` whose workers exit with this process (see the module docstring).

    ignore_sigint: the workers ignore Ctrl-C (SIGINT); the caller must then kill them
        (:func:`kill_workers`) when its own KeyboardInterrupt ends their use. Default False.
    """
    return _Pool(
        workers,
        initializer=init_worker,
        initargs=(os.getpid(), initializer, initargs, ignore_sigint),
        **kwargs,
    )


def kill_workers(pool: ProcessPoolExecutor) -> None:
    """Kill ``pool``'s worker processes now (SIGKILL) and shut it down without waiting."""
    processes = getattr(pool, "_processes", None) or {}
    for proc in list(processes.values()):
        with contextlib.suppress(Exception):
            proc.kill()
    pool.shutdown(wait=False, cancel_futures=True)


_CLEANUPS: list[Callable[[], None]] = []
"""The cleanups of the :func:`before_sigterm` blocks running now, innermost last."""


def run_cleanups() -> None:
    """Run the cleanups of every :func:`before_sigterm` block running now, innermost first,
    each once (an error in one is logged; the others still run). For a process about to end
    without unwinding its stack (``os._exit`` after a Ctrl-C that did not end it, see
    :mod:`tensor_eqsat.interrupts`)."""
    while True:
        try:
            cleanup = _CLEANUPS.pop()
        except IndexError:  # (a block in another thread may end meanwhile)
            return
        try:
            cleanup()
        except Exception:
            log.exception("cleanup before exit failed")


@contextlib.contextmanager
def before_sigterm(cleanup: Callable[[], None]) -> Iterator[None]:
    """While the block runs, SIGTERM (and SIGHUP: :data:`ENDING_SIGNALS`) first calls
    ``cleanup``, then is handled as before (the previous handler is called; the default action
    ends the process, as the signal would). A ``finally`` does not run when such a signal ends the
    process: this is where such cleanup goes. :func:`run_cleanups` calls it too while the block
    runs.

    Installs nothing outside the main thread (Python runs signal handlers there only), nor for a
    signal that is ignored. The previous handlers are restored on exit.
    """
    _CLEANUPS.append(cleanup)
    try:
        with _on_sigterm(cleanup):
            yield
    finally:
        with contextlib.suppress(ValueError):  # (run already by run_cleanups)
            _CLEANUPS.remove(cleanup)


ENDING_SIGNALS = tuple(getattr(signal, name) for name in ("SIGTERM", "SIGHUP") if hasattr(signal, name))
"""The signals that end a process whose blocks :func:`before_sigterm` cleans up first: SIGTERM
(``timeout``, CI runners, service managers) and SIGHUP (the terminal closed: issue 44, a
130 MB ONNX temporary file was left behind)."""


@contextlib.contextmanager
def _on_sigterm(cleanup: Callable[[], None]) -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    installed: dict[int, Any] = {}

    def on_signal(signum: int, frame: Any) -> None:
        cleanup()
        previous = installed.get(signum, signal.SIG_DFL)
        signal.signal(signum, previous)
        if callable(previous):
            previous(signum, frame)
        else:  # SIG_DFL: end the process the way the signal would have
            os.kill(os.getpid(), signum)

    for sig in ENDING_SIGNALS:
        previous = signal.getsignal(sig)
        if previous == signal.SIG_IGN or previous is None:
            continue
        installed[sig] = previous
        signal.signal(sig, on_signal)
    try:
        yield
    finally:
        for sig, previous in installed.items():
            if signal.getsignal(sig) is on_signal:
                signal.signal(sig, previous)


def kill_workers_on_sigterm(pool: ProcessPoolExecutor) -> contextlib.AbstractContextManager[None]:
    """While the block runs, SIGTERM first kills ``pool``'s workers, then is handled as before
    (see :func:`before_sigterm`)."""

    def stop() -> None:
        log.warning("stopping %d worker process(es)", len(getattr(pool, "_processes", None) or {}))
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
