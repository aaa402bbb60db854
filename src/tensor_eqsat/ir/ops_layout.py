"""Data movement: ``concat`` (costs bytes), and the views ``split``, ``reshape``, ``transpose``,
``dropout`` and ``noop``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from tensor_eqsat.errors import ShapeError
from tensor_eqsat.ir.ops_common import A, axis_canon, check_axis, same_shape, shape_ok, zero_flops
from tensor_eqsat.ir.opspec import AttrSpec, OpSpec
from tensor_eqsat.ir.symbolic import SymDim, divides
from tensor_eqsat.ir.types import OpKind, Shape, volume

SPECS: list[OpSpec] = []
"""This family's ops, in registration order (:mod:`tensor_eqsat.ir.ops` registers them)."""


def _concat_infer(shapes: Sequence[Shape], a: A) -> tuple[Shape, ...]:
    rank = len(shapes[0])
    axis = a["axis"]
    check_axis("concat", shapes, axis, rank)
    for s in shapes[1:]:
        if len(s) != rank:
            raise ShapeError("concat", "inputs have different ranks", shapes)
        if any(s[d] != shapes[0][d] for d in range(rank) if d != axis):
            raise ShapeError("concat", f"inputs differ outside axis {axis}", shapes, attr="axis")
    out = list(shapes[0])
    out[axis] = sum(s[axis] for s in shapes)
    return (tuple(out),)


SPECS.append(
    OpSpec(
        name="concat",
        inputs=("xs",),
        attrs=(AttrSpec("axis", "int"),),
        infer=_concat_infer,
        compute=lambda x, a: (np.concatenate(x, axis=a["axis"]).astype(np.float32, copy=False),),
        flops=zero_flops,
        kind=OpKind.MEMORY,
        variadic=True,
        min_inputs=1,
        canonicalize=axis_canon("axis"),
        doc="concatenate n tensors along an axis",
    )
)


def _split_infer(shapes: Sequence[Shape], a: A) -> tuple[Shape, ...]:
    x = shapes[0]
    axis, sizes = a["axis"], a["sizes"]
    check_axis("split", shapes, axis, len(x))
    if sum(sizes) != x[axis]:
        raise ShapeError(
            "split", f"sizes {sizes} sum to {sum(sizes)}, not to dim {axis} = {x[axis]}", shapes, attr="sizes"
        )
    outs = []
    for n in sizes:
        s = list(x)
        s[axis] = n
        outs.append(tuple(s))
    return tuple(outs)


def _split(x: Sequence[np.ndarray], a: A) -> tuple[np.ndarray, ...]:
    bounds = np.cumsum(a["sizes"])[:-1]
    return tuple(np.ascontiguousarray(p) for p in np.split(x[0], bounds, axis=a["axis"]))


SPECS.append(
    OpSpec(
        name="split",
        inputs=("x",),
        attrs=(
            AttrSpec("axis", "int"),
            AttrSpec(
                "sizes",
                "dims",
                check=lambda v: len(v) >= 1 and all(d >= 1 for d in v),
                check_msg="must be one or more sizes >= 1",
            ),
        ),
        infer=_split_infer,
        compute=_split,
        flops=zero_flops,
        kind=OpKind.VIEW,
        canonicalize=axis_canon("axis"),
        doc="split along an axis into pieces of the given sizes (several outputs)",
    )
)


def _reshape_canon(shapes: Sequence[Shape], attrs: dict[str, Any]) -> dict[str, Any]:
    # ONNX conventions: 0 copies the input dim at the same position, one -1 takes the rest.
    # Anything that is not a sequence of ints is left for make_attrs to reject with its message.
    target = attrs.get("shape")
    if not shapes or not isinstance(target, Sequence | np.ndarray) or isinstance(target, str):
        return attrs
    if any(isinstance(d, bool) or not isinstance(d, int | np.integer | SymDim) for d in target):
        return attrs
    src = shapes[0]
    dims = [
        src[i] if d == 0 and i < len(src) else d if isinstance(d, SymDim) else int(d)
        for i, d in enumerate(target)
    ]
    if dims.count(-1) > 1:
        raise ShapeError("reshape", f"target {tuple(target)} has more than one -1", shapes, attr="shape")
    if dims.count(-1) == 1:
        known = math.prod(d for d in dims if d != -1)
        if known <= 0 or not divides(known, volume(src)):
            raise ShapeError(
                "reshape",
                f"cannot reshape {volume(src)} elements into {tuple(target)}",
                shapes,
                attr="shape",
            )
        dims[dims.index(-1)] = volume(src) // known
    attrs["shape"] = tuple(dims)
    return attrs


