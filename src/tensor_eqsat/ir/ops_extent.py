"""Ops that change a tensor's extent along its axes: ``pad`` (grow), ``slice`` (shrink),
``expand`` (broadcast) and ``mean`` (reduce).

What today's inference graphs need besides TASO's ops (issue 33): PyTorch's explicit conv and
pool padding that is not TASO's SAME (a stride-2 conv with padding 1 on an even size) and
TensorFlow-style ``F.pad`` (MobileNet-v2, EfficientNet) are ``pad`` then a VALID window op; the
halves of rotary embeddings are ``slice``; grouped-query attention repeats key/value heads with
``expand``; RMSNorm and global pooling are ``mean``.

* ``pad``: ``pads`` lists, per axis, the elements added before, then per axis the elements added
  after (ONNX's order), all >= 0; ``fill`` is ``zero`` or ``neg_inf`` (what a max pool pads
  with). It moves bytes (kind MEMORY).
* ``slice``: elements ``start, start + step, ...`` below ``end`` of one axis, with
  ``0 <= start < end <= dim`` and ``step >= 1``. A view in PyTorch and ONNX Runtime: free, like
  ``split``.
* ``expand``: NumPy broadcasting of the input to ``shape`` (same rank; each input dim is 1 or the
  target's). It writes its output (kind MEMORY): the readers of a repeated tensor in these
  graphs (a reshape to merge the repeated axis) materialise it.
* ``mean``: the mean over ``axes`` (sorted, distinct, canonical), keeping them as size-1 dims
  when ``keepdims``. Accumulates in float64, rounds once.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from tensor_eqsat.errors import ShapeError
from tensor_eqsat.ir.ops_common import A, zero_flops
from tensor_eqsat.ir.opspec import AttrSpec, OpSpec
from tensor_eqsat.ir.symbolic import is_one
from tensor_eqsat.ir.types import OpKind, Shape, volume

SPECS: list[OpSpec] = []
"""This family's ops, in registration order (:mod:`tensor_eqsat.ir.ops` registers them)."""


def _pad_infer(shapes: Sequence[Shape], a: A) -> tuple[Shape, ...]:
    x, pads = shapes[0], a["pads"]
    if len(pads) != 2 * len(x):
        raise ShapeError("pad", f"pads needs {2 * len(x)} values (before and after each axis)", shapes)
    if any(p < 0 for p in pads):
        raise ShapeError("pad", f"pads must be >= 0, got {pads}", shapes, attr="pads")
    r = len(x)
    return (tuple(d + pads[i] + pads[r + i] for i, d in enumerate(x)),)


def _pad(x: Sequence[np.ndarray], a: A) -> tuple[np.ndarray, ...]:
    r, pads = x[0].ndim, a["pads"]
    value = np.float32(-np.inf) if a["fill"] == "neg_inf" else np.float32(0.0)
    width = [(pads[i], pads[r + i]) for i in range(r)]
    return (np.pad(x[0], width, constant_values=value).astype(np.float32, copy=False),)


SPECS.append(
    OpSpec(
        name="pad",
        inputs=("x",),
        attrs=(
            AttrSpec("pads", "ints"),
            AttrSpec("fill", "enum", default="zero", choices=("zero", "neg_inf")),
        ),
        infer=_pad_infer,
        compute=_pad,
        flops=zero_flops,
        kind=OpKind.MEMORY,
        doc="constant padding (zeros or -inf) before and after each axis",
    )
)


def _axis_canon(shapes: Sequence[Shape], attrs: dict[str, Any]) -> dict[str, Any]:
    value = attrs.get("axis")
    if isinstance(value, int | np.integer) and not isinstance(value, bool) and shapes:
        rank = len(shapes[0])
        if -rank <= value < 0:
            attrs["axis"] = int(value) + rank
    return attrs


