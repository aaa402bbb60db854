"""Measured latency of a Graph or ONNX model in onnxruntime or PyTorch eager.

Method: build the session or program once, run ``warmup`` times untimed, then time ``runs``
single inferences with the runtime's clock (:mod:`tensor_eqsat.target.runtime`, the one timer
the guard uses too; CUDA work is synchronized inside each timed run) and report the median,
with mean, min, max and the interquartile range so noise is visible.
:func:`compare_latency` measures an original and an optimized model in alternating blocks, so
that drift in machine load (shared machines) affects both alike; its speedup is the ratio of
medians.

Both backends run the model as deployed: weight-only subgraphs folded (DESIGN.md decision 4),
1 intra-op thread by default (2-thread timings on small shared machines are erratic), inputs the
interpreter's seeded random values.

Alternatives rejected: the mean (one preemption skews it), the minimum (optimistic, hides the
cost of memory traffic that varies run to run), measuring A fully then B (load drift becomes a
fake speedup).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any

from tensor_eqsat.errors import TensorEqsatError
from tensor_eqsat.target.runtime import Runtime, make_runtime, time_alternating

BACKENDS = ("ort", "torch")


@dataclass(frozen=True)
class LatencyReport:
    """Timings of one model on one backend, in milliseconds.

    median_ms is the figure to quote; q1_ms and q3_ms bound the middle half of the runs.
    """

    backend: str
    device: str
    threads: int
    runs: int
    warmup: int
    median_ms: float
    mean_ms: float
    min_ms: float
    max_ms: float
    q1_ms: float
    q3_ms: float
    times_ms: tuple[float, ...]

    def to_dict(self, *, with_times: bool = False) -> dict[str, Any]:
        """JSON-ready form (the individual times only when asked)."""
        out = {k: getattr(self, k) for k in self.__dataclass_fields__ if k != "times_ms"}
        if with_times:
            out["times_ms"] = list(self.times_ms)
        return out


@dataclass(frozen=True)
class LatencyComparison:
    """An original and an optimized model measured alternately; speedup = ratio of medians."""

    original: LatencyReport
    optimized: LatencyReport

    @property
    def speedup(self) -> float:
        return self.original.median_ms / self.optimized.median_ms


def _report(ms: list[float], backend: str, device: str, threads: int, warmup: int) -> LatencyReport:
    q = statistics.quantiles(ms, n=4) if len(ms) >= 2 else [ms[0], ms[0], ms[0]]
    return LatencyReport(
        backend=backend,
        device=device,
        threads=threads,
        runs=len(ms),
        warmup=warmup,
        median_ms=statistics.median(ms),
        mean_ms=statistics.fmean(ms),
        min_ms=min(ms),
        max_ms=max(ms),
        q1_ms=q[0],
        q3_ms=q[2],
        times_ms=tuple(ms),
    )


def measure_latency(
    model: Any,
    *,
    backend: str = "ort",
    threads: int = 1,
    runs: int = 50,
    warmup: int = 10,
    device: str = "cpu",
    seed: int = 0,
) -> LatencyReport:
    """Median latency of one inference of ``model`` (Graph, ``.json``/``.onnx`` path or ModelProto).

    backend: ``"ort"`` (onnxruntime) or ``"torch"`` (PyTorch eager). Default "ort".
    threads: intra-op threads. Default 1.
    runs / warmup: timed and untimed inferences. Defaults 50 and 10.
    device: ``"cpu"`` or ``"cuda"``. Default cpu.
    seed: seed of random inputs and of weights without data. Default 0.

    Timed by the runtime's clock (:func:`tensor_eqsat.target.runtime.time_alternating`).

    >>> from tensor_eqsat.ir.graph import Graph
    >>> g = Graph(); x = g.input((1, 8), name="x"); g.output(g.relu(x))
    >>> r = measure_latency(g, runs=5, warmup=1)
    >>> r.runs, r.median_ms > 0
    (5, True)
    """
    if runs < 1 or warmup < 0:
        raise TensorEqsatError(f"runs must be >= 1 and warmup >= 0, got {runs} and {warmup}")
    runtime = _runtime(backend, device, threads)
    timed = time_alternating([model], runtime, runs=runs, blocks=1, warmup=warmup, seed=seed)
    return _report(timed.times[0], backend, runtime.device, threads, warmup)


def compare_latency(
    original: Any,
    optimized: Any,
    *,
    backend: str = "ort",
    threads: int = 1,
    runs: int = 50,
    warmup: int = 10,
    device: str = "cpu",
    seed: int = 0,
    blocks: int = 5,
) -> LatencyComparison:
    """Measure two models alternately (``blocks`` blocks of ``runs / blocks`` runs each).

    Arguments as :func:`measure_latency`; each model gets ``runs`` timed runs in total.
    """
    if runs < blocks or blocks < 1:
        raise TensorEqsatError(f"need runs >= blocks >= 1, got runs={runs}, blocks={blocks}")
    runtime = _runtime(backend, device, threads)
    timed = time_alternating(
        [original, optimized], runtime, runs=runs, blocks=blocks, warmup=warmup, seed=seed
    )
    a, b = (_report(t, backend, runtime.device, threads, warmup) for t in timed.times)
    return LatencyComparison(a, b)


def _runtime(backend: str, device: str, threads: int) -> Runtime:
    if backend not in BACKENDS:
        raise TensorEqsatError(f"unknown backend {backend!r} (expected one of {', '.join(BACKENDS)})")
    return make_runtime(backend, "cuda" if device.startswith("cuda") else "cpu", threads)
