"""One clock for a whole call: a :class:`Deadline` made once and passed down.

A user's ``--time-budget S`` bounds everything the call does: loading, the search (every stage,
construction and extraction), the numeric check, the never-slower guard and the write. So the
deadline is made once, where the call starts (:func:`~tensor_eqsat.deliver.deliver`, or the CLI
before it loads the model), and every part receives it; nothing converts between seconds and
deadlines on its own. The rules for what the search leaves to the steps after it live here too
(:func:`search_deadline`), so the reserve is decided in one place.

Alternatives rejected: passing seconds (each layer subtracted what it had spent, four times
across five files, and the check and the guard were outside the budget); a global clock (tests
and nested calls need their own).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field

DELIVERY_RESERVE = 0.1
"""The least share of a time budget kept for the steps after the search (the numeric check, the
guard, the write), however cheap they are predicted to be."""
MAX_DELIVERY_RESERVE = 0.5
"""The most share of a time budget kept for the steps after the search: a model whose check and
guard are predicted to need more still gets half the budget to search."""
MAX_LEAST_RESERVE = 0.8
"""The most share of a time budget kept for what the steps after the search cannot do without
(``least_s`` of :func:`search_deadline`): the search keeps a fifth."""


@dataclass(frozen=True)
class Deadline:
    """A point in time (``time.perf_counter()`` seconds) by which a call must end, or none.

    start: when the clock started. at: the deadline, None for no limit.

    >>> d = Deadline.after(None)
    >>> d.left(), d.expired()
    (None, False)
    >>> d = Deadline.after(60.0)
    >>> 59.0 < d.left() <= 60.0, round(d.budget, 6)
    (True, 60.0)
    """

    at: float | None
    start: float = field(default_factory=time.perf_counter)

    @classmethod
    def after(cls, seconds: float | None, *, start: float | None = None) -> Deadline:
        """A deadline ``seconds`` after ``start`` (default: now); None for no limit."""
        t0 = time.perf_counter() if start is None else start
        return cls(None if seconds is None else t0 + seconds, t0)

    @property
    def budget(self) -> float | None:
        """The seconds from start to the deadline (None without one)."""
        return None if self.at is None else self.at - self.start

    def left(self) -> float | None:
        """Seconds left (negative once passed); None without a deadline."""
        return None if self.at is None else self.at - time.perf_counter()

    def elapsed(self) -> float:
        """Seconds since the clock started."""
        return time.perf_counter() - self.start

    def expired(self) -> bool:
        """Whether the deadline has passed."""
        return self.at is not None and time.perf_counter() >= self.at

    def earlier(self, seconds: float | None) -> Deadline:
        """This deadline or ``seconds`` from now, whichever comes first (same start).

        >>> d = Deadline.after(100.0).earlier(1.0)
        >>> d.left() <= 1.0
        True
        """
        if seconds is None:
            return self
        at = time.perf_counter() + seconds
        return Deadline(at if self.at is None else min(at, self.at), self.start)

    def before(self, seconds: float) -> Deadline:
        """A deadline ``seconds`` earlier than this one (same start); none stays none."""
        return self if self.at is None else Deadline(self.at - seconds, self.start)


def process_start() -> float:
    """When this process started, on the ``time.perf_counter()`` clock (Linux: from
    ``/proc/self/stat``); now where that cannot be read. A command's budget counts from here, so
    the interpreter's start and the imports are inside it.

    >>> 0.0 <= time.perf_counter() - process_start() < 3600.0
    True
    """
    now = time.perf_counter()
    try:
        with open("/proc/self/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        started = int(fields[19]) / os.sysconf("SC_CLK_TCK")  # seconds after boot
        elapsed = time.clock_gettime(time.CLOCK_BOOTTIME) - started
    except (OSError, ValueError, IndexError, AttributeError):
        return now
    return now - elapsed if 0.0 <= elapsed < 86_400.0 else now


def search_deadline(deadline: Deadline, after_search_s: float, least_s: float = 0.0) -> Deadline:
    """The deadline of the search within a call bounded by ``deadline``.

    after_search_s: the predicted seconds of what follows the search (the numeric check, the
    guard, the write). The search ends that long before the call's deadline, and at least
    :data:`DELIVERY_RESERVE` of the time left before it, at most :data:`MAX_DELIVERY_RESERVE`.
    least_s: the seconds the steps after the search cannot do without (the least check that can
    run at all, and the write): kept even beyond :data:`MAX_DELIVERY_RESERVE` where it is at most
    :data:`MAX_LEAST_RESERVE` of the time left (a search that leaves its own check no time finds
    nothing that can be handed back: issue 44); where it is more, nothing found could be checked
    anyway, and the search keeps its share (the check then says what it would need). Default 0.

    >>> d = Deadline.after(100.0)
    >>> round(search_deadline(d, 0.0).left())   # the 10 % floor
    90
    >>> round(search_deadline(d, 30.0).left())
    70
    >>> round(search_deadline(d, 80.0).left())  # at most half
    50
    >>> round(search_deadline(d, 80.0, least_s=65.0).left())  # but what the check cannot do without
    35
    >>> round(search_deadline(d, 80.0, least_s=99.0).left())  # more than can be kept: ignored
    50
    """
    left = deadline.left()
    if left is None:
        return deadline
    left = max(left, 0.0)
    least = least_s if least_s <= MAX_LEAST_RESERVE * left else 0.0
    cap = max(MAX_DELIVERY_RESERVE * left, least)
    reserve = min(max(after_search_s, least, DELIVERY_RESERVE * left), cap)
    return deadline.before(reserve)
