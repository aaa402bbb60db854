"""Analytic roofline cost model: operator time from FLOPs, bytes and a device profile.

For one kernel of op kind ``k`` on a device profile::

    time = max(work / (peak_unit(k) * compute_efficiency(k)),
               bytes / (bandwidth(bytes) * bandwidth_efficiency(k)))
           + launch_us(k)

FLOPs, bytes and the kind come from the op's :class:`~tensor_eqsat.ir.opspec.OpSpec`
(``flop_count``, ``byte_count``, ``kind``); nothing here keeps a per-op table. For the kinds that
run as blocked matrix products (GEMM and conv, as implicit GEMM) the work is not the bare FLOP count
but::

    work = 2 * (depth + depth_overhead) * (out_elems + fill_waves * compute_units * tile_elems)

where ``depth = flops / (2 * out_elems)`` is the reduction length (K of a GEMM, C_in/groups*kH*kW
of a conv). The second factor is the saturating fill curve: a problem with few output tiles
(``out_elems / tile_elems``) compared with the device's compute units leaves most of them idle, so
small GEMMs and convs run far below peak — which is why merging two matmuls into one can pay off.
The first factor charges shallow reductions (depthwise convs) for their per-output overhead. Both
only ever add work, so a bigger problem is never cheaper. ``bandwidth(bytes)`` is the cache
bandwidth when the transfer fits the profile's last-level cache and the memory bandwidth otherwise.

Alternatives rejected: a per-op lookup table of measured times (that is the measured model), and
a wave-quantised tile count (``ceil(tiles / units)``), which is exact for one kernel library but
makes costs jump at every wave boundary and ranks near-equal graphs by noise.
"""

from __future__ import annotations

from dataclasses import dataclass

from tensor_eqsat.cost.model import KernelCostModel, WeightOps
from tensor_eqsat.cost.profiles import DEFAULT_PROFILE, DeviceProfile, load_profile
from tensor_eqsat.ir.opspec import Attrs, OpSpec
from tensor_eqsat.ir.types import OpKind, Shape, volume

_BLOCKED = frozenset({OpKind.GEMM, OpKind.CONV})


@dataclass(frozen=True)
class RooflineTerms:
    """The terms of one roofline estimate (times in milliseconds).

    flops, bytes: from the OpSpec. work: FLOPs charged after fill and depth effects.
    compute_ms, memory_ms: the two roofline bounds. launch_ms: the fixed overhead.
    bound: ``"compute"`` or ``"memory"``, whichever is larger. total_ms: the op's cost.
    """

    flops: int
    bytes: int
    work: float
    compute_ms: float
    memory_ms: float
    launch_ms: float

    @property
    def bound(self) -> str:
        return "compute" if self.compute_ms >= self.memory_ms else "memory"

    @property
    def total_ms(self) -> float:
        return max(self.compute_ms, self.memory_ms) + self.launch_ms


class RooflineCostModel(KernelCostModel):
    """Roofline cost of every op on a device profile (see the module docstring for the formula).

    profile: a :class:`DeviceProfile`, a shipped profile name (``"a100"``, ``"p100"``, ``"h100"``,
        ``"cpu"``) or a profile JSON path. Default ``"a100"``, the paper's main device.
    weight_ops, taso_compat: see :class:`~tensor_eqsat.cost.model.KernelCostModel`.

    >>> from tensor_eqsat.ir.ops import get_op
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

    def terms(self, spec: OpSpec, attrs: Attrs, in_shapes: tuple[Shape, ...]) -> RooflineTerms:
        """The roofline terms of one kernel of ``spec`` (ignores the free-op and folding rules)."""
        prof = self.profile
        out_elems = sum(volume(s) for s in spec.infer_shapes(in_shapes, attrs))
        flops = spec.flop_count(in_shapes, attrs)
        nbytes = spec.byte_count(in_shapes, attrs)
        p = prof.params(spec.kind)
        peak = (
            (prof.matrix_tflops if p.unit == "matrix" else prof.vector_tflops) * 1e12 * p.compute_efficiency
        )
        work = float(flops)
        if spec.kind in _BLOCKED and out_elems:
            depth = flops / (2.0 * out_elems)
            fill = p.fill_waves * prof.compute_units * p.tile_elems
            work = 2.0 * (depth + p.depth_overhead) * (out_elems + fill)
        in_cache = prof.cache_bytes > 0 and nbytes <= prof.cache_bytes
        bandwidth = (
            (prof.cache_bandwidth_gbs if in_cache else prof.bandwidth_gbs) * 1e9 * p.bandwidth_efficiency
        )
        return RooflineTerms(
            flops=flops,
            bytes=nbytes,
            work=work,
            compute_ms=work / peak * 1e3,
            memory_ms=nbytes / bandwidth * 1e3,
            launch_ms=p.launch_us * 1e-3,
        )
