"""Runtimes: what runs a model where it will be deployed, and the one timer every measurement uses.

A :class:`Runtime` prepares a model (a Graph, a ``.json``/``.onnx`` path, an onnx.ModelProto, or
any zero-argument callable that runs one inference) into a zero-argument callable, says which
clock times it, and whether it can run on this machine. Two implementations cover the targets:
:class:`OrtRuntime` (ONNX Runtime, CPU or its CUDA provider) and :class:`TorchRuntime` (PyTorch
eager on the CPU or a CUDA GPU, the project's :class:`~tensor_eqsat.io.torch_exec.TorchProgram`).

:func:`time_alternating` is the single timer: the never-slower guard, ``--measure``, the measured
cost models' benchmarks and the benchmarks scripts all time through it. Every model is prepared
once and warmed up, then timed in ``blocks`` alternating blocks, the order rotating from block to
block so that load drift on a shared machine affects every model alike. Given a deadline it
shortens the blocks to fit (never below one run per block), so a measurement cannot overrun a
user's time budget.

Alternatives rejected: one timer per caller (the guard and ``--measure`` had two, with two
clocks, and the guard could not be handed a fake runtime in tests); wall time for single-thread
CPU runs (it counts the waits while another process holds the core; the thread's CPU time does
not).
"""

from __future__ import annotations

import importlib.util
import math
import statistics
import time
import weakref
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from tensor_eqsat.clock import Deadline
from tensor_eqsat.errors import TensorEqsatError

Clock = Callable[[], int]
"""A clock in nanoseconds."""


@runtime_checkable
class Runtime(Protocol):
    """Something that runs models: prepare a model, time it with its clock, say if it is here.

    name: ``"ort"`` or ``"torch"`` (what reports call the backend). device: ``"cpu"`` or
    ``"cuda"``. threads: intra-op threads.
    """

    @property
    def name(self) -> str: ...

    @property
    def device(self) -> str: ...

    @property
    def threads(self) -> int: ...

    def unavailable(self) -> str | None:
        """Why this runtime cannot run here, or None when it can."""
        ...

    def prepare(self, model: Any, *, seed: int = 0) -> Callable[[], None]:
        """A zero-argument callable that runs one inference of ``model`` and waits for it."""
        ...

    def clock(self) -> Clock:
        """The clock that times one inference (nanoseconds)."""
        ...

    def session(self) -> AbstractContextManager[None]:
        """A context in which this runtime's thread settings hold."""
        ...


def thread_clock(device: str, threads: int) -> Clock:
    """The calling thread's CPU time for one CPU thread, else wall time.

    With one intra-op thread onnxruntime and PyTorch compute on the calling thread, and its CPU
    time does not grow while other processes hold the core, so timings on a shared machine are
    far steadier than wall time (which includes the waits).
    """
    return time.thread_time_ns if device == "cpu" and threads == 1 else time.perf_counter_ns


@dataclass(frozen=True)
class OrtRuntime:
    """ONNX Runtime (graph optimizations ``all``, as deployed) on the CPU or its CUDA provider.

    threads: intra-op threads. Default 1. device: ``"cpu"`` or ``"cuda"``. Default cpu.
    optimization: onnxruntime's graph optimization level. Default ``"all"``.
    """

    threads: int = 1
    device: str = "cpu"
    optimization: str = "all"
    name: str = "ort"

    def unavailable(self) -> str | None:
        if importlib.util.find_spec("onnxruntime") is None:
            return "onnxruntime is not installed (pip install 'tensor-eqsat[onnx]')"
        if self.device != "cpu":
            import onnxruntime as ort

            if "CUDAExecutionProvider" not in ort.get_available_providers():
                return "this onnxruntime has no CUDAExecutionProvider"
        return None

    def prepare(self, model: Any, *, seed: int = 0) -> Callable[[], None]:
        if callable(model) and not _is_model(model):
            return model
        from tensor_eqsat.io.equivalence import load_any
        from tensor_eqsat.io.runtime import input_specs, ort_session, random_feed
        from tensor_eqsat.ir.graph import Graph

        loaded = load_any(model)
        if isinstance(loaded, Graph):
            loaded = exported(loaded, seed)
        sess = ort_session(loaded, threads=self.threads, optimization=self.optimization, device=self.device)
        feed = random_feed(input_specs(loaded), seed, loaded)

        def run() -> None:
            sess.run(None, feed)

        return run

    def clock(self) -> Clock:
        return thread_clock(self.device, self.threads)

    def session(self) -> AbstractContextManager[None]:
        return nullcontext()  # onnxruntime sets threads per session


_EXPORTS: weakref.WeakKeyDictionary[Any, dict[int, Any]] = weakref.WeakKeyDictionary()


