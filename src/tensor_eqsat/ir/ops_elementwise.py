"""Element-wise operators: ``ewadd`` and ``ewmul`` (NumPy broadcasting), ``relu``, ``tanh``,
``sigmoid``, ``smul``, ``sdiv``, ``gelu`` and inference-mode ``batchnorm``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from tensor_eqsat.errors import ShapeError
from tensor_eqsat.ir.ops_common import A, activate, out_volume_flops, same_shape, sigmoid_numpy
from tensor_eqsat.ir.opspec import AttrSpec, OpSpec
from tensor_eqsat.ir.symbolic import broadcast_shapes
from tensor_eqsat.ir.types import OpKind, Shape

SPECS: list[OpSpec] = []
"""This family's ops, in registration order (:mod:`tensor_eqsat.ir.ops` registers them)."""


def _broadcast(op: str, shapes: Sequence[Shape]) -> Shape:
    try:
        return broadcast_shapes(*shapes)
    except ValueError:
        raise ShapeError(op, "shapes are not broadcastable", shapes) from None


def _binary(name: str, fn: Any, doc: str) -> None:
    SPECS.append(
        OpSpec(
            name=name,
            inputs=("a", "b"),
            attrs=(),
            infer=lambda s, a: (_broadcast(name, s),),
            compute=lambda x, a: (fn(x[0], x[1]).astype(np.float32, copy=False),),
            flops=out_volume_flops(1),
            kind=OpKind.ELEMENTWISE,
            doc=doc,
        )
    )


_binary("ewadd", np.add, "element-wise add with NumPy broadcasting")


_binary("ewmul", np.multiply, "element-wise multiply with NumPy broadcasting")


def _unary(name: str, fn: Any, doc: str, flops: int = 1) -> None:
    SPECS.append(
        OpSpec(
            name=name,
            inputs=("x",),
            attrs=(),
            infer=same_shape,
            compute=lambda x, a: (fn(x[0]).astype(np.float32, copy=False),),
            flops=out_volume_flops(flops),
            kind=OpKind.ELEMENTWISE,
            doc=doc,
        )
    )


_unary("relu", lambda x: activate(x, "relu"), "max(x, 0)")


_unary("tanh", np.tanh, "hyperbolic tangent", flops=4)


_unary("sigmoid", sigmoid_numpy, "logistic sigmoid", flops=4)


SPECS.append(
    OpSpec(
        name="smul",
        inputs=("x",),
        attrs=(AttrSpec("scalar", "float"),),
        infer=same_shape,
        compute=lambda x, a: ((x[0] * np.float32(a["scalar"])).astype(np.float32),),
        flops=out_volume_flops(1),
        kind=OpKind.ELEMENTWISE,
        doc="multiply by a scalar constant",
    )
)


SPECS.append(
    OpSpec(
        name="sdiv",
        inputs=("x",),
        attrs=(AttrSpec("divisor", "float", check=lambda v: v != 0.0, check_msg="must be non-zero"),),
        infer=same_shape,
        compute=lambda x, a: ((x[0] / np.float32(a["divisor"])).astype(np.float32),),
        flops=out_volume_flops(1),
        kind=OpKind.ELEMENTWISE,
        doc="divide by a scalar constant",
    )
)


def _gelu(x: np.ndarray, approximate: str) -> np.ndarray:
    if approximate == "tanh":
        c = math.sqrt(2.0 / math.pi)
        return (0.5 * x * (1.0 + np.tanh(c * (x + 0.044715 * x**3)))).astype(np.float32)
    from math import erf

    verf = np.vectorize(erf, otypes=[np.float64])
    return (0.5 * x * (1.0 + verf(x.astype(np.float64) / math.sqrt(2.0)))).astype(np.float32)


SPECS.append(
    OpSpec(
        name="gelu",
        inputs=("x",),
        attrs=(AttrSpec("approximate", "enum", default="none", choices=("none", "tanh")),),
        infer=same_shape,
        compute=lambda x, a: (_gelu(x[0], a["approximate"]),),
        flops=out_volume_flops(8),
        kind=OpKind.ELEMENTWISE,
        doc="GELU, exact (erf) or tanh-approximated",
    )
)


def _batchnorm_infer(shapes: Sequence[Shape], a: A) -> tuple[Shape, ...]:
    x = shapes[0]
    if len(x) < 2:
        raise ShapeError("batchnorm", f"input must have rank >= 2, got rank {len(x)}", shapes)
    c = x[1]
    for name, s in zip(("scale", "bias", "mean", "var"), shapes[1:], strict=True):
        if tuple(s) != (c,):
            raise ShapeError("batchnorm", f"{name} must have shape ({c},) for {c} channels", shapes)
    return (tuple(x),)


def _batchnorm(x: Sequence[np.ndarray], a: A) -> tuple[np.ndarray, ...]:
    data, scale, bias, mean, var = x
    bshape = (1, -1) + (1,) * (data.ndim - 2)
    inv = (scale / np.sqrt(var + np.float32(a["eps"]))).reshape(bshape)
    out = (data - mean.reshape(bshape)) * inv + bias.reshape(bshape)
    return (out.astype(np.float32),)


SPECS.append(
    OpSpec(
        name="batchnorm",
        inputs=("x", "scale", "bias", "mean", "var"),
        attrs=(AttrSpec("eps", "float", default=1e-5, check=lambda v: v >= 0, check_msg="must be >= 0"),),
        infer=_batchnorm_infer,
        compute=_batchnorm,
        flops=out_volume_flops(2),
        kind=OpKind.ELEMENTWISE,
        positive_inputs=frozenset({4}),
        doc="inference batch normalization over channel axis 1",
    )
)