def _reshape_infer(shapes: Sequence[Shape], a: A) -> tuple[Shape, ...]:
    target = tuple(a["shape"])
    if volume(target) != volume(shapes[0]):
        raise ShapeError(
            "reshape", f"cannot reshape {volume(shapes[0])} elements into {target}", shapes, attr="shape"
        )
    return (target,)


SPECS.append(
    OpSpec(
        name="reshape",
        inputs=("x",),
        attrs=(AttrSpec("shape", "dims", check=shape_ok, check_msg="every dim must be >= 1 once resolved"),),
        infer=_reshape_infer,
        compute=lambda x, a: (x[0].reshape(a["shape"]),),
        flops=zero_flops,
        kind=OpKind.VIEW,
        canonicalize=_reshape_canon,
        doc="reshape (the builder resolves -1 and 0)",
    )
)


def _transpose_infer(shapes: Sequence[Shape], a: A) -> tuple[Shape, ...]:
    x, perm = shapes[0], a["perm"]
    if sorted(perm) != list(range(len(x))):
        raise ShapeError(
            "transpose", f"perm {perm} is not a permutation of the {len(x)} dims", shapes, attr="perm"
        )
    return (tuple(x[p] for p in perm),)


def transpose_copy(x: np.ndarray, perm: Sequence[int]) -> np.ndarray:
    """``x`` transposed by ``perm`` as a new C-ordered array. A large matrix transposed whole
    (a dense layer's weight) is copied in tiles that stay in cache: numpy's strided copy took
    3.6 s for VGG-19's 4096 x 25088 weight, the tiles 0.7 s.

    >>> transpose_copy(np.arange(6).reshape(2, 3), (1, 0)).tolist()
    [[0, 3], [1, 4], [2, 5]]
    """
    if x.ndim != 2 or tuple(perm) != (1, 0) or x.size < _TILE * _TILE:
        # copy(): ascontiguousarray would turn a 0-d tensor into shape (1,).
        return np.transpose(x, perm).copy(order="C")
    rows, cols = x.shape
    out = np.empty((cols, rows), dtype=x.dtype)
    for i in range(0, rows, _TILE):
        for j in range(0, cols, _TILE):
            out[j : j + _TILE, i : i + _TILE] = x[i : i + _TILE, j : j + _TILE].T
    return out


_TILE = 256
"""Rows and columns of the tiles :func:`transpose_copy` moves at a time."""


SPECS.append(
    OpSpec(
        name="transpose",
        inputs=("x",),
        attrs=(AttrSpec("perm", "ints"),),
        infer=_transpose_infer,
        compute=lambda x, a: (transpose_copy(x[0], a["perm"]),),
        flops=zero_flops,
        kind=OpKind.VIEW,
        doc="permute dims",
    )
)


SPECS.append(
    OpSpec(
        name="dropout",
        inputs=("x",),
        attrs=(
            AttrSpec(
                "rate", "float", default=0.0, check=lambda v: 0.0 <= v < 1.0, check_msg="must be in [0, 1)"
            ),
        ),
        infer=same_shape,
        compute=lambda x, a: (x[0],),
        flops=zero_flops,
        kind=OpKind.VIEW,
        doc="dropout: the identity at inference",
    )
)


SPECS.append(
    OpSpec(
        name="noop",
        inputs=("xs",),
        attrs=(),
        infer=lambda s, a: ((),),
        compute=lambda x, a: (np.zeros((), dtype=np.float32),),
        flops=zero_flops,
        kind=OpKind.VIEW,
        variadic=True,
        min_inputs=1,
        doc="joins several tensors into one dummy root (mirrors TENSAT's models)",
    )
)
