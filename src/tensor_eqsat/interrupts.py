"""Ctrl-C ends a command promptly, whatever it is doing (issue 36, item 5).

A command line run of tensor-eqsat treats Ctrl-C (SIGINT) as Python does: KeyboardInterrupt in
the main thread, which the search turns into "hand back the best found so far" and the CLI into
exit status 130. That is not enough on its own: the main thread may be inside native code that
returns only when it is done (a HiGHS solve ran to its time limit until it got a thread of its
own, see ``extract/ilp_solvers.py``), a KeyboardInterrupt raised in an at-fork hook or while a
finalizer runs is printed as "Exception ignored" and lost (``workers.deferred_sigint`` covers the
fork of a worker pool), and a library may catch it. Then the run went on for minutes after a
Ctrl-C, or for ever.

So :func:`ending_on_ctrl_c` (what ``cli.main`` wraps a command in) installs a SIGINT handler
that raises KeyboardInterrupt as before and also starts a watchdog thread: if the command has
not ended :data:`GRACE_S` seconds after the first Ctrl-C, or :data:`INSIST_S` seconds after a
second one, the watchdog runs the cleanups of the blocks running now
(:func:`tensor_eqsat.workers.run_cleanups`: worker processes killed, an atomic write's temporary
file removed, so nothing half-written is left), says so on stderr and ends the process with
status 130. The first Ctrl-C leaves time to hand back a result checked as usual; a second one
means now.

Rejected: ending at once on the first Ctrl-C (the best-so-far result would be lost), a flag the
search polls (every loop and every native call would have to poll it, and a loop that does not
is the bug this guards against), and SIGINT's default action after the first one (it skips the
cleanups, leaving temporary files and orphaned workers).
"""

from __future__ import annotations

import contextlib
import itertools
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

GRACE_S = 30.0
"""Seconds a command may take to end after a Ctrl-C before it is ended (the best result so far
is then checked and written, bounded by the time budget, in a few seconds for most models)."""
INSIST_S = 3.0
"""Seconds a command may take to end after a second Ctrl-C before it is ended."""
EXIT_STATUS = 130
"""The exit status of a command ended by Ctrl-C (128 + SIGINT, as shells report it)."""


class _Watchdog:
    """Ends the process at a deadline that Ctrl-C presses set, unless the command ends first."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._at: float | None = None
        self._presses = 0
        self._done = False
        self._thread: threading.Thread | None = None

    def pressed(self) -> None:
        """A Ctrl-C: the first arms the deadline :data:`GRACE_S` from now, a later one brings it
        to :data:`INSIST_S` from now (never later than it was)."""
        now = time.monotonic()
        with self._lock:
            self._presses += 1
            at = now + (GRACE_S if self._presses == 1 else INSIST_S)
            self._at = at if self._at is None else min(self._at, at)
            if self._thread is None:
                self._thread = threading.Thread(target=self._watch, name="ctrl-c-watchdog", daemon=True)
                self._thread.start()
            self._wake.notify_all()

    @property
    def armed(self) -> bool:
        """Whether a Ctrl-C has set a deadline."""
        with self._lock:
            return self._at is not None

    def stop(self) -> None:
        """The command ended: nothing is ended."""
        with self._lock:
            self._done = True
            self._wake.notify_all()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()

    def _watch(self) -> None:
        with self._lock:
            while not self._done:
                assert self._at is not None
                left = self._at - time.monotonic()
                if left <= 0:
                    break
                self._wake.wait(left)
            if self._done:
                return
            waited = GRACE_S if self._presses == 1 else INSIST_S
        _end_now(waited)


def _end_now(waited: float) -> None:
    """Clean up and end the process with :data:`EXIT_STATUS` (see the module docstring)."""
    from tensor_eqsat.workers import run_cleanups

    run_cleanups()
    with contextlib.suppress(Exception):
        sys.stderr.write(f"interrupted: the run had not ended {waited:g} s after Ctrl-C, so it was ended\n")
        sys.stderr.flush()
    os._exit(EXIT_STATUS)


@contextlib.contextmanager
def ending_on_ctrl_c(*, until_exit: bool = False) -> Iterator[None]:
    """While the block runs, Ctrl-C raises KeyboardInterrupt (as by default) and the process is
    ended if the block has not ended :data:`GRACE_S` seconds later (:data:`INSIST_S` after a
    second Ctrl-C); see the module docstring.

    until_exit: for the process's own command line: after a Ctrl-C the watchdog stays armed
        beyond the block, through the interpreter's exit (which joins worker pools' threads),
        and a further Ctrl-C only brings its deadline closer. Default False: the watchdog stops
        and the previous SIGINT handler is back when the block ends.

    Changes nothing outside the main thread or where SIGINT is ignored (a background job).
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.getsignal(signal.SIGINT)
    if previous == signal.SIG_IGN or previous is None:
        yield
        return
    watchdog = _Watchdog()
    running = True

    def on_sigint(signum: int, frame: Any) -> None:
        watchdog.pressed()
        if running:
            raise KeyboardInterrupt

    signal.signal(signal.SIGINT, on_sigint)
    try:
        yield
    finally:
        running = False
        if not (until_exit and watchdog.armed):
            watchdog.stop()
            if signal.getsignal(signal.SIGINT) is on_sigint:
                signal.signal(signal.SIGINT, previous)


def is_command_line() -> bool:
    """Whether this process is the ``tensor-eqsat`` command line (its script, or ``python -m
    tensor_eqsat``), from the interpreter's own arguments."""
    argv = list(getattr(sys, "orig_argv", sys.argv))
    if any(os.path.basename(a) == "tensor-eqsat" for a in argv[:2]):
        return True
    return any(a == "-m" and b == "tensor_eqsat" for a, b in itertools.pairwise(argv))


def interrupted_while_starting() -> None:
    """For a Ctrl-C while the package is imported: in the command line, end with
    :data:`EXIT_STATUS` and one line, as a Ctrl-C at any later moment does (it printed a
    traceback: issue 44); in a program that imports the library, nothing (the
    KeyboardInterrupt is the program's)."""
    if is_command_line():
        with contextlib.suppress(Exception):
            sys.stderr.write("interrupted\n")
        raise SystemExit(EXIT_STATUS) from None
