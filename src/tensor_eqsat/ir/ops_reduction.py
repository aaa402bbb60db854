"""Operators that normalise along an axis: ``softmax`` and ``layernorm``.

The axis attribute is canonical (non-negative); the graph builder resolves negative axes.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from tensor_eqsat.errors import ShapeError
from tensor_eqsat.ir.ops_common import A, axis_canon, check_axis, out_volume_flops
from tensor_eqsat.ir.opspec import AttrSpec, OpSpec
from tensor_eqsat.ir.types import OpKind, Shape

SPECS: list[OpSpec] = []
"""This family's ops, in registration order (:mod:`tensor_eqsat.ir.ops` registers them)."""


def _resolve_axis(op: str, shapes: Sequence[Shape], axis: int, rank: int) -> int:
    """``axis`` in [0, rank): for ops whose attribute default is negative (layernorm's -1), which
    patterns and the generic ``Graph.add`` may leave unresolved."""
    if -rank <= axis < 0:
        axis += rank
    check_axis(op, shapes, axis, rank)
    return axis


def _softmax_infer(shapes: Sequence[Shape], a: A) -> tuple[Shape, ...]:
    check_axis("softmax", shapes, a["axis"], len(shapes[0]))
    return (tuple(shapes[0]),)


def _softmax(x: Sequence[np.ndarray], a: A) -> tuple[np.ndarray, ...]:
    v = x[0] - x[0].max(axis=a["axis"], keepdims=True)
    e = np.exp(v)
    return ((e / e.sum(axis=a["axis"], keepdims=True)).astype(np.float32),)


SPECS.append(
    OpSpec(
        name="softmax",
        inputs=("x",),
        attrs=(AttrSpec("axis", "int"),),
        infer=_softmax_infer,
        compute=_softmax,
        flops=out_volume_flops(5),
        kind=OpKind.REDUCTION,
        canonicalize=axis_canon("axis"),
        doc="softmax along one axis",
    )
)


def _layernorm_infer(shapes: Sequence[Shape], a: A) -> tuple[Shape, ...]:
    x = shapes[0]
    axis = _resolve_axis("layernorm", shapes, a["axis"], len(x))
    norm = tuple(x[axis:])
    for name, s in zip(("scale", "bias"), shapes[1:], strict=True):
        if tuple(s) != norm:
            raise ShapeError("layernorm", f"{name} must have shape {norm} (the normalized dims)", shapes)
    return (tuple(x),)


def _layernorm(x: Sequence[np.ndarray], a: A) -> tuple[np.ndarray, ...]:
    data, scale, bias = x
    axes = tuple(range(a["axis"] % data.ndim, data.ndim))
    d64 = data.astype(np.float64)
    mean = d64.mean(axis=axes, keepdims=True)
    var = ((d64 - mean) ** 2).mean(axis=axes, keepdims=True)
    out = (d64 - mean) / np.sqrt(var + a["eps"]) * scale + bias
    return (out.astype(np.float32),)


SPECS.append(
    OpSpec(
        name="layernorm",
        inputs=("x", "scale", "bias"),
        attrs=(
            AttrSpec("axis", "int", default=-1),
            AttrSpec("eps", "float", default=1e-5, check=lambda v: v >= 0, check_msg="must be >= 0"),
        ),
        infer=_layernorm_infer,
        compute=_layernorm,
        flops=out_volume_flops(8),
        kind=OpKind.REDUCTION,
        canonicalize=axis_canon("axis", default=-1),
        doc="layer normalization over dims axis..rank-1, with scale and bias",
    )
)
