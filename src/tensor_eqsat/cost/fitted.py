"""A GPU roofline fitted to a timing table: prices the op configurations the table lacks.

Each op configuration is priced by an additive roofline with a per-launch floor::

    time = floor(g) + flops / peak(g) + bytes / bandwidth(g) + activation(g) * has_activation

where ``g`` is the configuration's *fit group*: its op kind (gemm, elementwise, reduction, pool,
memory), and for convolutions a variant that stands for how libraries run it, so the compute
efficiency (``1 / peak(g)``) and the floor are functions of channels per group and kernel size:

* ``conv:depthwise``: one input channel per group (a dedicated depthwise kernel);
* ``conv:grouped-narrow``: 2 to 4 channels per group;
* ``conv:grouped-wide``: 8 or more channels per group (cuDNN's grouped implicit GEMM, which on
  the H200 costs 2-3x a depthwise conv of the same input: the reason TASO's conv merges no
  longer pay);
* ``conv:dense-1x1`` and ``conv:dense``: ungrouped, 1x1 and larger kernels.

``has_activation`` is 1 for a conv, matmul or pool with a fused activation: PyTorch runs it as a
second, in-place kernel, so it adds a launch. FLOPs and bytes come from the op's OpSpec.

The coefficients are fitted per group by non-negative least squares on *relative* error
(each row weighted by ``1 / measured``: a 10 % error on a 20 µs op counts as much as on a 2 ms
one), which is what rank correlation and median error reward. Every coefficient is kept >= 0,
so more FLOPs or bytes never cost less. A group with fewer than :data:`MIN_ROWS` rows uses its
parent's fit (conv variants fall back to all convs, every other group to all non-GEMM ops), and
a table with no row of a kind at all prices it with the pooled fit. The fit is deterministic
(no random starts) and takes milliseconds, so it runs when a table is loaded.

Alternatives rejected: least *absolute* relative error (iteratively reweighted): on the H200
table, held out by model, it ranked worse (Spearman 0.66 against 0.74) with a larger median
error (19.9 % against 17.2 %; ``benchmarks/gpu_profile_fit.py``); the analytic roofline's tile
model (many more parameters than a 932-entry table of mostly floor-bound ops can fix); a max()
of the compute and memory terms instead of their sum (not linear in the parameters, and the two
differ by at most 2x); a nearest neighbour in the table (no notion that more work costs more).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from tensor_eqsat.ir.ops import get_op
from tensor_eqsat.ir.opspec import Attrs, OpSpec
from tensor_eqsat.ir.types import OpKind, Shape

MIN_ROWS = 6
"""A fit group needs this many table rows to be fitted on its own; fewer use the parent's fit."""

FEATURES = ("floor_ms", "ms_per_gflop", "ms_per_gb", "activation_ms")
"""The coefficients of one group, in the order of :func:`features`."""

POOLED = "pooled"
"""The fallback group: every non-GEMM, non-conv row of the table."""


def conv_group(in_shapes: Sequence[Shape]) -> str:
    """The conv fit group of a conv2d with these input shapes (x NCHW, w [C_out, C_in/g, kH, kW]).

    >>> conv_group(((1, 128, 56, 56), (128, 1, 3, 3))), conv_group(((1, 128, 56, 56), (128, 8, 3, 3)))
    ('conv:depthwise', 'conv:grouped-wide')
    >>> conv_group(((1, 64, 56, 56), (256, 64, 1, 1)))
    'conv:dense-1x1'
    """
    x, w = in_shapes[0], in_shapes[1]
    per_group = w[1]
    if per_group == x[1]:
        return "conv:dense-1x1" if w[2] * w[3] == 1 else "conv:dense"
    if per_group == 1:
        return "conv:depthwise"
    return "conv:grouped-narrow" if per_group <= 4 else "conv:grouped-wide"


def fit_group(spec: OpSpec, in_shapes: Sequence[Shape]) -> str:
    """The fit group of one configuration (see the module docstring).

    >>> from tensor_eqsat.ir.ops import get_op
    >>> fit_group(get_op("matmul"), ((1, 8), (8, 8))), fit_group(get_op("merge"), ((8, 2, 3, 3),))
    ('gemm', 'memory')
    """
    if spec.kind is OpKind.CONV:
        return conv_group(in_shapes)
    if spec.kind is OpKind.WEIGHT_TRANSFORM:
        return OpKind.MEMORY.value
    return spec.kind.value


def parent_group(group: str) -> str:
    """The fit that prices a group with too few rows: ``conv`` for conv variants, else the
    pooled fit (``gemm`` is always fitted on its own)."""
    if group.startswith("conv:"):
        return "conv"
    return POOLED


def features(
    spec: OpSpec, attrs: Attrs, in_shapes: Sequence[Shape], itemsize: int = 4
) -> tuple[float, float, float, float]:
    """(1, GFLOPs, GB, has_activation) of one configuration: the fit's regressors (GB for
    ``itemsize`` bytes per element, default 4)."""
    shapes = tuple(tuple(s) for s in in_shapes)
    flops = spec.flop_count(shapes, attrs)
    nbytes = spec.byte_count(shapes, attrs, itemsize)
    act = 0.0
    if "activation" in spec.attr_names:
        act = float(spec.attr(attrs, "activation") != "none")
    return 1.0, flops / 1e9, nbytes / 1e9, act


