"""A GPU timing table's drifting launch floor, and the table brought to its steady state.

An isolated GPU timing of a small op is mostly the host's launch of it: on the H200 a relu of
1,000 elements and one of 1,000,000 both cost about 0.016 ms. That floor is a property of the
host's state while the table was recorded (clock, power and scheduling state), and it drifts: in
``calibration/h200-2026-11/op_timings.sqlite3`` it switches between about 0.016 ms and about
0.023 ms in runs of tens to hundreds of entries, within seconds (a 2-input concat recorded at
0.016 ms and the next one, 0.1 s later, at 0.026 ms). Across the table the recorded time of
relu, concat, ewadd and batchnorm does not rank with their size at all (Spearman 0.0-0.2). An op
recorded in the high state looks 0.007 ms dearer than the same op recorded in the low one, which
is the size of the differences a rewrite makes; a profile that prices an original op recorded in
one state against its rewrite recorded in another misjudges the rewrite.

The correction uses the table's own *probes*: entries of elementwise and memory ops (relu, ewadd,
concat, batchnorm ...) with fewer than :data:`PROBE_ELEMENTS` input elements, whose time is the
floor alone. In the order the entries were recorded, each entry's floor is the median of the
:data:`WINDOW` probes before it and the :data:`WINDOW` after it; the table's steady floor is the
:data:`BASE_QUANTILE` quantile of those floors (its low state); each entry's offset is its floor
above the steady one, and the steady-state time is the recorded time less the offset (the floor
is an additive host cost: it shifts a conv as much as a relu). Entries recorded in the steady
state are unchanged.

It needs the time each entry was recorded (a timing-cache file has it; a JSON export carries it
as its fifth column) and at least ``2 * WINDOW`` probes; a table without either, or of a CPU
(where small ops scale with their size and have no launch floor), is used as recorded. The
recorded times stay in the table (:attr:`~tensor_eqsat.cost.recorded.TimingTable.recorded`);
pricing uses the steady ones.

Measured effect (``benchmarks/gpu_profile_fit.py``, leave-one-model-out on the H200 data): the
eager composition fitted to steady-state times predicts the 13 optimized graphs' measured eager
speedups within 5 points on more models, and the same fit is less sensitive to its level weight
(figures in ``docs/gpu.md``).

Alternatives rejected: a per-model offset (the floor switches within one model's entries); a
multiplicative state factor (the big convs recorded in the high state are not slower in
proportion); dropping the high-state entries (half of NASNet-A's and NASRNN's own entries).
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from tensor_eqsat.ir.ops import get_op
from tensor_eqsat.ir.types import OpKind, Shape

PROBE_ELEMENTS = 1_500_000
"""An elementwise or memory op with fewer input elements than this is a floor probe (6 MB of
fp32: under 2 µs of memory traffic on a current datacenter GPU, far below its launch floor)."""

WINDOW = 6
"""Probes on each side of an entry whose median is the entry's floor."""

BASE_QUANTILE = 0.1
"""The quantile of the entries' floors taken as the table's steady (low) floor."""

PROBE_KINDS = frozenset({OpKind.ELEMENTWISE, OpKind.MEMORY})

K = TypeVar("K", bound=Hashable)


def is_probe(op: str, in_shapes: Sequence[Shape]) -> bool:
    """Whether an entry of ``op`` with these input shapes times the launch floor alone.

    >>> is_probe("relu", ((1, 64, 56, 56),)), is_probe("relu", ((1, 256, 112, 112),))
    (True, False)
    >>> is_probe("conv2d", ((1, 8, 4, 4), (8, 8, 1, 1)))
    False
    """
    if get_op(op).kind not in PROBE_KINDS:
        return False
    return sum(math.prod(s) for s in in_shapes) < PROBE_ELEMENTS


