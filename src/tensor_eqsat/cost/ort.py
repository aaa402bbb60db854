"""ONNX Runtime measured cost model: price each op configuration as ONNX Runtime runs it.

TASO's method (../reference/taso.md §2.1) applied to the runtime an ONNX model is deployed in.
Each distinct op configuration is exported (with :func:`~tensor_eqsat.io.onnx_export.export_onnx`,
so exactly as a whole graph would be) as a small ONNX model and timed in an onnxruntime session
with the same settings as :mod:`tensor_eqsat.io.latency` (graph optimizations ``all``, a fixed
intra-op thread count, sequential execution): ``warmup`` untimed runs, then timed runs alternating
between the models being compared, and the median.

What is timed is the op's *marginal* cost inside a graph, not one session call:

* an op whose output has the shape of its first input (element-wise ops, same-padded stride-1
  convs, pools that keep the size, softmax, layer norm...) is timed as a chain of two instances
  and of one, and the cost is the difference. The chain keeps what onnxruntime does between ops
  in a real graph (its NCHWc layout transform reorders a conv's input once per chain, not once
  per conv; the session call and the output copy are paid once), so a depthwise conv is not
  charged the reorders a dense one amortises;
* any other op is timed alone, less the time of a trivial one-op session (the call overhead).

Weights are timed where a whole model finds them. In a real model every weight is read once per
inference, while a micro-benchmark repeating one op keeps its weights in the core's own caches: a
1x512 by 512x512 matmul takes 10 us so and about 60 us with its 1 MB weight coming from DRAM.
So when an op's weights are at least :data:`COLD_WEIGHT_BYTES`, a buffer is read before
every timed run (outside the timed region): with ``weights="dram"`` twice the last-level cache
(the weights come from memory, as in a model whose weights do not fit in that cache, e.g.
ResNet-50's 100 MB), with ``weights="llc"`` twice the core's private caches (the weights come
from the last-level cache, as in a model whose weights fit there). :func:`weights_for` picks
one from a graph's weight bytes.

What onnxruntime fuses is priced as the fused unit: a conv or matmul with a fused activation is
exported as Conv/MatMul + Relu, which onnxruntime fuses, and timed together. A per-channel bias
add or scale (``ewadd``/``ewmul`` with a weight operand that broadcasts along one axis of size C,
as the ONNX importer writes a Conv's or Gemm's bias) and ``batchnorm`` on a 4-d input are folded
into the preceding Conv/Gemm by onnxruntime (ConvAddFusion, ConvMulFusion, ConvBNFusion,
MatMulAddFusion), so they cost :data:`FUSED_EPILOGUE` of their standalone time, a calibrated
fraction (0: what the fusions make them).

Views onnxruntime runs as copies (``transpose``, ``split``) are priced, unlike in the analytic
models; ``reshape``, ``dropout`` and ``noop`` stay free.

Timings go to the persistent :class:`~tensor_eqsat.cost.timing_cache.TimingCache`, keyed by the
device (``ort-cpu:<cpu name>:threads=N``), the runtime (``onnxruntime <version>``) and the timing
method, so each configuration is measured once per machine, runtime version and thread count.

Alternatives rejected: timing one session call per op (charges every op the session overhead and
the layout reorders, so a graph of many cheap ops, e.g. depthwise convs, looks far slower than it
runs); onnxruntime's own profiler on whole graphs (cannot price an e-node that is in no graph yet);
PyTorch eager timings (``measured:cpu``; a different runtime: SqueezeNet sums to 21.7 ms there
against 7.4 ms in onnxruntime, issue 14).
"""

from __future__ import annotations

import logging
import os
import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from tensor_eqsat.cost.bounded import TimingBound
from tensor_eqsat.cost.measured import _cpu_name
from tensor_eqsat.cost.model import CostModelError, KernelCostModel, WeightOps
from tensor_eqsat.cost.timing_cache import TimingCache, encode_attrs, shapes_key
from tensor_eqsat.ir.graph import Graph
from tensor_eqsat.ir.opspec import Attrs, OpSpec
from tensor_eqsat.ir.types import OpKind, Shape, volume