def nnls(a: np.ndarray, b: np.ndarray, max_iter: int = 200) -> np.ndarray:
    """Non-negative least squares, ``argmin ||a x - b||`` with ``x >= 0`` (Lawson and Hanson).

    >>> a = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    >>> nnls(a, np.array([1.0, -1.0, 0.0])).round(3).tolist()
    [0.5, 0.0]
    """
    n = a.shape[1]
    x = np.zeros(n)
    passive = np.zeros(n, dtype=bool)
    w = a.T @ (b - a @ x)
    tol = 1e-12 * max(1.0, float(np.abs(a).max(initial=0.0))) * max(a.shape)
    for _ in range(max_iter):
        if passive.all() or not (w[~passive] > tol).any():
            break
        j = int(np.argmax(np.where(passive, -np.inf, w)))
        passive[j] = True
        while True:
            z = np.zeros(n)
            z[passive] = np.linalg.lstsq(a[:, passive], b, rcond=None)[0]
            if (z[passive] > 0).all():
                x = z
                break
            neg = passive & (z <= 0)
            alpha = float(np.min(x[neg] / (x[neg] - z[neg])))
            x = x + alpha * (z - x)
            passive &= x > tol
            x[~passive] = 0.0
        w = a.T @ (b - a @ x)
    return x


@dataclass(frozen=True)
class GroupFit:
    """The fitted coefficients of one group (see :data:`FEATURES`) and the rows they came from."""

    group: str
    coef: tuple[float, float, float, float]
    rows: int

    def predict(self, x: Sequence[float]) -> float:
        """Milliseconds for a feature vector from :func:`features`."""
        return float(sum(c * v for c, v in zip(self.coef, x, strict=True)))

    def to_dict(self) -> dict[str, Any]:
        return {"rows": self.rows, **dict(zip(FEATURES, self.coef, strict=True))}


def _fit(group: str, xs: list[tuple[float, ...]], ys: list[float]) -> GroupFit:
    a = np.asarray(xs, dtype=float)
    y = np.asarray(ys, dtype=float)
    weight = 1.0 / y
    # Columns scaled to unit size so the solver's tolerance means the same for each.
    scale = np.abs(a).max(axis=0)
    scale[scale == 0] = 1.0
    coef = nnls(a * weight[:, None] / scale, y * weight) / scale
    c = tuple(float(v) for v in coef)
    return GroupFit(group, (c[0], c[1], c[2], c[3]), len(ys))


@dataclass(frozen=True)
class FittedRoofline:
    """Per-group fitted coefficients; prices any configuration (see the module docstring).

    groups: group name -> fit; always has ``pooled`` and, when the table had convs, ``conv``.
    """

    groups: Mapping[str, GroupFit]

    @classmethod
    def fit(cls, table: Iterable[tuple[str, Attrs, Sequence[Shape], float]]) -> FittedRoofline:
        """Fit to ``(op, attrs, in_shapes, ms)`` rows. Raises ValueError for an empty table.

        >>> rows = [("relu", (), ((1, n),), 0.01 + n * 8e-9) for n in (10, 10**5, 10**6, 10**7)] * 2
        >>> f = FittedRoofline.fit(rows)
        >>> round(f.price("relu", (), ((1, 10**6),)), 4)
        0.018
        """
        by_group: dict[str, tuple[list[tuple[float, ...]], list[float]]] = {}
        for op, attrs, shapes, ms in table:
            if not (ms > 0 and math.isfinite(ms)):
                continue
            spec = get_op(op)
            group = fit_group(spec, shapes)
            x = features(spec, attrs, shapes)
            for g in dict.fromkeys((group, parent_group(group))):
                if g == POOLED and (group == "gemm" or group.startswith("conv")):
                    continue  # the pooled fit stands for the memory-bound ops only
                xs, ys = by_group.setdefault(g, ([], []))
                xs.append(x)
                ys.append(ms)
        if not by_group:
            raise ValueError("cannot fit a roofline to an empty timing table")
        if POOLED not in by_group:
            # A table of only GEMMs and convs: its cheapest rows stand for the floor of the rest.
            rows = [(x, y) for xs, ys in by_group.values() for x, y in zip(xs, ys, strict=True)]
            rows.sort(key=lambda r: r[1])
            cheap = rows[: max(1, len(rows) // 4)]
            by_group[POOLED] = ([(1.0, 0.0, x[2], 0.0) for x, _ in cheap], [y for _, y in cheap])
        groups = {
            g: _fit(g, xs, ys)
            for g, (xs, ys) in sorted(by_group.items())
            if len(ys) >= MIN_ROWS or g in (POOLED, "conv", "gemm")
        }
        return cls(groups)

    def group_for(self, group: str) -> GroupFit:
        """The fit that prices ``group``: its own, else its parent's, else the pooled one."""
        for g in (group, parent_group(group), POOLED):
            if g in self.groups:
                return self.groups[g]
        raise AssertionError("the pooled group is always fitted")

    def price(self, op: str, attrs: Attrs, in_shapes: Sequence[Shape]) -> float:
        """Milliseconds of one configuration of ``op`` (never below the group's floor)."""
        spec = get_op(op)
        return self.price_spec(spec, attrs, in_shapes)

    def price_spec(
        self,
        spec: OpSpec,
        attrs: Attrs,
        in_shapes: Sequence[Shape],
        *,
        itemsize: int = 4,
        compute_scale: float = 1.0,
    ) -> float:
        """:meth:`price` for an OpSpec already looked up.

        itemsize: bytes per element of the priced dtype. Default 4 (what tables record).
        compute_scale: factor on the FLOP term, for a dtype whose units run faster or slower than
            the table's (:func:`~tensor_eqsat.cost.dtype_rates.compute_scale`). Default 1.
        """
        fit = self.group_for(fit_group(spec, in_shapes))
        one, gflops, gb, act = features(spec, attrs, in_shapes, itemsize)
        return max(fit.predict((one, gflops * compute_scale, gb, act)), 1e-6)

    def to_dict(self) -> dict[str, Any]:
        """The coefficients of every group, JSON-ready."""
        return {g: f.to_dict() for g, f in self.groups.items()}
