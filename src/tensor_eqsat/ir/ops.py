"""Definitions of every operator (TASO/TENSAT semantics plus what transformers and ONNX need).

Layout is NCHW, dtype float32. Shape rules follow TASO (../reference/taso.md §1.2):

* conv2d / pools, SAME padding: output ``ceil(H / s)``; total padding
  ``max(k - s, 0)`` if ``H % s == 0`` else ``max(k - H % s, 0)``, split as ``total // 2`` before and
  the rest after (TensorFlow's and ONNX's SAME_UPPER). VALID: ``(H - k) // s + 1``.
* conv2d groups are implied by the weight: ``groups = C_in / weight.shape[1]``.
* element-wise binary ops broadcast like NumPy; matmul contracts the last two dims and broadcasts
  the leading (batch) dims like ``numpy.matmul`` (TASO required equal ranks; we accept the NumPy
  superset so that ONNX MatMul imports unchanged).
* avg-pool excludes padding from the mean (cuDNN's COUNT_EXCLUDE_PADDING, ONNX's default).
* ``merge`` is TASO's merge_gconv made exact: the weight of a conv with ``groups`` groups is widened
  so the same conv runs with ``groups // count`` groups. TASO derived the slot of each output
  channel from the weight alone, which is only right when ``groups == count``; the group count is
  therefore an attribute here.

Attributes are canonical: axes are non-negative and reshape targets fully resolved. The graph
builder accepts negative axes and ``-1``/``0`` in reshape targets and canonicalizes them first.

``opaque`` holds an ONNX operator the IR does not model (made by the ONNX importer): its
attributes carry the op type and domain, a ``payload`` (a base64 single-node ONNX model with the
node's attributes and small constant inputs), and the input and output shapes from ONNX shape
inference. Rules match ops by name, so no rule ever rewrites it; its numpy semantics run the
payload in onnxruntime, imported lazily.
"""

from __future__ import annotations

import base64
import functools
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from tensor_eqsat.errors import GraphError, ShapeError
from tensor_eqsat.ir.opspec import AttrSpec, OpSpec, all_ops, lookup, register
from tensor_eqsat.ir.types import Activation, OpKind, Padding, Shape, volume

A = Mapping[str, Any]

ACTIVATIONS = tuple(a.value for a in Activation)
PADDINGS = tuple(p.value for p in Padding)


def _pair_positive(v: tuple[int, ...]) -> bool:
    return len(v) == 2 and all(x >= 1 for x in v)


def _act_attr() -> AttrSpec:
    return AttrSpec("activation", "enum", default="none", choices=ACTIVATIONS)


def _fmt(shape: Shape) -> str:
    return str(tuple(shape))


# ---------------------------------------------------------------------------------------------
# Numpy helpers shared by several ops
# ---------------------------------------------------------------------------------------------


def _activate(x: np.ndarray, act: str) -> np.ndarray:
    if act == "none":
        return x
    if act == "relu":
        return np.maximum(x, 0).astype(x.dtype, copy=False)
    if act == "sigmoid":
        return _sigmoid(x)
    if act == "tanh":
        return np.tanh(x)
    raise AssertionError(act)


def _sigmoid(x: np.ndarray) -> np.ndarray:
    # Split by sign so that large |x| never overflows exp().
    out = np.empty_like(x)
    pos = x >= 0
    out[pos] = 1.0 / (1.0 + np.exp(-x[pos]))
    ex = np.exp(x[~pos])
    out[~pos] = ex / (1.0 + ex)
    return out


def same_padding(size: int, kernel: int, stride: int) -> tuple[int, int]:
    """TASO's SAME padding (before, after) along one spatial dim.

    >>> same_padding(112, 3, 2)   # 112 % 2 == 0: total = max(3 - 2, 0) = 1
    (0, 1)
    >>> same_padding(56, 3, 1)
    (1, 1)
    """
    total = max(kernel - stride, 0) if size % stride == 0 else max(kernel - size % stride, 0)
    return total // 2, total - total // 2


