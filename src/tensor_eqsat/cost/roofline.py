"""Analytic roofline cost model: operator time from FLOPs, bytes and a device profile.

For one kernel of op kind ``k`` on a device profile::

    time = max(work / (peak_unit(k) * compute_efficiency(k)),
               bytes / (bandwidth(bytes) * bandwidth_efficiency(k)))
           + launch_us(k)

FLOPs, bytes and the kind come from the op's :class:`~tensor_eqsat.ir.opspec.OpSpec`
(``flop_count``, ``byte_count``, ``kind``); nothing here keeps a per-op table. ``bandwidth(bytes)``
is the cache bandwidth when the transfer fits the profile's last-level cache, else the memory
bandwidth. For element-wise ops, reductions and copies the work is the FLOP count; for pools it is the FLOP
count plus ``depth_overhead`` per output element. A profile may give single ops or conv variants
(``poolmax``, ``conv2d:depthwise``...) their own parameters (:class:`DeviceProfile` ``ops``).

GEMMs and convs (as implicit GEMMs) run as blocked matrix products, and their work is::

    tiles = ceil(rows / tile_rows) * ceil(cols / tile_cols)
    work  = 2 * (depth / winograd + depth_overhead) * tile_rows * tile_cols
              * (tiles + fill_waves * compute_units)

The GEMM view is read off the shapes by kind: ``cols`` is the width of one independent product
(a matmul's N; a conv's output channels per group), ``rows = out_elems / cols`` (batch, M, pixels
and groups together) and ``depth = flops / (2 * out_elems)`` (K; C_in/groups * kH * kW). Three
effects follow, each of which only ever adds work, so a bigger problem is never cheaper:

* tile quantisation: a product is padded to whole tiles, so narrow ones (grouped and depthwise
  convs, GEMVs) waste most of each tile;
* fill: with few tiles compared with the device's compute units most units idle, so small GEMMs
  and convs run far below peak — which is why merging two matmuls into one can pay off;
* depth overhead: per-output prologue/epilogue work makes shallow reductions inefficient.

Dense 3x3 stride-1 convs divide their multiply work by ``winograd`` (cuDNN picks Winograd-type
algorithms for them when faster; 1 on devices or libraries that do not).

Alternatives rejected: a per-op table of measured times (that is the measured model); a smooth
work-size efficiency curve with no tile shape (cannot tell a grouped conv from a dense one of the
same FLOPs, and ResNeXt-50 is mostly grouped convs); per-library algorithm selection (cuDNN's
heuristics are not public, and the fitted profile absorbs their average effect).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from tensor_eqsat.cost.dtype_rates import rates
from tensor_eqsat.cost.model import KernelCostModel, WeightOps
from tensor_eqsat.cost.profiles import DEFAULT_PROFILE, DeviceProfile, KindParams, load_profile
from tensor_eqsat.ir.dtypes import DType
from tensor_eqsat.ir.opspec import Attrs, OpSpec
from tensor_eqsat.ir.types import OpKind, Shape, volume


@dataclass(frozen=True)
class GemmView:
    """A GEMM or conv seen as ``rows x cols`` outputs, each a ``depth``-long dot product.

    groups: independent products of a grouped conv (1 otherwise, and for depthwise convs, which
        libraries run with a dedicated kernel).
    winograd_eligible: a dense 3x3 stride-1 conv.
    """

    rows: int
    cols: int
    depth: float
    groups: int = 1
    winograd_eligible: bool = False


def gemm_view(
    spec: OpSpec, attrs: Attrs, in_shapes: tuple[Shape, ...], out_shape: Shape, flops: int
) -> GemmView:
    """The implicit-GEMM view of a GEMM- or CONV-kind op (see the module docstring).

    Reads the layouts the IR fixes for these kinds: matmul outputs ``[..., M, N]``; conv2d takes
    ``x`` NCHW and a weight ``[C_out, C_in/groups, kH, kW]``.

    >>> from tensor_eqsat.ir.ops import get_op
    >>> conv = get_op("conv2d")
    >>> shapes = ((1, 64, 8, 8), (64, 2, 3, 3))   # 32 groups of 2 channels
    >>> gemm_view(conv, ((1, 1), "same", "none"), shapes, (1, 64, 8, 8), 2 * 4096 * 18)
    GemmView(rows=2048, cols=2, depth=18.0, groups=32, winograd_eligible=False)
    """
    out_elems = volume(out_shape)
    depth = flops / (2.0 * out_elems)
    if spec.kind is OpKind.CONV:
        x, w = in_shapes[0], in_shapes[1]
        groups = x[1] // w[1]
        cols = w[0] // groups
        winograd = groups == 1 and tuple(w[2:]) == (3, 3) and tuple(spec.attr(attrs, "stride")) == (1, 1)
        depthwise = w[1] == 1 and cols == 1
        return GemmView(out_elems // cols, cols, depth, 1 if depthwise else groups, winograd)
    cols = out_shape[-1]
    return GemmView(out_elems // cols, cols, depth)


def conv_variant(spec: OpSpec, in_shapes: tuple[Shape, ...]) -> str | None:
    """``"depthwise"`` or ``"grouped"`` for such convs, None otherwise (the profile's ``ops`` keys).

    >>> from tensor_eqsat.ir.ops import get_op
    >>> conv_variant(get_op("conv2d"), ((1, 8, 4, 4), (8, 1, 3, 3)))
    'depthwise'
    """
    if spec.kind is not OpKind.CONV:
        return None
    x, w = in_shapes[0], in_shapes[1]
    if x[1] == w[1]:
        return None
    return "depthwise" if w[1] == 1 and w[0] == x[1] else "grouped"


@dataclass(frozen=True)
class RooflineTerms:
    """The terms of one roofline estimate (times in milliseconds).

    flops, bytes: from the OpSpec. work: FLOPs charged after tiling, fill and depth effects.
    compute_ms, memory_ms: the two roofline bounds. launch_ms: the fixed overhead.
    """

    flops: int
    bytes: int
    work: float
    compute_ms: float
    memory_ms: float
    launch_ms: float

    @property
    def bound(self) -> str:
        """``"compute"`` or ``"memory"``, whichever bound is larger."""
        return "compute" if self.compute_ms >= self.memory_ms else "memory"

    @property
    def total_ms(self) -> float:
        """The op's cost: the larger bound plus the launch overhead."""
        return max(self.compute_ms, self.memory_ms) + self.launch_ms


_BLOCKED = frozenset({OpKind.GEMM, OpKind.CONV})


class RooflineCostModel(KernelCostModel):
    """Roofline cost of every op on a device profile (see the module docstring for the formula).

    profile: a :class:`DeviceProfile`, a shipped profile name (``"a100"``, ``"p100"``, ``"h100"``,
        ``"cpu"``) or a profile JSON path. Default ``"a100"``, the paper's main device.

    A float16 or bfloat16 graph (:meth:`with_dtype`) moves 2 bytes per element and computes at
    the device's rates for that dtype (:mod:`tensor_eqsat.cost.dtype_rates`); the fitted per-kind
    efficiencies are kept.
    weight_ops, taso_compat: see :class:`~tensor_eqsat.cost.model.KernelCostModel`.

    >>> m = RooflineCostModel(profile="a100")
    >>> small = m.op_cost("matmul", ("none",), ((64, 1024), (1024, 1024)), False)
    >>> large = m.op_cost("matmul", ("none",), ((4096, 1024), (1024, 1024)), False)
    >>> small < large < 64 * small   # 64x the FLOPs, far less than 64x the time
    True
    """

    def __init__(
        self,
        *,
        profile: DeviceProfile | str = DEFAULT_PROFILE,
        weight_ops: WeightOps | str = WeightOps.FOLD,
        taso_compat: bool = False,
    ) -> None:
        super().__init__(weight_ops=weight_ops, taso_compat=taso_compat)
        self.profile = profile if isinstance(profile, DeviceProfile) else load_profile(profile)
        self.spec = f"roofline:{self.profile.name}"

    def kernel_ms(self, spec: OpSpec, attrs: Attrs, in_shapes: tuple[Shape, ...]) -> float:
        return self.terms(spec, attrs, in_shapes).total_ms

    def _blocked_work(self, p: KindParams, v: GemmView) -> float:
        depth = v.depth / p.winograd_speedup if v.winograd_eligible else v.depth
        chunk = min(depth, p.split_depth) if p.split_depth > 0 else depth
        groups = v.groups if p.serial_groups else 1
        tiles = math.ceil(v.rows / (groups * p.tile_rows)) * math.ceil(v.cols / p.tile_cols)
        # chunks of the whole problem; with serial groups each group fills the device on its own.
        chunks = groups * tiles * depth / chunk
        fill = groups * p.fill_waves * self.profile.compute_units
        return 2.0 * (chunk + p.depth_overhead) * p.tile_rows * p.tile_cols * (chunks + fill)

    def terms(self, spec: OpSpec, attrs: Attrs, in_shapes: tuple[Shape, ...]) -> RooflineTerms:
        """The roofline terms of one kernel of ``spec`` (ignores the free-op and folding rules)."""
        prof = self.profile
        out_shapes = spec.infer_shapes(in_shapes, attrs)
        flops = spec.flop_count(in_shapes, attrs)
        nbytes = spec.byte_count(in_shapes, attrs, self.itemsize)
        p = prof.op_params(spec.name, spec.kind, conv_variant(spec, in_shapes))
        unit_tflops = prof.matrix_tflops if p.unit == "matrix" else prof.vector_tflops
        if self.dtype is not DType.FLOAT32:
            # The dtype's units (tensor cores for float16/bfloat16); the profile's own peaks on a
            # device without an entry in the rates table.
            matrix, vector = rates(prof.name, self.dtype)
            unit_tflops = (matrix if p.unit == "matrix" else vector) or unit_tflops
        peak = unit_tflops * 1e12 * p.compute_efficiency
        work = float(flops)
        if spec.kind in _BLOCKED and flops:
            work = self._blocked_work(p, gemm_view(spec, attrs, in_shapes, out_shapes[0], flops))
        elif spec.kind is OpKind.POOL:
            # Per output element: the window's work plus a fixed cost (index arithmetic, padding
            # checks), which dominates small windows.
            work += p.depth_overhead * volume(out_shapes[0])
        launch_ms = p.launch_us * 1e-3
        if p.bias_pass and spec.kind is OpKind.CONV and spec.attr(attrs, "activation") == "none":
            # A second kernel reads and writes the output once more.
            ew = prof.params(OpKind.ELEMENTWISE)
            out_bytes = 2 * self.itemsize * sum(volume(s) for s in out_shapes)
            launch_ms += ew.launch_us * 1e-3 + out_bytes / self._bandwidth(out_bytes, ew) * 1e3
        return RooflineTerms(
            flops=flops,
            bytes=nbytes,
            work=work,
            compute_ms=work / peak * 1e3,
            memory_ms=nbytes / self._bandwidth(nbytes, p) * 1e3,
            launch_ms=launch_ms,
        )

    def _bandwidth(self, nbytes: int, p: KindParams) -> float:
        """Attainable bytes/s for a transfer of ``nbytes`` by a kernel with parameters ``p``."""
        prof = self.profile
        in_cache = prof.cache_bytes > 0 and nbytes <= prof.cache_bytes
        return (prof.cache_bandwidth_gbs if in_cache else prof.bandwidth_gbs) * 1e9 * p.bandwidth_efficiency