def exported(graph: Any, seed: int) -> Any:
    """``graph`` exported to ONNX with ``seed``'s weights, once per graph object while it lives
    (onnxruntime validates it). The guard prepares the original four times (its two arms, then
    two more in the confirmation) and the winner twice; exporting BERT's 134 MB took 6.9 s on a
    loaded 2-core CPU (load average 10), and the guard ran 46 s of a 60 s budget (issue 44)."""
    by_seed = _EXPORTS.setdefault(graph, {})
    if seed not in by_seed:
        from tensor_eqsat.io.onnx_export import export_onnx

        by_seed[seed] = export_onnx(graph, seed=seed, check=False)
    return by_seed[seed]


def remember_export(graph: Any, seed: int, model: Any) -> None:
    """Record ``model`` as ``graph``'s export with ``seed`` (one made already, for the check), so
    that :func:`exported` does not make it again."""
    _EXPORTS.setdefault(graph, {})[seed] = model


TORCH_MODES = ("eager", "graph")
"""How :class:`TorchRuntime` runs a model: each op launched from Python (``eager``), or one
forward pass captured once as a CUDA graph and replayed (``graph``, CUDA only)."""


@dataclass(frozen=True)
class TorchRuntime:
    """PyTorch on the CPU or a CUDA GPU (the project's ``TorchProgram``).

    device: ``"cpu"``, ``"cuda"`` or ``"cuda:N"``. Default cpu. threads: intra-op threads on the
    CPU. Default 1. mode: ``"eager"`` (default) or ``"graph"``: the forward pass captured once as
    a CUDA graph and replayed, as a user running under CUDA graphs does (CUDA only).

    >>> TorchRuntime(mode="graph").unavailable()
    'CUDA graphs need a CUDA device (device cpu)'
    """

    device: str = "cpu"
    threads: int = 1
    name: str = "torch"
    mode: str = "eager"

    def __post_init__(self) -> None:
        if self.mode not in TORCH_MODES:
            raise TensorEqsatError(
                f"torch runtime mode must be one of {', '.join(TORCH_MODES)}, got {self.mode!r}"
            )

    def unavailable(self) -> str | None:
        if self.mode == "graph" and not self.device.startswith("cuda"):
            return f"CUDA graphs need a CUDA device (device {self.device})"
        if importlib.util.find_spec("torch") is None:
            return "torch is not installed (pip install 'tensor-eqsat[torch]')"
        if self.device.startswith("cuda"):
            import torch

            if not torch.cuda.is_available():
                return "no CUDA device is available"
        return None

    def prepare(self, model: Any, *, seed: int = 0) -> Callable[[], None]:
        if callable(model) and not _is_model(model):
            return model
        from tensor_eqsat.io.equivalence import load_any
        from tensor_eqsat.io.torch_exec import TorchProgram
        from tensor_eqsat.ir.graph import Graph

        loaded = load_any(model)
        if not isinstance(loaded, Graph):
            from tensor_eqsat.io.onnx_import import import_onnx

            loaded = import_onnx(loaded)
        prog = TorchProgram(loaded, device=self.device, seed=seed)
        inputs = prog.random_inputs(seed)
        if self.mode == "graph":
            return _cuda_graph(prog, inputs)

        def run() -> None:
            prog(inputs)
            prog.synchronize()

        return run

    def clock(self) -> Clock:
        return thread_clock("cpu" if self.device == "cpu" else "cuda", self.threads)

    def session(self) -> AbstractContextManager[None]:
        return _torch_threads(self.threads) if self.device == "cpu" else nullcontext()


def _cuda_graph(prog: Any, inputs: Any, warmup: int = 3) -> Callable[[], None]:
    """One forward pass of ``prog`` on ``inputs`` captured as a CUDA graph (after ``warmup``
    runs on a side stream, as PyTorch requires): the callable replays it and waits."""
    torch = prog.torch
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.inference_mode(), torch.cuda.stream(stream):
        for _ in range(max(1, warmup)):
            prog(inputs)
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.inference_mode(), torch.cuda.graph(graph):
        prog(inputs)

    def replay() -> None:
        graph.replay()
        prog.synchronize()

    return replay


@contextmanager
def _torch_threads(threads: int) -> Iterator[None]:
    from tensor_eqsat.io.torch_exec import torch_threads

    with torch_threads(threads):
        yield


def _is_model(obj: Any) -> bool:
    """Whether ``obj`` is a model to load rather than a ready inference callable."""
    from tensor_eqsat.ir.graph import Graph

    return isinstance(obj, Graph | str) or hasattr(obj, "graph") or hasattr(obj, "__fspath__")


def make_runtime(backend: str, device: str = "cpu", threads: int = 1) -> Runtime:
    """The runtime called ``backend`` (``"ort"`` or ``"torch"``) on ``device``.

    >>> make_runtime("ort").name, make_runtime("torch", "cuda").device
    ('ort', 'cuda')
    """
    if backend == "ort":
        return OrtRuntime(threads=threads, device=device)
    if backend == "torch":
        return TorchRuntime(device=device, threads=threads)
    raise TensorEqsatError(f"unknown runtime {backend!r} (expected ort or torch)")