def window_out(size: int, kernel: int, stride: int, padding: str) -> int:
    """Output size of a conv or pool along one spatial dim (TASO's rule)."""
    if padding == "same":
        return -(-size // stride)
    return (size - kernel) // stride + 1


def _check_window(
    op: str,
    shapes: Sequence[Shape],
    h: int,
    w: int,
    kernel: tuple[int, int],
    stride: tuple[int, int],
    padding: str,
) -> tuple[int, int]:
    ho = window_out(h, kernel[0], stride[0], padding)
    wo = window_out(w, kernel[1], stride[1], padding)
    if ho < 1 or wo < 1:
        raise ShapeError(
            op,
            f"kernel {kernel} does not fit the {h}x{w} input with VALID padding",
            shapes,
            attr="padding",
        )
    return ho, wo


def _pad_spatial(
    x: np.ndarray, kernel: tuple[int, int], stride: tuple[int, int], padding: str, value: float
) -> np.ndarray:
    if padding != "same":
        return x
    ph = same_padding(x.shape[2], kernel[0], stride[0])
    pw = same_padding(x.shape[3], kernel[1], stride[1])
    if ph == (0, 0) and pw == (0, 0):
        return x
    return np.pad(x, ((0, 0), (0, 0), ph, pw), constant_values=value)


def _windows(x: np.ndarray, kernel: tuple[int, int], stride: tuple[int, int]) -> np.ndarray:
    """Strided view [N, C, Ho, Wo, kh, kw] of the (already padded) input."""
    win = sliding_window_view(x, kernel, axis=(2, 3))
    return win[:, :, :: stride[0], :: stride[1]]


def conv2d_numpy(x: np.ndarray, w: np.ndarray, stride: tuple[int, int], padding: str) -> np.ndarray:
    """Grouped 2-D convolution, NCHW, groups implied by the weight; no activation."""
    n, cin = x.shape[0], x.shape[1]
    cout, cin_g, kh, kw = w.shape
    groups = cin // cin_g
    xp = _pad_spatial(x, (kh, kw), stride, padding, 0.0)
    win = _windows(xp, (kh, kw), stride)  # N, Cin, Ho, Wo, kh, kw
    ho, wo = win.shape[2], win.shape[3]
    # [g, N*Ho*Wo, cin_g*kh*kw] @ [g, cin_g*kh*kw, cout_g] as one batched GEMM.
    win = win.reshape(n, groups, cin_g, ho, wo, kh, kw).transpose(1, 0, 3, 4, 2, 5, 6)
    cols = win.reshape(groups, n * ho * wo, cin_g * kh * kw)
    wm = w.reshape(groups, cout // groups, cin_g * kh * kw).transpose(0, 2, 1)
    out = np.matmul(cols, wm)  # g, N*Ho*Wo, cout_g
    out = out.reshape(groups, n, ho, wo, cout // groups).transpose(1, 0, 4, 2, 3)
    return np.ascontiguousarray(out.reshape(n, cout, ho, wo))


# ---------------------------------------------------------------------------------------------
# Leaves
# ---------------------------------------------------------------------------------------------


def _leaf_infer(op: str) -> Any:
    def infer(shapes: Sequence[Shape], a: A) -> tuple[Shape, ...]:
        return (tuple(a["shape"]),)

    return infer


def _leaf_compute(op: str) -> Any:
    def compute(arrays: Sequence[np.ndarray], a: A) -> tuple[np.ndarray, ...]:
        raise AssertionError(f"{op} values are supplied by the interpreter, not computed")

    return compute


def _zero_flops(ins: Sequence[Shape], outs: Sequence[Shape], a: A) -> int:
    return 0


def _out_volume_flops(factor: int) -> Any:
    def flops(ins: Sequence[Shape], outs: Sequence[Shape], a: A) -> int:
        return factor * sum(volume(s) for s in outs)

    return flops


def _shape_ok(v: tuple[int, ...]) -> bool:
    return all(d >= 1 for d in v)


for _leaf in ("input", "weight"):
    register(
        OpSpec(
            name=_leaf,
            inputs=(),
            attrs=(
                AttrSpec("shape", "ints", check=_shape_ok, check_msg="every dim must be >= 1"),
                AttrSpec("name", "str", check=bool, check_msg="must be non-empty"),
            ),
            infer=_leaf_infer(_leaf),
            compute=_leaf_compute(_leaf),
            flops=_zero_flops,
            kind=OpKind.LEAF,
            doc=f"a graph {_leaf} with a name and a fixed shape",
        )
    )


# ---------------------------------------------------------------------------------------------
# Element-wise
# ---------------------------------------------------------------------------------------------


def _broadcast(op: str, shapes: Sequence[Shape]) -> Shape:
    try:
        return tuple(int(d) for d in np.broadcast_shapes(*shapes))
    except ValueError:
        raise ShapeError(op, "shapes are not broadcastable", shapes) from None


def _binary(name: str, fn: Any, doc: str) -> None:
    register(
        OpSpec(
            name=name,
            inputs=("a", "b"),
            attrs=(),
            infer=lambda s, a: (_broadcast(name, s),),
            compute=lambda x, a: (fn(x[0], x[1]).astype(np.float32, copy=False),),
            flops=_out_volume_flops(1),
            kind=OpKind.ELEMENTWISE,
            doc=doc,
        )
    )


_binary("ewadd", np.add, "element-wise add with NumPy broadcasting")
_binary("ewmul", np.multiply, "element-wise multiply with NumPy broadcasting")


def _same(shapes: Sequence[Shape], a: A) -> tuple[Shape, ...]:
    return (tuple(shapes[0]),)


def _unary(name: str, fn: Any, doc: str, flops: int = 1) -> None:
    register(
        OpSpec(
            name=name,
            inputs=("x",),
            attrs=(),
            infer=_same,
            compute=lambda x, a: (fn(x[0]).astype(np.float32, copy=False),),
            flops=_out_volume_flops(flops),
            kind=OpKind.ELEMENTWISE,
            doc=doc,
        )
    )


_unary("relu", lambda x: _activate(x, "relu"), "max(x, 0)")
_unary("tanh", np.tanh, "hyperbolic tangent", flops=4)
_unary("sigmoid", _sigmoid, "logistic sigmoid", flops=4)

register(
    OpSpec(
        name="smul",
        inputs=("x",),
        attrs=(AttrSpec("scalar", "float"),),
        infer=_same,
        compute=lambda x, a: ((x[0] * np.float32(a["scalar"])).astype(np.float32),),
        flops=_out_volume_flops(1),
        kind=OpKind.ELEMENTWISE,
        doc="multiply by a scalar constant",
    )
)

register(
    OpSpec(
        name="sdiv",
        inputs=("x",),
        attrs=(AttrSpec("divisor", "float", check=lambda v: v != 0.0, check_msg="must be non-zero"),),
        infer=_same,
        compute=lambda x, a: ((x[0] / np.float32(a["divisor"])).astype(np.float32),),
        flops=_out_volume_flops(1),
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


register(
    OpSpec(
        name="gelu",
        inputs=("x",),
        attrs=(AttrSpec("approximate", "enum", default="none", choices=("none", "tanh")),),
        infer=_same,
        compute=lambda x, a: (_gelu(x[0], a["approximate"]),),
        flops=_out_volume_flops(8),
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


register(
    OpSpec(
        name="batchnorm",
        inputs=("x", "scale", "bias", "mean", "var"),
        attrs=(AttrSpec("eps", "float", default=1e-5, check=lambda v: v >= 0, check_msg="must be >= 0"),),
        infer=_batchnorm_infer,
        compute=_batchnorm,
        flops=_out_volume_flops(2),
        kind=OpKind.ELEMENTWISE,
        positive_inputs=frozenset({4}),
        doc="inference batch normalization over channel axis 1",
    )
)


# ---------------------------------------------------------------------------------------------
# Reductions: softmax, layernorm
# ---------------------------------------------------------------------------------------------


def _axis_canon(key: str, default: int | None = None) -> Any:
    """Canonicalizer turning a negative axis into ``axis + rank``; a missing axis takes
    ``default`` first (layernorm's default -1 is "the last dim", which depends on the rank)."""

    def canon(shapes: Sequence[Shape], attrs: dict[str, Any]) -> dict[str, Any]:
        if key not in attrs and default is not None:
            attrs[key] = default
        value = attrs.get(key)
        if isinstance(value, int | np.integer) and not isinstance(value, bool) and shapes:
            rank = len(shapes[0])
            if -rank <= value < 0:
                attrs[key] = int(value) + rank
        return attrs

    return canon


def _check_axis(op: str, shapes: Sequence[Shape], axis: int, rank: int) -> None:
    if not 0 <= axis < rank:
        raise ShapeError(op, f"axis {axis} out of range for rank {rank}", shapes, attr="axis")


def _resolve_axis(op: str, shapes: Sequence[Shape], axis: int, rank: int) -> int:
    """``axis`` in [0, rank): for ops whose attribute default is negative (layernorm's -1), which
    patterns and the generic ``Graph.add`` may leave unresolved."""
    if -rank <= axis < 0:
        axis += rank
    _check_axis(op, shapes, axis, rank)
    return axis


def _softmax_infer(shapes: Sequence[Shape], a: A) -> tuple[Shape, ...]:
    _check_axis("softmax", shapes, a["axis"], len(shapes[0]))
    return (tuple(shapes[0]),)


def _softmax(x: Sequence[np.ndarray], a: A) -> tuple[np.ndarray, ...]:
    v = x[0] - x[0].max(axis=a["axis"], keepdims=True)
    e = np.exp(v)
    return ((e / e.sum(axis=a["axis"], keepdims=True)).astype(np.float32),)


register(
    OpSpec(
        name="softmax",
        inputs=("x",),
        attrs=(AttrSpec("axis", "int"),),
        infer=_softmax_infer,
        compute=_softmax,
        flops=_out_volume_flops(5),
        kind=OpKind.REDUCTION,
        canonicalize=_axis_canon("axis"),
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


register(
    OpSpec(
        name="layernorm",
        inputs=("x", "scale", "bias"),
        attrs=(
            AttrSpec("axis", "int", default=-1),
            AttrSpec("eps", "float", default=1e-5, check=lambda v: v >= 0, check_msg="must be >= 0"),
        ),
        infer=_layernorm_infer,
        compute=_layernorm,
        flops=_out_volume_flops(8),
        kind=OpKind.REDUCTION,
        canonicalize=_axis_canon("axis", default=-1),
        doc="layer normalization over dims axis..rank-1, with scale and bias",
    )
)


# ---------------------------------------------------------------------------------------------
# matmul
# ---------------------------------------------------------------------------------------------


def _matmul_infer(shapes: Sequence[Shape], a: A) -> tuple[Shape, ...]:
    x, y = shapes
    if len(x) < 2 or len(y) < 2:
        raise ShapeError("matmul", "both operands need rank >= 2", shapes)
    if x[-1] != y[-2]:
        raise ShapeError("matmul", f"contracted dims differ: {x[-1]} vs {y[-2]}", shapes)
    try:
        batch = tuple(int(d) for d in np.broadcast_shapes(tuple(x[:-2]), tuple(y[:-2])))
    except ValueError:
        raise ShapeError("matmul", "batch dims are not broadcastable", shapes) from None
    return (batch + (x[-2], y[-1]),)


def _matmul_flops(ins: Sequence[Shape], outs: Sequence[Shape], a: A) -> int:
    return 2 * volume(outs[0]) * ins[0][-1]


register(
    OpSpec(
        name="matmul",
        inputs=("a", "b"),
        attrs=(_act_attr(),),
        infer=_matmul_infer,
        compute=lambda x, a: (_activate(np.matmul(x[0], x[1]).astype(np.float32), a["activation"]),),
        flops=_matmul_flops,
        kind=OpKind.GEMM,
        doc="batched matrix product of the last two dims, optional fused activation",
    )
)


# ---------------------------------------------------------------------------------------------
# conv2d, pools
# ---------------------------------------------------------------------------------------------


def _conv_infer(shapes: Sequence[Shape], a: A) -> tuple[Shape, ...]:
    x, w = shapes
    if len(x) != 4:
        raise ShapeError("conv2d", f"input must be 4-D NCHW, got rank {len(x)}", shapes)
    if len(w) != 4:
        raise ShapeError(
            "conv2d", f"weight must be 4-D [Cout, Cin/groups, kH, kW], got rank {len(w)}", shapes
        )
    cin, cout, cin_g = x[1], w[0], w[1]
    if cin % cin_g != 0:
        raise ShapeError(
            "conv2d",
            f"input channels {cin} are not a multiple of the weight's {cin_g} channels per group",
            shapes,
        )
    groups = cin // cin_g
    if cout % groups != 0:
        raise ShapeError("conv2d", f"output channels {cout} are not a multiple of groups {groups}", shapes)
    ho, wo = _check_window("conv2d", shapes, x[2], x[3], (w[2], w[3]), a["stride"], a["padding"])
    return ((x[0], cout, ho, wo),)


def _conv_compute(x: Sequence[np.ndarray], a: A) -> tuple[np.ndarray, ...]:
    out = conv2d_numpy(x[0], x[1], a["stride"], a["padding"])
    return (_activate(out.astype(np.float32), a["activation"]),)


def _conv_flops(ins: Sequence[Shape], outs: Sequence[Shape], a: A) -> int:
    w = ins[1]
    return 2 * volume(outs[0]) * w[1] * w[2] * w[3]


register(
    OpSpec(
        name="conv2d",
        inputs=("x", "weight"),
        attrs=(
            AttrSpec(
                "stride", "ints", default=(1, 1), check=_pair_positive, check_msg="must be two ints >= 1"
            ),
            AttrSpec("padding", "enum", default="same", choices=PADDINGS),
            _act_attr(),
        ),
        infer=_conv_infer,
        compute=_conv_compute,
        flops=_conv_flops,
        kind=OpKind.CONV,
        doc="2-D convolution NCHW; groups = C_in / weight.shape[1]; fused activation",
    )
)


def _pool_infer(name: str) -> Any:
    def infer(shapes: Sequence[Shape], a: A) -> tuple[Shape, ...]:
        x = shapes[0]
        if len(x) != 4:
            raise ShapeError(name, f"input must be 4-D NCHW, got rank {len(x)}", shapes)
        ho, wo = _check_window(name, shapes, x[2], x[3], a["kernel"], a["stride"], a["padding"])
        return ((x[0], x[1], ho, wo),)

    return infer


def _poolmax(x: Sequence[np.ndarray], a: A) -> tuple[np.ndarray, ...]:
    xp = _pad_spatial(x[0], a["kernel"], a["stride"], a["padding"], -np.inf)
    out = _windows(xp, a["kernel"], a["stride"]).max(axis=(4, 5))
    return (_activate(np.ascontiguousarray(out, dtype=np.float32), a["activation"]),)


def _poolavg(x: Sequence[np.ndarray], a: A) -> tuple[np.ndarray, ...]:
    k, s, pad = a["kernel"], a["stride"], a["padding"]
    xp = _pad_spatial(x[0], k, s, pad, 0.0)
    total = _windows(xp, k, s).sum(axis=(4, 5), dtype=np.float64)
    ones = np.ones((1, 1) + x[0].shape[2:], dtype=np.float64)
    count = _windows(_pad_spatial(ones, k, s, pad, 0.0), k, s).sum(axis=(4, 5))
    out = (total / count).astype(np.float32)
    return (_activate(out, a["activation"]),)


def _pool_flops(ins: Sequence[Shape], outs: Sequence[Shape], a: A) -> int:
    return volume(outs[0]) * a["kernel"][0] * a["kernel"][1]


for _name, _fn, _doc in (
    ("poolmax", _poolmax, "2-D max pooling NCHW, optional fused activation"),
    ("poolavg", _poolavg, "2-D average pooling NCHW (padding excluded from the mean)"),
):
    register(
        OpSpec(
            name=_name,
            inputs=("x",),
            attrs=(
                AttrSpec("kernel", "ints", check=_pair_positive, check_msg="must be two ints >= 1"),
                AttrSpec(
                    "stride", "ints", default=(1, 1), check=_pair_positive, check_msg="must be two ints >= 1"
                ),
                AttrSpec("padding", "enum", default="valid", choices=PADDINGS),
                _act_attr(),
            ),
            infer=_pool_infer(_name),
            compute=_fn,
            flops=_pool_flops,
            kind=OpKind.POOL,
            doc=_doc,
        )
    )


# ---------------------------------------------------------------------------------------------
# Weight transforms: enlarge, merge
# ---------------------------------------------------------------------------------------------


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


register(
    OpSpec(
        name="enlarge",
        inputs=("weight", "reference"),
        attrs=(),
        infer=_enlarge_infer,
        compute=_enlarge,
        flops=_zero_flops,
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


register(
    OpSpec(
        name="merge",
        inputs=("weight",),
        attrs=(
            AttrSpec("count", "int", check=_positive, check_msg="must be >= 1"),
            AttrSpec("groups", "int", check=_positive, check_msg="must be >= 1"),
        ),
        infer=_merge_infer,
        compute=_merge,
        flops=_zero_flops,
        kind=OpKind.WEIGHT_TRANSFORM,
        doc="widen a grouped-conv weight so the conv runs with groups/count groups (TASO merge_gconv)",
    )
)


# ---------------------------------------------------------------------------------------------
# Data movement: concat (costs bytes), split / reshape / transpose / dropout / noop (views)
# ---------------------------------------------------------------------------------------------


def _concat_infer(shapes: Sequence[Shape], a: A) -> tuple[Shape, ...]:
    rank = len(shapes[0])
    axis = a["axis"]
    _check_axis("concat", shapes, axis, rank)
    for s in shapes[1:]:
        if len(s) != rank:
            raise ShapeError("concat", "inputs have different ranks", shapes)
        if any(s[d] != shapes[0][d] for d in range(rank) if d != axis):
            raise ShapeError("concat", f"inputs differ outside axis {axis}", shapes, attr="axis")
    out = list(shapes[0])
    out[axis] = sum(s[axis] for s in shapes)
    return (tuple(out),)


register(
    OpSpec(
        name="concat",
        inputs=("xs",),
        attrs=(AttrSpec("axis", "int"),),
        infer=_concat_infer,
        compute=lambda x, a: (np.concatenate(x, axis=a["axis"]).astype(np.float32, copy=False),),
        flops=_zero_flops,
        kind=OpKind.MEMORY,
        variadic=True,
        min_inputs=1,
        canonicalize=_axis_canon("axis"),
        doc="concatenate n tensors along an axis",
    )
)


def _split_infer(shapes: Sequence[Shape], a: A) -> tuple[Shape, ...]:
    x = shapes[0]
    axis, sizes = a["axis"], a["sizes"]
    _check_axis("split", shapes, axis, len(x))
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


register(
    OpSpec(
        name="split",
        inputs=("x",),
        attrs=(
            AttrSpec("axis", "int"),
            AttrSpec(
                "sizes",
                "ints",
                check=lambda v: len(v) >= 1 and all(d >= 1 for d in v),
                check_msg="must be one or more sizes >= 1",
            ),
        ),
        infer=_split_infer,
        compute=_split,
        flops=_zero_flops,
        kind=OpKind.VIEW,
        canonicalize=_axis_canon("axis"),
        doc="split along an axis into pieces of the given sizes (several outputs)",
    )
)


def _reshape_canon(shapes: Sequence[Shape], attrs: dict[str, Any]) -> dict[str, Any]:
    # ONNX conventions: 0 copies the input dim at the same position, one -1 takes the rest.
    # Anything that is not a sequence of ints is left for make_attrs to reject with its message.
    target = attrs.get("shape")
    if not shapes or not isinstance(target, Sequence | np.ndarray) or isinstance(target, str):
        return attrs
    if any(isinstance(d, bool) or not isinstance(d, int | np.integer) for d in target):
        return attrs
    src = shapes[0]
    dims = [int(src[i]) if d == 0 and i < len(src) else int(d) for i, d in enumerate(target)]
    if dims.count(-1) > 1:
        raise ShapeError("reshape", f"target {tuple(target)} has more than one -1", shapes, attr="shape")
    if dims.count(-1) == 1:
        known = math.prod(d for d in dims if d != -1)
        if known <= 0 or volume(src) % known != 0:
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


register(
    OpSpec(
        name="reshape",
        inputs=("x",),
        attrs=(AttrSpec("shape", "ints", check=_shape_ok, check_msg="every dim must be >= 1 once resolved"),),
        infer=_reshape_infer,
        compute=lambda x, a: (x[0].reshape(a["shape"]),),
        flops=_zero_flops,
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


register(
    OpSpec(
        name="transpose",
        inputs=("x",),
        attrs=(AttrSpec("perm", "ints"),),
        infer=_transpose_infer,
        # copy(): ascontiguousarray would turn a 0-d tensor into shape (1,).
        compute=lambda x, a: (np.transpose(x[0], a["perm"]).copy(order="C"),),
        flops=_zero_flops,
        kind=OpKind.VIEW,
        doc="permute dims",
    )
)

register(
    OpSpec(
        name="dropout",
        inputs=("x",),
        attrs=(
            AttrSpec(
                "rate", "float", default=0.0, check=lambda v: 0.0 <= v < 1.0, check_msg="must be in [0, 1)"
            ),
        ),
        infer=_same,
        compute=lambda x, a: (x[0],),
        flops=_zero_flops,
        kind=OpKind.VIEW,
        doc="dropout: the identity at inference",
    )
)

register(
    OpSpec(
        name="noop",
        inputs=("xs",),
        attrs=(),
        infer=lambda s, a: ((),),
        compute=lambda x, a: (np.zeros((), dtype=np.float32),),
        flops=_zero_flops,
        kind=OpKind.VIEW,
        variadic=True,
        min_inputs=1,
        doc="joins several tensors into one dummy root (mirrors TENSAT's models)",
    )
)


# ---------------------------------------------------------------------------------------------
# opaque: an ONNX operator the IR does not model
# ---------------------------------------------------------------------------------------------


def encode_shapes(shapes: Sequence[Shape]) -> tuple[int, ...]:
    """Flatten a list of shapes into one int tuple, each shape prefixed by its rank.

    Attributes are flat typed values, so ``opaque`` stores its shapes this way.

    >>> encode_shapes([(2, 3), (), (4,)])
    (2, 2, 3, 0, 1, 4)
    >>> decode_shapes((2, 2, 3, 0, 1, 4))
    ((2, 3), (), (4,))
    """
    out: list[int] = []
    for s in shapes:
        out.append(len(s))
        out.extend(int(d) for d in s)
    return tuple(out)


def decode_shapes(flat: Sequence[int]) -> tuple[Shape, ...]:
    """Inverse of :func:`encode_shapes`; raises ValueError on a malformed encoding."""
    shapes = []
    i = 0
    while i < len(flat):
        rank = flat[i]
        if rank < 0 or i + 1 + rank > len(flat):
            raise ValueError(f"malformed shape encoding {tuple(flat)}")
        shapes.append(tuple(int(d) for d in flat[i + 1 : i + 1 + rank]))
        i += 1 + rank
    return tuple(shapes)


def _shapes_ok(flat: tuple[int, ...]) -> bool:
    try:
        return all(d >= 0 for s in decode_shapes(flat) for d in s)
    except ValueError:
        return False


def _opaque_infer(shapes: Sequence[Shape], a: A) -> tuple[Shape, ...]:
    expected = decode_shapes(a["input_shapes"])
    got = tuple(tuple(s) for s in shapes)
    if got != expected:
        raise ShapeError(
            "opaque",
            f"{a['op_type']} was imported for input shapes {list(expected)}",
            shapes,
            attr="input_shapes",
        )
    return decode_shapes(a["output_shapes"])


@functools.lru_cache(maxsize=256)
def _opaque_session(payload: str) -> Any:
    # Imported lazily: only graphs that hold opaque nodes need onnxruntime.
    try:
        import onnxruntime as ort
    except ImportError:  # pragma: no cover - onnxruntime is part of the onnx extra
        raise GraphError(
            "opaque nodes run through onnxruntime, which is not installed (pip install 'tensor-eqsat[onnx]')"
        ) from None
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.inter_op_num_threads = 1
    opts.log_severity_level = 3
    return ort.InferenceSession(
        base64.b64decode(payload), sess_options=opts, providers=["CPUExecutionProvider"]
    )


def _opaque_compute(x: Sequence[np.ndarray], a: A) -> tuple[np.ndarray, ...]:
    sess = _opaque_session(a["payload"])
    names = [i.name for i in sess.get_inputs()]
    outs = sess.run(None, dict(zip(names, x, strict=True)))
    return tuple(np.asarray(o) for o in outs)


register(
    OpSpec(
        name="opaque",
        inputs=("xs",),
        attrs=(
            AttrSpec("op_type", "str", check=bool, check_msg="must be non-empty"),
            AttrSpec("domain", "str", default=""),
            AttrSpec("payload", "str", check=bool, check_msg="must be non-empty"),
            AttrSpec("input_shapes", "ints", default=(), check=_shapes_ok, check_msg="malformed shapes"),
            AttrSpec("output_shapes", "ints", check=_shapes_ok, check_msg="malformed shapes"),
        ),
        infer=_opaque_infer,
        compute=_opaque_compute,
        flops=_out_volume_flops(1),
        # Costed as a generic memory-bound op (read inputs, write outputs): the cost models need
        # no special case, and the op's true cost is the same in the original and optimized graph.
        kind=OpKind.ELEMENTWISE,
        variadic=True,
        min_inputs=0,
        doc="an ONNX op the IR does not model, kept verbatim and run by onnxruntime; never rewritten",
    )
)


def get_op(name: str) -> OpSpec:
    """The OpSpec called ``name`` (raises GraphError listing the known ops).

    >>> get_op("matmul").inputs
    ('a', 'b')
    """
    return lookup(name)


def op_names() -> list[str]:
    """Names of every registered op, in registration order."""
    return [s.name for s in all_ops()]
