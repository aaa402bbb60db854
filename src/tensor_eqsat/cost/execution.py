"""Execution modes: what one op adds to a whole forward pass, from its isolated timing.

A timing table holds *isolated* times: each op alone, between two CUDA events, with the device
idle before it (TASO's method). A whole graph does not cost the sum of those:

* In **eager** PyTorch (what ``--target cuda`` and the ``h200`` profile price) the host issues one
  op after another while the GPU runs the queue. An isolated time includes a fixed cost of being
  timed alone (the event pair, the idle device catching up with the host: ``event_ms``) that a
  pipelined op does not pay; and no op costs less than the host's launch of it (``launch_ms``),
  so small kernels hide under that floor: ``max(launch_ms, isolated - event_ms)``. Views
  (reshape, transpose, split) launch no kernel but still cost the host a call (``view_ms``).
  A forward pass as a whole adds a fixed cost (``pass_ms``: the call, its set-up and the
  synchronisation that ends it), once per graph: it moves every graph's price by the same amount,
  so it changes no extraction, but it keeps the predicted *percentage* honest for small graphs.
* **isolated** (no composition) is TASO's sum of kernel times, kept for ``roofline`` and for
  ``recorded:...`` models built with ``mode="isolated"``.

A CUDA-graph replay mode (no host launches, only GPU time) is not offered: the table's isolated
times are dominated by host-side dispatch for most ops, and nothing in the calibration data
separates an op's GPU time from its launch well enough to price replays (the H200 data has
whole-graph replay latencies, but 26 graphs cannot fix a per-op GPU time for 932 configurations).

**Why per op.** The e-graph extractors (greedy and ILP) sum per-node costs, so the composition is
applied to each op's price and stays additive: the graph's price is still a sum, every extractor
optimises exactly what is reported, and a graph's cost is the same whether it is priced whole or
node by node. The effect it leaves out is an op hiding under *another* op's long kernel (the host
running ahead while the GPU is busy): a non-additive max over the whole graph that no per-node
extractor can optimise exactly.

The four constants are fitted to whole-graph eager latencies (``fit_eager_launch``; the H200
values and the data they come from are in the ``h200`` profile file).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import numpy as np


class ExecutionMode(StrEnum):
    """How a graph runs on its target: ``eager`` (PyTorch eager launches) or ``isolated`` (the
    sum of isolated kernel times, TASO's model)."""

    EAGER = "eager"
    ISOLATED = "isolated"


@dataclass(frozen=True)
class EagerLaunch:
    """The eager composition of isolated op times (see the module docstring).

    launch_ms: the least an op costs in an eager pass (the host's launch). Must be >= 0.
    event_ms: the part of an isolated time that a pipelined op does not pay. Must be >= 0.
    view_ms: the host cost of a view op (no kernel). Must be >= 0.
    source: where the numbers come from (one line).
    pass_ms: the fixed cost of one forward pass, added once to a graph's price. Must be >= 0.

    >>> e = EagerLaunch(launch_ms=0.007, event_ms=0.009, view_ms=0.003)
    >>> round(e.op_ms(0.016), 4), round(e.op_ms(0.100), 4)   # a small op hides under the floor
    (0.007, 0.091)
    """

    launch_ms: float
    event_ms: float
    view_ms: float
    source: str = ""
    pass_ms: float = 0.0

    def __post_init__(self) -> None:
        for name in ("launch_ms", "event_ms", "view_ms", "pass_ms"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ValueError(f"EagerLaunch: {name} must be a number, got {value!r}")
            if not (math.isfinite(value) and value >= 0):
                raise ValueError(f"EagerLaunch: {name} must be a finite number >= 0, got {value!r}")

    def op_ms(self, isolated_ms: float) -> float:
        """What an op timed at ``isolated_ms`` alone adds to an eager pass."""
        return max(self.launch_ms, isolated_ms - self.event_ms)

    def to_dict(self) -> dict[str, Any]:
        return {
            "launch_ms": self.launch_ms,
            "event_ms": self.event_ms,
            "view_ms": self.view_ms,
            "pass_ms": self.pass_ms,
            "source": self.source,
        }

    @classmethod
    def from_dict(cls, data: Any, where: str = "<dict>") -> EagerLaunch:
        """Read the form :meth:`to_dict` writes; ValueError naming ``where`` and the field.
        ``pass_ms`` may be absent (an older profile): 0."""
        if not isinstance(data, dict):
            raise ValueError(f"{where}: 'eager' must be an object")
        try:
            return cls(
                float(data["launch_ms"]),
                float(data["event_ms"]),
                float(data["view_ms"]),
                str(data.get("source", "")),
                pass_ms=float(data.get("pass_ms", 0.0)),
            )
        except KeyError as exc:
            raise ValueError(f"{where}: 'eager' lacks field {exc.args[0]!r}") from None
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{where}: 'eager': {exc}") from None


DEFAULT_EAGER = EagerLaunch(
    launch_ms=0.00421,
    event_ms=0.00628,
    view_ms=0.0,
    pass_ms=0.38669,
    source=(
        "fitted to the eager latencies of 26 graphs (13 zoo models, original and optimized) on an "
        "NVIDIA H200 with PyTorch 2.11, the table at its steady launch floor "
        "(calibration/h200-2026-11/whole_graph.json; benchmarks/gpu_profile_fit.py --export)"
    ),
)
"""The composition used when a table or device brings none of its own: the H200 fit. Launch
costs are the host's (Python and PyTorch dispatch), so they carry over between GPUs better than
kernel times do."""


GraphSample = tuple[Sequence[float], int, float]
"""One whole-graph measurement: (isolated ms of each costed op, number of view ops, eager ms)."""


def eager_graph_ms(launch: EagerLaunch, isolated: Sequence[float] | np.ndarray, views: int) -> float:
    """The eager price of a graph whose costed ops have these isolated times, with ``views`` views.

    ``isolated`` may be a numpy array (the fit prices each graph thousands of times).

    >>> eager_graph_ms(EagerLaunch(0.01, 0.0, 0.002, pass_ms=0.03), [0.005, 0.05], 2)
    0.094
    """
    times = np.asarray(isolated, dtype=float)
    # EagerLaunch.op_ms over every op at once.
    kernels = float(np.maximum(launch.launch_ms, times - launch.event_ms).sum()) if times.size else 0.0
    return round(kernels + launch.view_ms * views + launch.pass_ms, 12)


def fit_eager_launch(
    pairs: Sequence[tuple[GraphSample, GraphSample]],
    *,
    speedup_weight: float = 1.0,
    level_weight: float = 100.0,
    source: str = "",
    fit_pass: bool = True,
) -> EagerLaunch:
    """Fit the composition to whole-graph eager latencies of (original, optimized) pairs.

    fit_pass: fit ``pass_ms`` too (default); False keeps it at 0 (the three-constant composition,
    for comparison).

    All four constants (launch, event, view, pass) are fitted. The loss is ``speedup_weight``
    times the squared error of each pair's predicted speedup (in
    points) plus ``level_weight`` times the squared relative error of each graph's latency: the
    speedups are what a search acts on, and the levels keep the constants physical. Coordinate
    descent from three fixed starts on a fixed step ladder (deterministic). Raises ValueError for
    no pairs.

    >>> big = ([0.1] * 10, 0, 1.0)
    >>> fast = ([0.1] * 5, 0, 0.5)
    >>> e = fit_eager_launch([(big, fast)])
    >>> round(e.op_ms(0.1), 2)
    0.1
    """
    if not pairs:
        raise ValueError("fit_eager_launch: no whole-graph measurements")
    Params = tuple[float, float, float, float]  # launch, event, view, pass
    graphs = [
        (np.asarray(a[0], dtype=float), a[1], a[2], np.asarray(b[0], dtype=float), b[1], b[2])
        for a, b in pairs
    ]

    def loss(p: Params) -> float:
        e = EagerLaunch(p[0], p[1], p[2], pass_ms=p[3])
        total = 0.0
        for ia, va, ma, ib, vb, mb in graphs:
            pa, pb = eager_graph_ms(e, ia, va), eager_graph_ms(e, ib, vb)
            predicted = 100.0 * (pa - pb) / pa
            measured = 100.0 * (ma - mb) / ma
            total += speedup_weight * (predicted - measured) ** 2
            total += level_weight * ((pa / ma - 1) ** 2 + (pb / mb - 1) ** 2)
        return total

    best: tuple[float, Params] | None = None
    starts: list[Params] = [(0.015, 0.01, 0.005, 0.05), (0.025, 0.02, 0.0, 0.0), (0.01, 0.0, 0.01, 0.1)]
    if not fit_pass:
        starts = [(a, b, c, 0.0) for a, b, c, _ in starts]
    for start in starts:
        p: Params = start
        cur = loss(p)
        for _ in range(300):
            improved = False
            for i in range(4 if fit_pass else 3):
                for step in (0.004, 0.001, 0.00025, 0.0001, 0.00002):
                    for sign in (-1.0, 1.0):
                        q = list(p)
                        q[i] = max(0.0, q[i] + sign * step)
                        cand: Params = (q[0], q[1], q[2], q[3])
                        lq = loss(cand)
                        if lq < cur - 1e-12:
                            p, cur, improved = cand, lq, True
            if not improved:
                break
        if best is None or cur < best[0]:
            best = (cur, p)
    assert best is not None
    launch, event, view, fixed = (round(v, 6) for v in best[1])
    return EagerLaunch(launch, event, view, source, pass_ms=fixed)