log = logging.getLogger(__name__)

METHOD = "marginal-v3"
"""Version of the timing method; part of the cache key, so a changed method never reads old times."""

FUSED_EPILOGUE = 0.0
"""Fraction of its standalone time a bias add / per-channel scale / 4-d batchnorm costs (fused)."""

COLD_WEIGHT_BYTES = 256 * 1024
"""Ops with at least this many bytes of weights are timed with the caches flushed (cold weights)."""

PRICED_VIEWS = frozenset({"transpose", "split"})
"""View ops onnxruntime runs as copy kernels."""

DEVICES = ("cpu", "cuda")


WEIGHTS = ("dram", "llc")


def cache_sizes() -> tuple[int, int]:
    """(largest private cache, last-level cache) in bytes from Linux sysfs; (1, 32) MiB otherwise."""
    sizes = []
    for path in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*/size"):
        try:
            text = path.read_text().strip().upper()
        except OSError:
            continue
        mult = {"K": 1024, "M": 1024**2, "G": 1024**3}.get(text[-1:], 1)
        digits = text.rstrip("KMG")
        if digits.isdigit():
            sizes.append(int(digits) * mult)
    sizes = sorted(set(sizes))
    if len(sizes) < 2:
        return 1024**2, 32 * 1024**2
    return sizes[-2], sizes[-1]


def weights_for(graph: Graph) -> str:
    """``"llc"`` when the graph's weights fit in the last-level cache, else ``"dram"``.

    >>> g = Graph(); x = g.input((1, 64)); g.output(g.matmul(x, g.weight((64, 64))))
    >>> weights_for(g)
    'llc'
    """
    nbytes = sum(4 * volume(n.shapes[0]) for n in graph.nodes if n.op == "weight")
    return "llc" if nbytes <= cache_sizes()[1] else "dram"