def _slice_infer(shapes: Sequence[Shape], a: A) -> tuple[Shape, ...]:
    x = shapes[0]
    axis, start, end, step = a["axis"], a["start"], a["end"], a["step"]
    if not 0 <= axis < len(x):
        raise ShapeError("slice", f"axis {axis} out of range for rank {len(x)}", shapes, attr="axis")
    if not (0 <= start < end <= x[axis]) or step < 1:
        raise ShapeError(
            "slice", f"needs 0 <= start < end <= {x[axis]} and step >= 1, got {start}:{end}:{step}", shapes
        )
    out = list(x)
    out[axis] = len(range(start, end, step))
    return (tuple(out),)


def _slice(x: Sequence[np.ndarray], a: A) -> tuple[np.ndarray, ...]:
    index: list[Any] = [slice(None)] * x[0].ndim
    index[a["axis"]] = slice(a["start"], a["end"], a["step"])
    return (np.ascontiguousarray(x[0][tuple(index)]),)


SPECS.append(
    OpSpec(
        name="slice",
        inputs=("x",),
        attrs=(
            AttrSpec("axis", "int"),
            AttrSpec("start", "int"),
            AttrSpec("end", "int"),
            AttrSpec("step", "int", default=1),
        ),
        infer=_slice_infer,
        compute=_slice,
        flops=zero_flops,
        kind=OpKind.VIEW,
        canonicalize=_axis_canon,
        doc="elements start:end:step of one axis (a view)",
    )
)


def _expand_infer(shapes: Sequence[Shape], a: A) -> tuple[Shape, ...]:
    x, shape = shapes[0], tuple(a["shape"])
    if len(x) != len(shape) or any(d != s and not is_one(d) for d, s in zip(x, shape, strict=True)):
        raise ShapeError("expand", f"cannot broadcast to {shape} (same rank, dims 1 or equal)", shapes)
    if any(s < 1 for s in shape):
        raise ShapeError("expand", f"target dims must be >= 1, got {shape}", shapes, attr="shape")
    return (shape,)


SPECS.append(
    OpSpec(
        name="expand",
        inputs=("x",),
        attrs=(AttrSpec("shape", "dims"),),
        infer=_expand_infer,
        compute=lambda x, a: (np.broadcast_to(x[0], tuple(a["shape"])).copy(),),
        flops=zero_flops,
        kind=OpKind.MEMORY,
        doc="broadcast to a shape of the same rank (size-1 dims repeated)",
    )
)


def _mean_canon(shapes: Sequence[Shape], attrs: dict[str, Any]) -> dict[str, Any]:
    axes = attrs.get("axes")
    if shapes and isinstance(axes, Sequence | np.ndarray) and not isinstance(axes, str | bytes):
        rank = len(shapes[0])
        if all(isinstance(v, int | np.integer) and not isinstance(v, bool) for v in axes):
            attrs["axes"] = tuple(sorted(int(v) + rank if -rank <= v < 0 else int(v) for v in axes))
    return attrs


def _mean_infer(shapes: Sequence[Shape], a: A) -> tuple[Shape, ...]:
    x, axes = shapes[0], tuple(a["axes"])
    if not axes or len(set(axes)) != len(axes) or any(not 0 <= d < len(x) for d in axes):
        raise ShapeError("mean", f"axes {axes} must be distinct axes of a rank-{len(x)} input", shapes)
    if a["keepdims"]:
        return (tuple(1 if i in axes else d for i, d in enumerate(x)),)
    return (tuple(d for i, d in enumerate(x) if i not in axes),)


def _mean(x: Sequence[np.ndarray], a: A) -> tuple[np.ndarray, ...]:
    out = x[0].astype(np.float64).mean(axis=tuple(a["axes"]), keepdims=a["keepdims"])
    return (np.asarray(out).astype(np.float32),)


def _mean_flops(ins: Sequence[Shape], outs: Sequence[Shape], a: A) -> int:
    return volume(ins[0])


SPECS.append(
    OpSpec(
        name="mean",
        inputs=("x",),
        attrs=(AttrSpec("axes", "ints"), AttrSpec("keepdims", "bool", default=False)),
        infer=_mean_infer,
        compute=_mean,
        flops=_mean_flops,
        kind=OpKind.REDUCTION,
        canonicalize=_mean_canon,
        doc="mean over axes (kept as size-1 dims with keepdims)",
    )
)