def time_runs(fn: Callable[[], None], n: int, clock: Clock = time.perf_counter_ns) -> list[float]:
    """Milliseconds of ``n`` timed calls of ``fn`` by ``clock``."""
    out = []
    for _ in range(n):
        t0 = clock()
        fn()
        out.append((clock() - t0) / 1e6)
    return out


@dataclass(frozen=True)
class AlternatingTimes:
    """Per model: every timed run (ms) and the median of each block."""

    times: list[list[float]]
    block_medians: list[list[float]]

    def median(self, i: int) -> float:
        return statistics.median(self.times[i])

    @property
    def runs(self) -> int:
        """Timed runs per model (the fewest, if a deadline shortened the last block)."""
        return min(len(t) for t in self.times)


def _calls_per_run(call_s: float, min_run_ms: float) -> int:
    """Consecutive calls in one timed run: enough that ``call_s``-second calls last at least
    ``min_run_ms`` together (one when they do alone, or when ``min_run_ms`` is 0).

    >>> _calls_per_run(0.0004, 5.0), _calls_per_run(0.008, 5.0), _calls_per_run(0.0004, 0.0)
    (13, 1, 1)
    """
    if min_run_ms <= 0 or call_s * 1e3 >= min_run_ms:
        return 1
    return max(1, math.ceil(min_run_ms / max(call_s * 1e3, 1e-6)))


def _repeated(fn: Callable[[], None], calls: int) -> Callable[[], None]:
    def run() -> None:
        for _ in range(calls):
            fn()

    return run


def time_alternating(
    models: Sequence[Any],
    runtime: Runtime,
    *,
    runs: int = 40,
    blocks: int = 8,
    warmup: int = 5,
    seed: int = 0,
    deadline: Deadline | None = None,
    min_run_ms: float = 0.0,
) -> AlternatingTimes:
    """Time ``models`` in ``runtime`` in alternating blocks (see the module docstring).

    models: Graphs, ONNX paths, ModelProtos, or zero-argument callables.
    runs: timed runs per model. Default 40. blocks: alternating blocks. Default 8.
    warmup: untimed runs per model. Default 5. seed: seed of random inputs. Default 0.
    deadline: when given, after the warm-up the runs per block are cut so that every block fits
        in the time left (at least one run per block).
    min_run_ms: where the models' mean warm-up call is shorter, each timed run is that many
        consecutive calls, every arm the same number, as many as make it at least this long; the
        times are per call (the run's time over its calls). A single call of a fraction of a
        millisecond is mostly the clock's and the scheduler's jitter: on a two-core CPU the
        guard's median noise on a 0.475 ms decode graph was ±21.0 % one call a run, ±12.1 % in
        runs of 2 ms, ±8.6 % in runs of 5 ms (``benchmarks/guard_runs.py``, issue 42). Default
        0: one call a run.

    Raises TensorEqsatError when the runtime cannot run here or ``runs < blocks``.

    >>> ticks = iter(range(0, 10**9, 1000))
    >>> class Fake:
    ...     name, device, threads = "fake", "cpu", 1
    ...     def unavailable(self): return None
    ...     def prepare(self, model, *, seed=0): return lambda: None
    ...     def clock(self): return lambda: next(ticks)
    ...     def session(self): return nullcontext()
    >>> t = time_alternating(["a", "b"], Fake(), runs=4, blocks=2, warmup=1)
    >>> t.runs, t.median(0)
    (4, 0.001)
    """
    why = runtime.unavailable()
    if why is not None:
        raise TensorEqsatError(f"runtime {runtime.name} on {runtime.device} cannot run here: {why}")
    if blocks < 1 or runs < blocks:
        raise TensorEqsatError(f"need runs >= blocks >= 1, got runs={runs}, blocks={blocks}")
    clock = runtime.clock()
    with runtime.session():
        arms = [runtime.prepare(m, seed=seed) for m in models]
        t_warm = time.perf_counter()
        for fn in arms:
            time_runs(fn, max(1, warmup), clock)
        per_run = (time.perf_counter() - t_warm) / max(1, warmup)  # all arms, one run each
        calls = _calls_per_run(per_run / len(arms), min_run_ms)
        if calls > 1:
            arms = [_repeated(fn, calls) for fn in arms]
            per_run *= calls
        per = [runs // blocks + (1 if k < runs % blocks else 0) for k in range(blocks)]
        left = None if deadline is None else deadline.left()
        if left is not None and per_run > 0:
            fit = max(1, int(max(left, 0.0) / per_run / blocks))
            per = [min(n, fit) for n in per]
        times: list[list[float]] = [[] for _ in arms]
        medians: list[list[float]] = [[] for _ in arms]
        for k, n in enumerate(per):
            order = list(range(len(arms)))
            order = order[k % len(arms) :] + order[: k % len(arms)]
            for a in order:
                ts = [t / calls for t in time_runs(arms[a], n, clock)]
                times[a].extend(ts)
                medians[a].append(statistics.median(ts))
    return AlternatingTimes(times, medians)