class _CacheFlusher:
    """Evicts caches by reading a buffer of twice ``nbytes``.

    Reading, not writing: written lines are dirty, and writing them back would add memory traffic
    to the timed op that no real model has.
    """

    def __init__(self, nbytes: int) -> None:
        import numpy as np

        self.buf = np.ones(2 * nbytes // 8, dtype=np.float64)
        self.total = 0.0

    def __call__(self) -> None:
        self.total += float(self.buf.sum())


def _import_ort() -> Any:
    try:
        import onnxruntime
    except ImportError:
        raise CostModelError(
            "the ort cost model needs onnxruntime, which is not installed; install the 'onnx' extra: "
            "pip install 'tensor-eqsat[onnx]' (or use --cost-model roofline:cpu)"
        ) from None
    return onnxruntime


def input_roles(op: str, in_shapes: Sequence[Shape]) -> list[str]:
    """``"input"`` or ``"weight"`` per operand, as such an op usually meets them in a model.

    Conv and normalisation parameters are weights (onnxruntime prepacks them); a matmul's rank-2
    right operand is a weight (a fully connected layer); the smaller operand of a broadcasting
    element-wise op is a weight (a bias or scale); everything else is an activation.

    >>> input_roles("conv2d", [(1, 8, 4, 4), (8, 8, 3, 3)])
    ['input', 'weight']
    >>> input_roles("ewadd", [(1, 8, 4, 4), (8, 1, 1)])
    ['input', 'weight']
    >>> input_roles("ewadd", [(1, 8), (1, 8)])
    ['input', 'input']
    """
    roles = ["input"] * len(in_shapes)
    if op in ("conv2d", "batchnorm", "layernorm"):
        roles[1:] = ["weight"] * (len(in_shapes) - 1)
    elif op == "matmul" and len(in_shapes[1]) == 2:
        roles[1] = "weight"
    elif op == "attention" and len(in_shapes) == 4:
        roles[3] = "weight"  # the mask a model holds as a constant (a causal or padding mask)
    elif op in ("ewadd", "ewmul") and volume(in_shapes[0]) != volume(in_shapes[1]):
        small = 0 if volume(in_shapes[0]) < volume(in_shapes[1]) else 1
        roles[small] = "weight"
    return roles


def is_fused_epilogue(op: str, in_shapes: Sequence[Shape]) -> bool:
    """Whether onnxruntime folds this op into a preceding Conv/Gemm (see the module docstring).

    >>> is_fused_epilogue("ewadd", [(1, 64, 8, 8), (64, 1, 1)])
    True
    >>> is_fused_epilogue("ewadd", [(1, 64, 8, 8), (1, 64, 8, 8)])
    False
    """
    if op == "batchnorm":
        return len(in_shapes[0]) == 4
    if op not in ("ewadd", "ewmul") or len(in_shapes) != 2:
        return False
    big, small = sorted(in_shapes, key=volume, reverse=True)
    if volume(small) == volume(big) or len(big) < 2:
        return False
    # A vector along one axis: the channel axis of NCHW (C,1,1) or the last axis of a GEMM (N,).
    dims = [d for d in small if d != 1]
    if len(dims) != 1:
        return False
    c = dims[0]
    return (len(big) == 4 and big[1] == c and len(small) <= 3 and small[-1] == 1) or big[-1] == c


def single_op_graph(spec: OpSpec, attrs: Attrs, in_shapes: Sequence[Shape], chain: int = 1) -> Graph:
    """A graph of ``chain`` instances of one op configuration, each reading the previous one.

    Weights follow :func:`input_roles`; with ``chain > 1`` the first operand of each instance
    after the first is the previous instance's output (it must have the first input's shape).
    """
    g = Graph()
    roles = input_roles(spec.name, in_shapes)
    leaves = [g.input(s) if r == "input" else g.weight(s) for s, r in zip(in_shapes, roles, strict=True)]
    if not any(r == "input" for r in roles):
        raise CostModelError(f"ort: {spec.name} with shapes {list(in_shapes)} has no activation input")
    first = leaves[0]
    outs: tuple[Any, ...] = ()
    for k in range(chain):
        # Each instance gets its own weights, as every layer of a model has.
        own = [t if k == 0 or r == "input" else g.weight(t.shape) for t, r in zip(leaves, roles, strict=True)]
        outs = g.add_node(spec.name, attrs, [first.ref, *(t.ref for t in own[1:])])
        first = outs[0]
    g.output(*outs)
    return g


class OrtCostModel(KernelCostModel):
    """Per-op costs measured in ONNX Runtime, cached on disk (see the module docstring).

    device: ``"cpu"`` (the default) or ``"cuda"`` (needs onnxruntime's CUDA execution provider).
    threads: intra-op threads of the timing sessions. Default 1, as :mod:`tensor_eqsat.io.latency`.
    warmup: untimed runs of each session first. Default 5.
    repeats: at most this many timed runs per session. Default 40.
    max_seconds: stop timing a configuration after this much timed run time (at least 5 runs per
        session). Default 0.5.
    cache_path: the SQLite file. Default: the user cache folder (see
        :mod:`tensor_eqsat.cost.timing_cache`).
    persistent: use the on-disk cache at all. Default True.
    seed: seed of the random inputs and weights. Default 0.
    weights: where large weights come from while timing: ``"dram"`` (the default; models bigger
        than the last-level cache) or ``"llc"`` (models that fit); see :func:`weights_for`.
    weight_ops, taso_compat: see :class:`~tensor_eqsat.cost.model.KernelCostModel`.

    Raises CostModelError when onnxruntime is missing or the device is unavailable.
    """

    def __init__(
        self,
        *,
        device: str = "cpu",
        threads: int = 1,
        warmup: int = 5,
        repeats: int = 40,
        max_seconds: float = 0.5,
        cache_path: str | os.PathLike[str] | None = None,
        persistent: bool = True,
        seed: int = 0,
        weights: str = "dram",
        weight_ops: WeightOps | str = WeightOps.FOLD,
        taso_compat: bool = False,
    ) -> None:
        super().__init__(weight_ops=weight_ops, taso_compat=taso_compat)
        if weights not in WEIGHTS:
            raise CostModelError(f"ort: weights must be one of {', '.join(WEIGHTS)}, got {weights!r}")
        if threads < 1 or warmup < 0 or repeats < 1 or max_seconds <= 0:
            raise CostModelError(
                f"ort: need threads >= 1, warmup >= 0, repeats >= 1, max_seconds > 0 "
                f"(got {threads}, {warmup}, {repeats}, {max_seconds})"
            )
        if device not in DEVICES:
            raise CostModelError(f"ort: unknown device {device!r} (choose from {', '.join(DEVICES)})")
        self.ort = _import_ort()
        if device == "cuda" and "CUDAExecutionProvider" not in self.ort.get_available_providers():
            raise CostModelError("ort: device 'cuda' requested but onnxruntime has no CUDAExecutionProvider")
        self.device = device
        self.threads = int(threads)
        self.warmup = int(warmup)
        self.repeats = int(repeats)
        self.max_seconds = float(max_seconds)
        self.seed = int(seed)
        # One thread runs on the calling thread: its CPU time is steadier on a shared machine.
        self.clock: Callable[[], float] = (
            time.thread_time if device == "cpu" and self.threads == 1 else time.perf_counter
        )
        self.device_key = f"ort-{device}:{_cpu_name() if device == 'cpu' else 'gpu'}:threads={self.threads}"
        self.weights = weights
        self.library = f"onnxruntime {self.ort.__version__} {METHOD} weights={weights}"
        self.spec = f"measured:ort-{device}"
        self.cache: TimingCache | None = TimingCache(cache_path) if persistent else None
        self._stored: dict[tuple[str, str, str], float] | None = None
        self._overhead: float | None = None
        self._flusher: _CacheFlusher | None = None
        self.measured = 0
        """Number of configurations actually timed by this instance (cache misses)."""
        self.timing_bound = TimingBound()
        """The deadline of the timings (:mod:`tensor_eqsat.cost.bounded`); none by default."""
        self.measure_s = 0.0
        """Seconds spent timing (cache misses only)."""

    # -- accounting ----------------------------------------------------------------------------
    def is_costed(self, spec: OpSpec, all_weights: bool) -> bool:
        if spec.kind is OpKind.VIEW and spec.name in PRICED_VIEWS:
            return not all_weights
        return super().is_costed(spec, all_weights)

    def kernel_ms(self, spec: OpSpec, attrs: Attrs, in_shapes: tuple[Shape, ...]) -> float:
        ms = self.standalone_ms(spec, attrs, in_shapes)
        if is_fused_epilogue(spec.name, in_shapes):
            return ms * FUSED_EPILOGUE
        return ms

    def standalone_ms(self, spec: OpSpec, attrs: Attrs, in_shapes: tuple[Shape, ...]) -> float:
        """The measured marginal time of one instance, from the cache or timed now."""
        akey, skey = encode_attrs(attrs), shapes_key(in_shapes)
        if self.cache is not None:
            if self._stored is None:
                self._stored = self.cache.load(self.device_key, self.library)
            hit = self._stored.get((spec.name, akey, skey))
            if hit is not None:
                return hit
        if self.timing_bound.should_estimate(spec, attrs, in_shapes):
            return self.timing_bound.estimate(spec, attrs, in_shapes)  # (not cached: timed next time)
        start = time.perf_counter()
        try:
            ms, runs = self.time_op(spec, attrs, in_shapes)
        except Exception:  # onnxruntime's errors have no common base class
            if spec.name != "opaque":
                raise
            # An opaque op reading computed integers (a reshape target from a Shape chain of a
            # symbolic model, io/onnx_dims.py) does not run on random data; it is the same op in
            # every graph the search compares, so the estimate prices it.
            log.debug("ort: opaque %s not timed alone; estimated", spec.attr(attrs, "op_type"))
            return self.timing_bound.estimate(spec, attrs, in_shapes)
        self.measure_s += time.perf_counter() - start
        self.measured += 1
        self.timing_bound.learn(ms, spec, attrs, in_shapes)
        if self.cache is not None and self._stored is not None:
            ms = self.cache.put(self.device_key, self.library, spec.name, akey, skey, ms, runs)
            self._stored[(spec.name, akey, skey)] = ms
        return ms

    # -- timing --------------------------------------------------------------------------------
    def _runner(self, graph: Graph) -> Callable[[], Any]:
        from tensor_eqsat.io.onnx_export import export_onnx
        from tensor_eqsat.io.runtime import input_specs, ort_session, random_feed

        model = export_onnx(graph, seed=self.seed, check=False)
        # Quiet: an opaque op that cannot run on random data is priced otherwise (standalone_ms).
        sess = ort_session(model, threads=self.threads, device=self.device, quiet=True)
        feed = random_feed(input_specs(model), self.seed, model)
        return lambda: sess.run(None, feed)

    def _time(self, runners: Sequence[Callable[[], Any]], cold: bool = False) -> tuple[list[float], int]:
        """Median ms of each runner, timed in alternation; and the timed runs per runner.

        cold: read the flush buffer before every timed run (CPU only; see ``weights``).
        """
        for fn in runners:
            for _ in range(1 if self.timing_bound.expired() else self.warmup):
                fn()
        flush: Callable[[], None] | None = None
        if cold and self.device == "cpu":
            if self._flusher is None:
                private, last = cache_sizes()
                self._flusher = _CacheFlusher(last if self.weights == "dram" else private)
            flush = self._flusher
        clock = self.clock
        times: list[list[float]] = [[] for _ in runners]
        spent = 0.0
        n = 0
        while (
            n < self.repeats
            and (spent < self.max_seconds or n < 5)
            and not (n and self.timing_bound.expired())
        ):
            for fn, out in zip(runners, times, strict=True):
                if flush is not None:
                    flush()
                t0 = clock()
                fn()
                dt = clock() - t0
                out.append(dt * 1e3)
                spent += dt
            n += 1
        return [statistics.median(t) for t in times], n

    @property
    def overhead_ms(self) -> float:
        """Median time of a trivial one-op session call (subtracted from unchained ops)."""
        if self._overhead is None:
            g = Graph()
            g.output(g.relu(g.input((1,))))
            (self._overhead,), _ = self._time([self._runner(g)])
        return self._overhead

    def time_op(self, spec: OpSpec, attrs: Attrs, in_shapes: tuple[Shape, ...]) -> tuple[float, int]:
        """(marginal milliseconds, timed runs per session) of one configuration."""
        outs = spec.infer_shapes(in_shapes, attrs)
        roles = input_roles(spec.name, in_shapes)
        # An opaque op's output need not have its first input's element type (an Equal feeding a
        # Where reads bool and writes bool, a Cast changes it), so it is timed alone.
        chainable = (
            spec.name != "opaque"
            and len(outs) == 1
            and tuple(outs[0]) == tuple(in_shapes[0])
            and roles[0] == "input"
        )
        weight_bytes = 4 * sum(volume(s) for s, r in zip(in_shapes, roles, strict=True) if r == "weight")
        cold = weight_bytes >= COLD_WEIGHT_BYTES
        one = self._runner(single_op_graph(spec, attrs, in_shapes))
        if chainable:
            two = self._runner(single_op_graph(spec, attrs, in_shapes, chain=2))
            (t1, t2), runs = self._time([one, two], cold)
            ms = t2 - t1
            # Noise can make the difference tiny or negative for very cheap ops: keep a floor.
            ms = max(ms, 0.1 * max(t1 - self.overhead_ms, 0.0), 1e-4)
        else:
            (t1,), runs = self._time([one], cold)
            ms = max(t1 - self.overhead_ms, 1e-4)
        log.debug("ort %s %s %s: %.4f ms (%d runs)", spec.name, attrs, in_shapes, ms, runs)
        return ms, runs

    @property
    def cache_file(self) -> Path | None:
        """The SQLite file in use, or None when not persistent."""
        return None if self.cache is None else self.cache.path
