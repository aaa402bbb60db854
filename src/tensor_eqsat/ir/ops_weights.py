"""Weight transforms that rewrites introduce: ``enlarge`` (zero-pad a kernel to a reference
kernel's size) and ``merge`` (TASO's merge_gconv made exact; see :mod:`tensor_eqsat.ir.ops`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from tensor_eqsat.errors import ShapeError
from tensor_eqsat.ir.ops_common import A, zero_flops
from tensor_eqsat.ir.opspec import AttrSpec, OpSpec
from tensor_eqsat.ir.types import OpKind, Shape

SPECS: list[OpSpec] = []
"""This family's ops, in registration order (:mod:`tensor_eqsat.ir.ops` registers them)."""


def _enlarge_infer(shapes: Sequence[Shape], a: A) -> tuple[Shape, ...]:
    w, ref = shapes
    if len(w) != 4 or len(ref) != 4:
        raise ShapeError("enlarge", "both weights must be 4-D", shapes)
    if w[2] > ref[2] or w[3] > ref[3]:
        raise ShapeError("enlarge", f"kernel {w[2:]} is larger than the reference kernel {ref[2:]}", shapes)
    return ((w[0], w[1], ref[2], ref[3]),)


def _enlarge(x: Sequence[np.ndarray], a: A) -> tuple[np.ndarray, ...]:
    w, ref = x
    out = np.zeros(w.shape[:2] + ref.shape[2:], dtype=np.float32)
    oh = (ref.shape[2] - w.shape[2]) // 2
    ow = (ref.shape[3] - w.shape[3]) // 2
    out[:, :, oh : oh + w.shape[2], ow : ow + w.shape[3]] = w
    return (out,)


SPECS.append(
    OpSpec(
        name="enlarge",
        inputs=("weight", "reference"),
        attrs=(),
        infer=_enlarge_infer,
        compute=_enlarge,
        flops=zero_flops,
        kind=OpKind.WEIGHT_TRANSFORM,
        doc="zero-pad a conv kernel, centred, to the reference weight's kernel size",
    )
)


def _merge_infer(shapes: Sequence[Shape], a: A) -> tuple[Shape, ...]:
    (w,) = shapes
    count, groups = a["count"], a["groups"]
    if len(w) != 4:
        raise ShapeError("merge", "weight must be 4-D", shapes)
    if groups % count != 0:
        raise ShapeError("merge", f"groups {groups} is not a multiple of count {count}", shapes, attr="count")
    if w[0] % groups != 0:
        raise ShapeError(
            "merge", f"output channels {w[0]} are not a multiple of groups {groups}", shapes, attr="groups"
        )
    return ((w[0], w[1] * count, w[2], w[3]),)


def _merge(x: Sequence[np.ndarray], a: A) -> tuple[np.ndarray, ...]:
    (w,) = x
    count, groups = a["count"], a["groups"]
    cout, cin_g = w.shape[0], w.shape[1]
    out = np.zeros((cout, cin_g * count) + w.shape[2:], dtype=np.float32)
    per_group = cout // groups
    for o in range(cout):
        slot = (o // per_group) % count
        out[o, slot * cin_g : (slot + 1) * cin_g] = w[o]
    return (out,)


def _positive(v: int) -> bool:
    return v >= 1


SPECS.append(
    OpSpec(
        name="merge",
        inputs=("weight",),
        attrs=(
            AttrSpec("count", "int", check=_positive, check_msg="must be >= 1"),
            AttrSpec("groups", "int", check=_positive, check_msg="must be >= 1"),
        ),
        infer=_merge_infer,
        compute=_merge,
        flops=zero_flops,
        kind=OpKind.WEIGHT_TRANSFORM,
        doc="widen a grouped-conv weight so the conv runs with groups/count groups (TASO merge_gconv)",
    )
)
