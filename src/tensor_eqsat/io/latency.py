"""Measured latency of a Graph or ONNX model in onnxruntime or PyTorch eager.

Method: build the session or program once, run ``warmup`` times untimed, then time ``runs``
single inferences with ``time.perf_counter_ns`` (CUDA work is synchronized inside each timed
run) and report the median, with mean, min, max and the interquartile range so noise is visible.
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
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from tensor_eqsat.errors import TensorEqsatError

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


def _report(times_ns: list[int], backend: str, device: str, threads: int, warmup: int) -> LatencyReport:
    ms = [t / 1e6 for t in times_ns]
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


def prepare_runner(
    model: Any,
    *,
    backend: str = "ort",
    threads: int = 1,
    device: str = "cpu",
    seed: int = 0,
    ort_optimization: str = "all",
) -> tuple[Callable[[], None], str]:
    """A zero-argument callable running one inference, and the device it runs on.

    model: a Graph, ``.json`` or ``.onnx`` path, or onnx.ModelProto.
    """
    from tensor_eqsat.io.equivalence import load_any

    loaded = load_any(model)
    if backend == "ort":
        from tensor_eqsat.io.runtime import input_specs, ort_session, random_feed
        from tensor_eqsat.ir.graph import Graph

        if isinstance(loaded, Graph):
            from tensor_eqsat.io.onnx_export import export_onnx

            loaded = export_onnx(loaded, seed=seed)
        dev = "cuda" if device.startswith("cuda") else "cpu"
        sess = ort_session(loaded, threads=threads, optimization=ort_optimization, device=dev)
        feed = random_feed(input_specs(loaded), seed, loaded)

        def run_ort() -> None:
            sess.run(None, feed)

        return run_ort, dev
    if backend == "torch":
        from tensor_eqsat.io.torch_exec import TorchProgram
        from tensor_eqsat.ir.graph import Graph

        if not isinstance(loaded, Graph):
            from tensor_eqsat.io.onnx_import import import_onnx

            loaded = import_onnx(loaded)
        prog = TorchProgram(loaded, device=device, seed=seed)
        inputs = prog.random_inputs(seed)

        def run() -> None:
            prog(inputs)
            prog.synchronize()

        return run, prog.device
    raise TensorEqsatError(f"unknown backend {backend!r} (expected one of {', '.join(BACKENDS)})")


@contextmanager
def runtime_threads(backend: str, threads: int) -> Iterator[None]:
    """Run the block with ``threads`` intra-op threads for PyTorch (onnxruntime sets its own per
    session)."""
    if backend == "torch":
        from tensor_eqsat.io.torch_exec import torch_threads

        with torch_threads(threads):
            yield
    else:
        yield


def time_runs(fn: Callable[[], None], n: int, clock: Callable[[], int] = time.perf_counter_ns) -> list[int]:
    """``n`` calls of ``fn``, each timed by ``clock`` (nanoseconds)."""
    out = []
    for _ in range(n):
        t0 = clock()
        fn()
        out.append(clock() - t0)
    return out


def measure_latency(
    model: Any,
    *,
    backend: str = "ort",
    threads: int = 1,
    runs: int = 50,
    warmup: int = 10,
    device: str = "cpu",
    seed: int = 0,
    ort_optimization: str = "all",
) -> LatencyReport:
    """Median latency of one inference of ``model`` (Graph, ``.json``/``.onnx`` path or ModelProto).

    backend: ``"ort"`` (onnxruntime) or ``"torch"`` (PyTorch eager). Default "ort".
    threads: intra-op threads. Default 1.
    runs / warmup: timed and untimed inferences. Defaults 50 and 10.
    device: ``"cpu"``, ``"cuda"`` or ``"auto"`` (torch; onnxruntime needs its CUDA provider).
    seed: seed of random inputs and of weights without data. Default 0.
    ort_optimization: onnxruntime graph optimization level (``disable basic extended all``).

    >>> from tensor_eqsat.ir.graph import Graph
    >>> g = Graph(); x = g.input((1, 8), name="x"); g.output(g.relu(x))
    >>> r = measure_latency(g, runs=5, warmup=1)
    >>> r.runs, r.median_ms > 0
    (5, True)
    """
    if runs < 1 or warmup < 0:
        raise TensorEqsatError(f"runs must be >= 1 and warmup >= 0, got {runs} and {warmup}")
    with runtime_threads(backend, threads):
        fn, dev = prepare_runner(
            model,
            backend=backend,
            threads=threads,
            device=device,
            seed=seed,
            ort_optimization=ort_optimization,
        )
        time_runs(fn, warmup)
        times = time_runs(fn, runs)
    return _report(times, backend, dev, threads, warmup)


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
    ort_optimization: str = "all",
    blocks: int = 5,
) -> LatencyComparison:
    """Measure two models alternately (``blocks`` blocks of ``runs / blocks`` runs each).

    Arguments as :func:`measure_latency`; each model gets ``runs`` timed runs in total.
    """
    if runs < blocks or blocks < 1:
        raise TensorEqsatError(f"need runs >= blocks >= 1, got runs={runs}, blocks={blocks}")
    kw: dict[str, Any] = {
        "backend": backend,
        "threads": threads,
        "device": device,
        "seed": seed,
        "ort_optimization": ort_optimization,
    }
    with runtime_threads(backend, threads):
        fa, dev = prepare_runner(original, **kw)
        fb, _ = prepare_runner(optimized, **kw)
        time_runs(fa, warmup)
        time_runs(fb, warmup)
        ta: list[int] = []
        tb: list[int] = []
        per = [runs // blocks + (1 if k < runs % blocks else 0) for k in range(blocks)]
        for k, n in enumerate(per):
            # Alternate which model goes first, so neither always runs on a cold cache.
            first, second = ((fa, ta), (fb, tb)) if k % 2 == 0 else ((fb, tb), (fa, ta))
            first[1].extend(time_runs(first[0], n))
            second[1].extend(time_runs(second[0], n))
    return LatencyComparison(
        _report(ta, backend, dev, threads, warmup), _report(tb, backend, dev, threads, warmup)
    )
