"""How many times slower than on idle cores this process runs now: the other processes' share of
its CPUs (issue 44).

The seconds of the steps after the search (the numeric check, the guard) are predicted from a
throughput learned on earlier runs (:class:`~tensor_eqsat.check.Throughput`). Learned and used
at different loads, that prediction was wrong both ways: BERT in float16 at 20 s, whose check
takes 3.4 s on an idle 2-core CPU, 5.1 s beside one busy process and 7.6 s beside two, was
planned at 4.7 s beside two (learned on idle cores) and overran its budget by 2.5 s, and was
planned at 8.3 s on idle cores (learned under load), leaving the search less than it could have
had.

So every prediction is made for idle cores and scaled by the pace now, and every check and guard
teaches the throughput its seconds divided by the pace it ran at. The pace is read from the
kernel's scheduler statistics of this process's threads (Linux ``/proc/self/task/*/schedstat``):
the time they ran and the time they were ready but waited for a CPU; the pace over a span is
(ran + waited) / ran, 1.0 on idle cores, 1.5 beside two busy processes on two cores. It costs
a file read per thread, and it measures what the process met, not a guess from the load
average.

Alternatives rejected: the load average (a minute behind, and counting processes that sleep in
I/O); timing a probe against the machine's quiet speed remembered from earlier runs (a probe of
a few milliseconds fits in one scheduler slice and read 1.0 beside two busy processes, while a
product on PyTorch's two threads read 10x, where the check ran 2.2x slower).
"""

from __future__ import annotations

import contextlib
import os
import time
from dataclasses import dataclass

PACE_RANGE = (1.0, 4.0)
"""The least and most a pace may be (a span too short to say much is bounded, not trusted)."""
LEAST_RAN_S = 0.05
"""A span in which the threads ran less than this says nothing: its pace is 1.0."""


@dataclass(frozen=True)
class Sample:
    """The scheduler's totals for this process's threads at one moment: ran and waited (ready,
    but another process had the CPU), in seconds."""

    ran: float
    waited: float


def sample() -> Sample | None:
    """This process's threads' totals now (threads that ended are not counted); None where the
    kernel does not say (not Linux, or schedstats off)."""
    ran = waited = 0
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        return None
    for task in tasks:
        with contextlib.suppress(OSError, ValueError, IndexError):
            with open(f"/proc/self/task/{task}/schedstat") as f:
                fields = f.read().split()
            ran, waited = ran + int(fields[0]), waited + int(fields[1])
    if ran == 0:
        return None
    return Sample(ran / 1e9, waited / 1e9)


def pace_since(start: Sample | None = None) -> float:
    """The pace (see the module docstring) from ``start`` to now; from the threads' starts where
    ``start`` is None (the life so far of the threads alive now: the main thread's is the
    process's). 1.0 where the kernel does not say, or the threads ran less than
    :data:`LEAST_RAN_S` in the span.

    >>> 1.0 <= pace_since() <= PACE_RANGE[1]
    True
    """
    now = sample()
    if now is None:
        return 1.0
    ran, waited = now.ran, now.waited
    if start is not None:
        ran, waited = ran - start.ran, waited - start.waited
    if ran < LEAST_RAN_S:
        return 1.0
    lo, hi = PACE_RANGE
    return min(max((ran + max(waited, 0.0)) / ran, lo), hi)


def free_cpus(samples: int = 5, gap_s: float = 0.002) -> int | None:
    """CPUs this process may run on that no other task is running on now: its affinity's count
    less the other runnable tasks (the kernel's ``procs_running`` of ``/proc/stat``, less the
    thread asking), the least of ``samples`` reads ``gap_s`` apart (a task that runs for a
    moment is not a busy process), at least 1. None where the kernel does not say.

    A check that runs PyTorch on as many threads as there are CPUs beside busy processes waits at
    every barrier for a thread the scheduler has not run: BERT's float16 runs took 0.2-1.0 s on
    two threads beside two busy processes on two cores, 0.15-0.2 s on one (0.05 s idle).

    >>> n = free_cpus()
    >>> n is None or n >= 1
    True
    """
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    least: int | None = None
    for k in range(samples):
        if k:
            time.sleep(gap_s)
        try:
            with open("/proc/stat") as f:
                running = next(int(line.split()[1]) for line in f if line.startswith("procs_running"))
        except (OSError, ValueError, IndexError, StopIteration):
            return None
        least = running if least is None else min(least, running)
    if least is None:
        return None
    return max(1, min(cpus, cpus - (least - 1)))