@dataclass(frozen=True)
class FloorCorrection:
    """What :func:`steady_state` did to a table.

    probes: how many entries served as floor probes.
    base_ms: the steady floor (0.0 when the table was left as recorded).
    offsets: entry key -> milliseconds taken off (only the entries that changed).
    reason: why the table was left as recorded, else "".
    """

    probes: int
    base_ms: float
    offsets: Mapping[Hashable, float] = field(default_factory=dict)
    reason: str = ""

    @property
    def applied(self) -> bool:
        return not self.reason

    def to_dict(self) -> dict[str, Any]:
        """The summary a profile's report shows (no per-entry offsets)."""
        values = sorted(self.offsets.values())
        return {
            "applied": self.applied,
            "reason": self.reason,
            "probes": self.probes,
            "base_ms": self.base_ms,
            "corrected": len(values),
            "median_offset_ms": values[len(values) // 2] if values else 0.0,
            "max_offset_ms": values[-1] if values else 0.0,
        }


Entry = tuple[Hashable, str, Sequence[Shape], float, float]
"""One recorded timing: (key, op, input shapes, ms, recorded at in seconds)."""


def floor_offsets(entries: Sequence[Entry]) -> FloorCorrection:
    """Each entry's recorded floor above the table's steady floor (see the module docstring).

    >>> low = [(i, "relu", ((1, 64),), 0.016, float(i)) for i in range(20)]
    >>> high = [(20 + i, "relu", ((1, 64),), 0.023, 20.0 + i) for i in range(20)]
    >>> conv = [(99, "conv2d", ((1, 8, 4, 4), (8, 8, 1, 1)), 0.040, 30.5)]
    >>> c = floor_offsets(low + high + conv)
    >>> round(c.base_ms, 4), round(c.offsets[99], 4), 0 in c.offsets
    (0.016, 0.007, False)
    """
    ordered = sorted(entries, key=lambda e: (e[4], str(e[0])))
    probes = [(i, e[3]) for i, e in enumerate(ordered) if is_probe(e[1], e[2])]
    if len(probes) < 2 * WINDOW:
        return FloorCorrection(len(probes), 0.0, {}, f"{len(probes)} floor probes, {2 * WINDOW} needed")
    positions = [i for i, _ in probes]
    times = [ms for _, ms in probes]
    floors: list[float] = []
    k = 0
    for i in range(len(ordered)):
        while k < len(positions) and positions[k] < i:
            k += 1
        lo, hi = max(0, k - WINDOW), min(len(times), k + WINDOW)
        floors.append(_median(sorted(times[lo:hi])))
    base = sorted(floors)[int(BASE_QUANTILE * (len(floors) - 1))]
    offsets: dict[Hashable, float] = {}
    for e, floor in zip(ordered, floors, strict=True):
        extra = floor - base
        if extra > 0:
            offsets[e[0]] = extra
    return FloorCorrection(len(probes), base, offsets)


def _median(values: Sequence[float]) -> float:
    n = len(values)
    mid = n // 2
    return values[mid] if n % 2 else 0.5 * (values[mid - 1] + values[mid])


def steady_state(
    entries: Mapping[K, float],
    recorded_at: Mapping[K, float] | None,
    decode: Mapping[K, tuple[str, Sequence[Shape]]],
    *,
    device: str = "",
) -> tuple[dict[K, float], FloorCorrection]:
    """``entries`` (key -> recorded ms) brought to the steady floor, and what was done.

    recorded_at: key -> when it was recorded (seconds; any origin); None when unknown.
    decode: key -> (op, input shapes) for the entries whose op this version knows.
    device: the table's device key; a ``cpu...`` table is left as recorded.

    An offset never takes an entry below half its recorded time (a safety bound: it does not
    bind on the H200 table).
    """
    kept = dict(entries)
    if device.startswith("cpu"):
        return kept, FloorCorrection(0, 0.0, {}, "a CPU table has no launch floor")
    if not recorded_at:
        return kept, FloorCorrection(0, 0.0, {}, "the table does not say when its entries were recorded")
    rows: list[Entry] = [
        (key, decode[key][0], decode[key][1], ms, recorded_at[key])
        for key, ms in entries.items()
        if key in decode and key in recorded_at
    ]
    correction = floor_offsets(rows)
    for key, off in correction.offsets.items():
        kept[key] = max(entries[key] - off, 0.5 * entries[key])  # type: ignore[index]
    return kept, correction
