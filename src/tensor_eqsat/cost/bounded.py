"""Measured cost models time operators within the call's deadline (issue 44, item 8).

A measured cost model (:mod:`tensor_eqsat.cost.measured`, :mod:`tensor_eqsat.cost.ort`) prices an
op configuration it has not seen by running it: warm-up runs, then timed runs. For a large
activation that is seconds per configuration, and nothing bounded it: an ONNX input with a 4M×64
activation searched 75-122 s of a 30 s budget. So each such model carries a :class:`TimingBound`:

- before its deadline, a configuration is timed as before, and the ratio of its time to the
  analytic CPU roofline's price of it is remembered (and its time, for the operators the
  roofline does not price);
- a configuration whose timing would start past the deadline (or whose roofline price says one
  run of it alone exceeds the time left) is priced instead by the roofline times the median of
  those ratios (1 before any), and not cached: the next run, with time, measures it;
- the timing loops stop after their first timed run once the deadline has passed.

Alternatives rejected: stopping the search at the deadline only (one configuration ran for tens
of seconds inside a single cost call), and dropping the unseen configuration (a cost model must
price every e-node).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any

from tensor_eqsat.clock import Deadline
from tensor_eqsat.ir.ops import OpSpec

ESTIMATE_SPEC = "roofline:cpu"
"""The analytic model whose price, scaled by what was measured, stands in for a timing."""


@dataclass
class TimingBound:
    """The deadline of one measured cost model's timings, and what stands in after it.

    deadline: None for no bound (the default: a cost model used alone times everything).
    estimated: configurations priced by the scaled roofline instead of timed.
    """

    deadline: Deadline | None = None
    estimated: int = 0
    _ratios: list[float] = field(default_factory=list, repr=False)
    _timed: list[float] = field(default_factory=list, repr=False)
    _roofline: Any = field(default=None, repr=False)

    def _roofline_ms(self, spec: OpSpec, attrs: Any, in_shapes: tuple[Any, ...]) -> float | None:
        """The roofline's price, None where it has none (an opaque operator)."""
        if self._roofline is None:
            from tensor_eqsat.cost.spec import parse_cost_model

            self._roofline = parse_cost_model(ESTIMATE_SPEC)
        try:
            return float(self._roofline.kernel_ms(spec, attrs, in_shapes))
        except Exception:  # (an op the roofline does not price: the measured median stands in)
            return None

    def should_estimate(self, spec: OpSpec, attrs: Any, in_shapes: tuple[Any, ...]) -> bool:
        """Whether to price this configuration without timing it: past the deadline, or where
        the scaled roofline says one run alone would not end before it."""
        left = None if self.deadline is None else self.deadline.left()
        if left is None:
            return False
        return left <= 0 or self.estimate(spec, attrs, in_shapes, count=False) / 1e3 > left

    def expired(self) -> bool:
        return self.deadline is not None and self.deadline.expired()

    def estimate(self, spec: OpSpec, attrs: Any, in_shapes: tuple[Any, ...], *, count: bool = True) -> float:
        """The roofline's price of the configuration times the median measured ratio."""
        if count:
            self.estimated += 1
        roof = self._roofline_ms(spec, attrs, in_shapes)
        if roof is None:
            return statistics.median(self._timed) if self._timed else 1e-4
        scale = statistics.median(self._ratios) if self._ratios else 1.0
        return max(roof * scale, 1e-4)

    def learn(self, ms: float, spec: OpSpec, attrs: Any, in_shapes: tuple[Any, ...]) -> None:
        """Remember a timed configuration's ratio to the roofline's price of it."""
        if self.deadline is None:
            return
        self._timed.append(ms)
        roof = self._roofline_ms(spec, attrs, in_shapes)
        if roof is not None and roof > 0 and ms > 0:
            self._ratios.append(ms / roof)


def bound_timing(cost_model: Any, deadline: Deadline | None) -> None:
    """Bound ``cost_model``'s timings by ``deadline`` where it times operators (a measured cost
    model); any other cost model is left as it is."""
    bound = getattr(cost_model, "timing_bound", None)
    if isinstance(bound, TimingBound):
        bound.deadline = deadline
