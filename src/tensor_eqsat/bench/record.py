"""What one experiment produces: a :class:`RunRecord` (finished) or a :class:`RunFailure`.

A run record holds exactly what the paper's tables and figures need, as plain data that
pickles (worker processes, Ray tasks) and round-trips through the results database: original
and optimized cost (ms, under the sweep's cost model), speedup %, the optimizer's own wall time,
the stop reason, rule-application counts by rule id (0-138 for the paper's rules) and the
per-step log. ``run_wall_s`` is measured by the sweep around the whole experiment (model build
included) and is filled in by it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from tensor_eqsat.bench.grid import BenchError


def speedup_pct(original: float, optimized: float) -> float:
    """The paper's runtime speedup: (original − optimized) / original × 100.

    >>> speedup_pct(2.0, 1.5)
    25.0
    """
    if not original > 0:
        raise BenchError(f"original cost must be positive to compute a speedup, got {original!r}")
    return (original - optimized) / original * 100.0


@dataclass(frozen=True)
class RunRecord:
    """The result of one finished experiment.

    original_cost_ms, optimized_cost_ms: cost of the original and the optimized graph.
    speedup_pct: (original − optimized) / original × 100.
    wall_s: the optimizer's total wall time (construction and every extraction).
    stop_reason: why construction stopped (node limit, saturated, ...).
    rule_counts: rule id -> how many times it was applied (MCTS: chosen as a real step;
        TENSAT: iterations in which it applied).
    steps: the per-step log, one JSON object per real step.
    extra: further JSON data the optimizer reports (e.g. ILP status), stored as is.
    run_wall_s: wall time of the whole experiment as measured by the sweep (model build
        included); 0 until the sweep sets it.
    """

    original_cost_ms: float
    optimized_cost_ms: float
    speedup_pct: float
    wall_s: float
    stop_reason: str
    rule_counts: Mapping[int, int] = field(default_factory=dict)
    steps: Sequence[Mapping[str, Any]] = ()
    extra: Mapping[str, Any] = field(default_factory=dict)
    run_wall_s: float = 0.0

    def __post_init__(self) -> None:
        for name in ("original_cost_ms", "optimized_cost_ms", "speedup_pct", "wall_s", "run_wall_s"):
            value = getattr(self, name)
            if not isinstance(value, int | float) or not math.isfinite(value):
                raise BenchError(f"run record: {name} must be a finite number, got {value!r}")
        counts: dict[int, int] = {}
        for rule, n in self.rule_counts.items():
            try:
                rid, count = int(rule), int(n)
            except (TypeError, ValueError):
                raise BenchError(f"run record: rule count {rule!r}: {n!r} is not an integer pair") from None
            if rid < 0 or count < 0:
                raise BenchError(f"run record: rule count {rule!r}: {n!r} must be non-negative")
            if count:
                counts[rid] = count
        object.__setattr__(self, "rule_counts", dict(sorted(counts.items())))
        object.__setattr__(self, "steps", [dict(s) for s in self.steps])
        object.__setattr__(self, "extra", dict(self.extra))

    def with_run_wall(self, seconds: float) -> RunRecord:
        """A copy with ``run_wall_s`` set."""
        return replace(self, run_wall_s=seconds)


@dataclass(frozen=True)
class RunFailure:
    """An experiment that raised (or whose worker died). Stored apart from the results; a rerun
    of the sweep tries the experiment again.

    error: one line, ``ExceptionType: message``.
    traceback: the formatted traceback ('' when the worker process died).
    run_wall_s: time until the failure.
    """

    error: str
    traceback: str = ""
    run_wall_s: float = 0.0
