"""``matmul``: contracts the last two dims and broadcasts the leading (batch) dims like
``numpy.matmul``, with an optional fused activation.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from tensor_eqsat.errors import ShapeError
from tensor_eqsat.ir.ops_common import A, act_attr, activate
from tensor_eqsat.ir.opspec import OpSpec
from tensor_eqsat.ir.symbolic import broadcast_shapes
from tensor_eqsat.ir.types import OpKind, Shape, volume

SPECS: list[OpSpec] = []
"""This family's ops, in registration order (:mod:`tensor_eqsat.ir.ops` registers them)."""


def _matmul_infer(shapes: Sequence[Shape], a: A) -> tuple[Shape, ...]:
    x, y = shapes
    if len(x) < 2 or len(y) < 2:
        raise ShapeError("matmul", "both operands need rank >= 2", shapes)
    if x[-1] != y[-2]:
        raise ShapeError("matmul", f"contracted dims differ: {x[-1]} vs {y[-2]}", shapes)
    try:
        batch = broadcast_shapes(tuple(x[:-2]), tuple(y[:-2]))
    except ValueError:
        raise ShapeError("matmul", "batch dims are not broadcastable", shapes) from None
    return (batch + (x[-2], y[-1]),)


def _matmul_flops(ins: Sequence[Shape], outs: Sequence[Shape], a: A) -> int:
    return 2 * volume(outs[0]) * ins[0][-1]


SPECS.append(
    OpSpec(
        name="matmul",
        inputs=("a", "b"),
        attrs=(act_attr(),),
        infer=_matmul_infer,
        compute=lambda x, a: (activate(np.matmul(x[0], x[1]).astype(np.float32), a["activation"]),),
        flops=_matmul_flops,
        kind=OpKind.GEMM,
        doc="batched matrix product of the last two dims, optional fused activation",
    )
)
