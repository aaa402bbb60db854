"""Measured cost model: time each op configuration with PyTorch on the available device.

TASO's approach (../reference/taso.md §2.1) on whatever device the user has: each distinct op
configuration runs on seeded random inputs, ``warmup`` untimed runs then up to ``repeats`` timed
runs (fewer once ``max_seconds`` of timed runs have passed, never fewer than three); the cost is the
median. CPU timings use ``threads`` intra-op threads (default 1: with two threads on small shared
machines PyTorch's timings are erratic, see ../reference/python-deps.md §6). With one thread the op
runs on the calling thread, and its CPU time (``time.thread_time``) is the measure: unlike wall
time it does not grow while other processes hold the core (shared caches and memory bandwidth
still slow it), so timings on a shared machine are far steadier. With more threads wall time
(``time.perf_counter``) is used. CUDA timings use CUDA events. Results go to a persistent
:class:`~tensor_eqsat.cost.timing_cache.TimingCache`, keyed by device (with thread count and
clock), library version, op, attributes and shapes, so a configuration is measured once per
machine, not once per run.

PyTorch is imported lazily: building the model without it raises :class:`CostModelError` naming
the ``torch`` extra.

On CUDA the model prices the eager execution mode by default (``mode="eager"``): each op's
isolated time goes through :data:`~tensor_eqsat.cost.execution.DEFAULT_EAGER`, so a graph's
price predicts an eager PyTorch forward pass (launch floor, views' host cost); the cache keeps
the isolated times, so a cache file serves as a recorded profile (``recorded:FILE``) unchanged.
On the CPU ops run synchronously and are priced as timed; ``mode="isolated"`` does that on CUDA too.

Alternatives rejected: timing whole graphs (cannot price an e-node) and the mean of TASO's 32 runs
(one preempted run on a shared machine moves a mean, not a median).
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import os
import statistics
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tensor_eqsat.cost.bounded import TimingBound
from tensor_eqsat.cost.execution import DEFAULT_EAGER, ExecutionMode
from tensor_eqsat.cost.model import CostModelError, KernelCostModel, WeightOps
from tensor_eqsat.cost.timing_cache import TimingCache, device_key_for, encode_attrs, shapes_key
from tensor_eqsat.cost.torch_kernels import build_kernel, has_kernel
from tensor_eqsat.ir.opspec import Attrs, OpSpec
from tensor_eqsat.ir.types import Shape

log = logging.getLogger(__name__)

DEVICES = ("auto", "cpu", "cuda")


def import_torch() -> Any:
    """The torch module, or CostModelError saying how to install it."""
    try:
        return importlib.import_module("torch")
    except ImportError:
        raise CostModelError(
            "the measured cost model needs PyTorch, which is not installed; install the 'torch' "
            "extra: pip install 'tensor-eqsat[torch]' (or use --cost-model roofline)"
        ) from None


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    import platform

    return platform.processor() or platform.machine() or "unknown"


class MeasuredCostModel(KernelCostModel):
    """Per-op costs measured with PyTorch, cached on disk (see the module docstring).

    device: ``"auto"`` (CUDA when available, else CPU; the default), ``"cpu"``, ``"cuda"`` or
        ``"cuda:N"``.
    threads: CPU intra-op threads while timing. Default 1.
    clock: ``"auto"`` (thread CPU time with one thread, wall time otherwise; the default),
        ``"thread"`` or ``"wall"``. Ignored on CUDA.
    warmup: untimed runs first. Default 3.
    repeats: at most this many timed runs. Default 15.
    max_seconds: stop timing a configuration after this much timed run time (at least 3 runs).
        Default 1.0.
    cache_path: the SQLite file. Default: the user cache folder (``$TENSOR_EQSAT_CACHE_DIR``
        overrides it; see :mod:`tensor_eqsat.cost.timing_cache`).
    persistent: use the on-disk cache at all. Default True; False keeps costs in memory only.
    seed: seed of the random input data. Default 0.
    mode: ``"eager"`` or ``"isolated"``; see the module docstring. Default None: eager on CUDA,
        isolated on the CPU (``"eager"`` on the CPU is refused: CPU ops run synchronously).
    weight_ops, taso_compat: see :class:`~tensor_eqsat.cost.model.KernelCostModel`.

    Raises CostModelError when torch is missing or the device is unavailable.
    """

    def __init__(
        self,
        *,
        device: str = "auto",
        threads: int = 1,
        clock: str = "auto",
        warmup: int = 3,
        repeats: int = 15,
        max_seconds: float = 1.0,
        cache_path: str | os.PathLike[str] | None = None,
        persistent: bool = True,
        seed: int = 0,
        mode: ExecutionMode | str | None = None,
        weight_ops: WeightOps | str = WeightOps.FOLD,
        taso_compat: bool = False,
    ) -> None:
        super().__init__(weight_ops=weight_ops, taso_compat=taso_compat)
        try:
            chosen = None if mode is None else ExecutionMode(mode)
        except ValueError:
            choices = ", ".join(m.value for m in ExecutionMode)
            raise CostModelError(f"measured: mode must be one of {choices}, got {mode!r}") from None
        if threads < 1 or warmup < 0 or repeats < 1 or max_seconds <= 0:
            raise CostModelError(
                f"measured: need threads >= 1, warmup >= 0, repeats >= 1, max_seconds > 0 "
                f"(got {threads}, {warmup}, {repeats}, {max_seconds})"
            )
        if clock not in ("auto", "thread", "wall"):
            raise CostModelError(f"measured: clock must be auto, thread or wall, got {clock!r}")
        if clock == "thread" and threads != 1:
            raise CostModelError(
                "measured: clock='thread' measures one thread; use threads=1 or clock='wall'"
            )
        self.torch = import_torch()
        self.threads = threads
        self.clock = ("thread" if threads == 1 else "wall") if clock == "auto" else clock
        self.warmup = warmup
        self.repeats = repeats
        self.max_seconds = max_seconds
        self.seed = seed
        self.device = self._resolve_device(device)
        self.device_key = self._device_key()
        self.library = f"torch {self.torch.__version__}"
        self.spec = f"measured:{self.device.type}"
        if self.device.type == "cuda":
            self.mode = chosen or ExecutionMode.EAGER
        elif chosen is ExecutionMode.EAGER:
            raise CostModelError("measured: mode 'eager' is for CUDA devices (CPU ops run synchronously)")
        else:
            self.mode = ExecutionMode.ISOLATED
        if self.mode is ExecutionMode.EAGER:
            self.execution = DEFAULT_EAGER
        self.cache: TimingCache | None = TimingCache(cache_path) if persistent else None
        self._stored: dict[tuple[str, str, str], float] | None = None
        self.measured = 0
        self.timing_bound = TimingBound()
        """The deadline of the timings (:mod:`tensor_eqsat.cost.bounded`); none by default."""
        """Number of configurations actually timed by this instance (cache misses)."""

    def _resolve_device(self, device: str) -> Any:
        torch = self.torch
        base = device.split(":", 1)[0]
        if base not in DEVICES:
            raise CostModelError(f"measured: unknown device {device!r} (choose from {', '.join(DEVICES)})")
        cuda = torch.cuda.is_available()
        if base == "auto":
            return torch.device("cuda" if cuda else "cpu")
        if base == "cuda" and not cuda:
            raise CostModelError(
                f"measured: device {device!r} requested but torch.cuda.is_available() is False"
            )
        try:
            return torch.device(device)
        except (RuntimeError, ValueError) as exc:
            raise CostModelError(f"measured: bad device {device!r} ({exc})") from None

    @property
    def timing_key(self) -> str:
        """The timing cache's device key of this model's timings: the device's, tagged with the
        dtype for float16 and bfloat16 (:func:`~tensor_eqsat.cost.timing_cache.device_key_for`)."""
        return device_key_for(self.device_key, self.dtype.value)

    def with_dtype(self, dtype: Any) -> MeasuredCostModel:
        """This model timing ops in ``dtype`` (its own cache entries; see the base class)."""
        out = super().with_dtype(dtype)
        assert isinstance(out, MeasuredCostModel)
        if out is not self:
            out._stored = None
        return out

    def _device_key(self) -> str:
        if self.device.type == "cuda":
            idx = self.device.index if self.device.index is not None else self.torch.cuda.current_device()
            return f"cuda:{self.torch.cuda.get_device_name(idx)}"
        return f"cpu:{_cpu_name()}:threads={self.threads}:clock={self.clock}"

    # -- pricing -------------------------------------------------------------------------------
    def kernel_ms(self, spec: OpSpec, attrs: Attrs, in_shapes: tuple[Shape, ...]) -> float:
        if not has_kernel(spec.name):
            raise CostModelError(f"measured: no PyTorch kernel for op {spec.name!r}")
        akey, skey = encode_attrs(attrs), shapes_key(in_shapes)
        if self.cache is not None:
            if self._stored is None:
                self._stored = self.cache.load(self.timing_key, self.library)
            hit = self._stored.get((spec.name, akey, skey))
            if hit is not None:
                return hit
        if self.timing_bound.should_estimate(spec, attrs, in_shapes):
            return self.timing_bound.estimate(spec, attrs, in_shapes)  # (not cached: timed next time)
        ms, runs = self.time_op(spec, attrs, in_shapes)
        self.measured += 1
        self.timing_bound.learn(ms, spec, attrs, in_shapes)
        if self.cache is not None and self._stored is not None:
            ms = self.cache.put(self.timing_key, self.library, spec.name, akey, skey, ms, runs)
            self._stored[(spec.name, akey, skey)] = ms
        return ms

    def time_op(self, spec: OpSpec, attrs: Attrs, in_shapes: tuple[Shape, ...]) -> tuple[float, int]:
        """Time one configuration now (no caches): (median milliseconds, number of timed runs)."""
        torch = self.torch
        with self._threads(), torch.inference_mode():
            kernel = build_kernel(torch, spec, attrs, in_shapes, self.device, self.seed, self.dtype.value)
            times = self._time_cuda(kernel) if self.device.type == "cuda" else self._time_cpu(kernel)
        ms = statistics.median(times)
        log.debug("measured %s %s %s: %.4f ms (%d runs)", spec.name, attrs, in_shapes, ms, len(times))
        return ms, len(times)

    def _time_cpu(self, kernel: Any) -> list[float]:
        for _ in range(1 if self.timing_bound.expired() else self.warmup):
            kernel()
        clock = time.thread_time if self.clock == "thread" else time.perf_counter
        times: list[float] = []
        spent = 0.0
        while len(times) < self.repeats and (spent < self.max_seconds or len(times) < 3):
            if times and self.timing_bound.expired():
                break
            start = clock()
            kernel()
            dt = clock() - start
            times.append(dt * 1e3)
            spent += dt
        return times

    def _time_cuda(self, kernel: Any) -> list[float]:
        cuda = self.torch.cuda
        with cuda.device(self.device):
            for _ in range(self.warmup):
                kernel()
            cuda.synchronize()
            times: list[float] = []
            spent = 0.0
            while len(times) < self.repeats and (spent < self.max_seconds or len(times) < 3):
                start, end = cuda.Event(enable_timing=True), cuda.Event(enable_timing=True)
                start.record()
                kernel()
                end.record()
                end.synchronize()
                times.append(start.elapsed_time(end))
                spent += times[-1] / 1e3
        return times

    @contextlib.contextmanager
    def _threads(self) -> Iterator[None]:
        torch = self.torch
        before = torch.get_num_threads()
        if before != self.threads:
            torch.set_num_threads(self.threads)
        try:
            yield
        finally:
            if torch.get_num_threads() != before:
                torch.set_num_threads(before)

    @property
    def cache_file(self) -> Path | None:
        """The SQLite file in use, or None when not persistent."""
        return None if self.cache is None else self.cache.path
