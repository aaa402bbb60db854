"""How each ONNX operator the IR models maps to IR ops: one handler per op type.

A handler gets the importer, the node, its input values (IR tensors or import-time constants)
and its attributes, and returns the node's output values; it raises :class:`Unsupported` with a
reason when this node (an attribute value, a non-constant operand) cannot be expressed exactly,
and the importer then keeps it as an opaque op. Handlers validate before they build, but a node
built halfway is harmless: the importer prunes dead nodes at the end.

Mapping (exact unless noted; the full table is in docs/interop.md):

* Conv, MaxPool, AveragePool: explicit pads equal to TASO's SAME split become ``padding="same"``,
  zero pads ``"valid"``; any other pads become an explicit ``pad`` op (zeros for conv and
  count-including average pools, -inf for max pools) followed by a VALID op, which is exact. An
  average pool that excludes padding cannot be padded first and stays opaque. Conv bias is a
  separate ``ewadd`` of a (C, 1, 1) weight. A ceil-mode AveragePool with one window over the whole
  map is a ``mean``. Dilations other than 1, other ceil_mode, and non-2-D windows stay opaque.
* Gemm: transposes (of constants precomputed), ``smul`` by alpha, ``beta * C`` added.
* Add, Mul: ``ewadd``/``ewmul``; Mul by a one-element constant that does not change the shape:
  ``smul``. Sub: ``x + (-c)`` with the constant negated, or ``a + smul(b, -1)`` (IEEE negation
  and ``a + (-b) == a - b`` are exact). Div by a constant whose elements are all equal:
  ``sdiv``; any other Div stays opaque (``x * (1/c)`` is not bit-exact).
* Squeeze, Unsqueeze, Flatten, Reshape (a constant target, or a shape value: symbolic, see
  io/onnx_dims.py) become ``reshape``; Gather with a constant scalar or contiguous index range
  becomes ``split`` (+ ``reshape``).
* A Relu/Sigmoid/Tanh that is the only reader of a bias-free Conv, MatMul, Gemm or pool output
  is fused into it. The Erf GELU pattern ``x * 0.5 * (1 + erf(x / sqrt 2))`` (any association,
  or ``erf(x * 1/sqrt 2)``) becomes one ``gelu``.
* Clip with constant bounds, Pow by a constant scalar, HardSigmoid (PyTorch's alpha 1/6, beta
  1/2), HardSwish, ReduceMean with constant axes, constant-mode Pad (value 0 or -inf), Slice with
  constant bounds and positive steps (a chain of one-axis ``slice``), Expand to a constant shape:
  ``clip``, ``pow``, ``hardsigmoid``, ``hardswish``, ``mean``, ``pad``, ``slice``, ``expand``.
  ``Reciprocal(Sqrt(x))`` or ``Div(1, Sqrt(x))`` is one ``rsqrt`` and ``x * Sigmoid(x)`` one
  ``silu`` when the Sqrt/Sigmoid has no other reader.
* Every other operator is kept as an ``opaque`` op (its payload runs in onnxruntime); with
  ``strict=True`` it is an :class:`UnsupportedOpError` naming the op and the node instead.

Float32, float16 and bfloat16 tensors and constants import in their own dtype (constants derived
from a constant keep it); where floats of different dtypes meet (around a Cast to or from an
integer type) the node stays opaque, with its payload's exact types. Alternatives rejected:
mapping every explicit pad to SAME (wrong for PyTorch's stride-2 convs with pad 1); an opaque
``Pad`` for those pads (exact, but the search could not see through it).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from tensor_eqsat.errors import FormatError
from tensor_eqsat.io.onnx_common import FLOAT_ELEM_DTYPES, const_dtype, is_float_array, widen_const
from tensor_eqsat.ir.graph import Tensor
from tensor_eqsat.ir.ops import one_clipped_window, same_padding
from tensor_eqsat.ir.symbolic import broadcast_shapes, is_symbolic
from tensor_eqsat.ir.types import Activation, Shape, volume

if TYPE_CHECKING:
    from tensor_eqsat.io.onnx_import import Importer

ACTIVATIONS = {a.onnx_op: a.value for a in Activation if a.onnx_op is not None}


class Unsupported(Exception):
    """Raised by a handler: this node cannot be expressed with modelled ops (reason given)."""


@dataclass
class Value:
    """What an ONNX tensor name stands for: an IR tensor, or a constant known at import time."""

    elem_type: int
    shape: Shape
    tensor: Tensor | None = None
    const: np.ndarray | None = None
    sym: np.ndarray | None = None  # a shape value: ints and symbolic dims (io/onnx_dims.py)


Ins = list[Value | None]
"""A node's input values, None for omitted optional inputs."""
OnnxAttrs = dict[str, Any]


# ---------------------------------------------------------------------------------------------
# Handlers: (importer, node index, node, input values, attributes) -> output values
# ---------------------------------------------------------------------------------------------

Handler = Callable[["Importer", int, Any, Ins, OnnxAttrs], list[Value]]
HANDLERS: dict[str, Handler] = {}


def handles(*ops: str) -> Callable[[Handler], Handler]:
    def deco(fn: Handler) -> Handler:
        for op in ops:
            HANDLERS[op] = fn
        return fn

    return deco


def _req(ins: Ins, k: int) -> Value:
    v = ins[k] if k < len(ins) else None
    if v is None:
        raise Unsupported(f"input {k} is missing")
    return v


def _float_in(imp: Importer, node: Any, ins: Ins, k: int) -> Tensor:
    return imp.tensor(_req(ins, k), node.input[k])


def _const_ints(v: Value | None, what: str) -> list[int]:
    if v is None or v.const is None:
        raise Unsupported(f"{what} is not a constant")
    return [int(d) for d in np.asarray(v.const).reshape(-1)]


def _shape_ints(v: Value | None, what: str) -> list[Any]:  # a constant's, or a shape value's dims
    return list(v.sym.reshape(-1)) if v is not None and v.sym is not None else _const_ints(v, what)


@handles("Add")
def _add(imp: Importer, i: int, node: Any, ins: Ins, a: OnnxAttrs) -> list[Value]:
    x, y = _float_in(imp, node, ins, 0), _float_in(imp, node, ins, 1)
    return [imp.new(imp.g.ewadd(x, y))]


@handles("Sum")
def _sum(imp: Importer, i: int, node: Any, ins: Ins, a: OnnxAttrs) -> list[Value]:
    ts = [_float_in(imp, node, ins, k) for k in range(len(ins))]
    if len(ts) == 1:
        return [_req(ins, 0)]
    out = ts[0]
    for t in ts[1:]:
        out = imp.g.ewadd(out, t)
    return [imp.new(out)]


@handles("Mul")
def _mul(imp: Importer, i: int, node: Any, ins: Ins, a: OnnxAttrs) -> list[Value]:
    for k in (0, 1):
        data, c = _req(ins, k), _req(ins, 1 - k)
        scalar = c.const is not None and c.const.size == 1 and is_float_array(c.const)
        if scalar and data.const is None and broadcast_shapes(data.shape, c.shape) == data.shape:
            assert c.const is not None
            x = _float_in(imp, node, ins, k)
            return [imp.new(imp.g.smul(x, float(c.const.reshape(-1)[0])))]
    return [imp.new(imp.g.ewmul(_float_in(imp, node, ins, 0), _float_in(imp, node, ins, 1)))]


@handles("Sub")
def _sub(imp: Importer, i: int, node: Any, ins: Ins, a: OnnxAttrs) -> list[Value]:
    v0, v1 = _req(ins, 0), _req(ins, 1)
    if v1.const is not None and is_float_array(v1.const):
        neg = imp.weight(f"{node.input[1]}_neg", -v1.const)
        return [imp.new(imp.g.ewadd(_float_in(imp, node, ins, 0), neg))]
    minus_b = imp.g.smul(_float_in(imp, node, ins, 1), -1.0)
    if v0.const is not None:  # c - x == (-x) + c: keep the constant as the second operand
        return [imp.new(imp.g.ewadd(minus_b, _float_in(imp, node, ins, 0)))]
    return [imp.new(imp.g.ewadd(_float_in(imp, node, ins, 0), minus_b))]


@handles("Neg")
def _neg(imp: Importer, i: int, node: Any, ins: Ins, a: OnnxAttrs) -> list[Value]:
    return [imp.new(imp.g.smul(_float_in(imp, node, ins, 0), -1.0))]


@handles("Div")
def _div(imp: Importer, i: int, node: Any, ins: Ins, a: OnnxAttrs) -> list[Value]:
    v0, v1 = _req(ins, 0), _req(ins, 1)
    c = v1.const
    if c is None or not is_float_array(c):
        raise Unsupported("Div by a non-constant tensor is not modelled (only sdiv by a constant)")
    flat = c.reshape(-1)
    if flat.size == 0 or not np.all(flat == flat[0]) or flat[0] == 0:
        raise Unsupported("Div by a constant whose elements differ (or are zero) is not modelled")
    if broadcast_shapes(v0.shape, v1.shape) != v0.shape:
        raise Unsupported("Div whose divisor widens the shape is not modelled")
    return [imp.new(imp.g.sdiv(_float_in(imp, node, ins, 0), float(flat[0])))]


@handles("Gelu")
def _gelu(imp: Importer, i: int, node: Any, ins: Ins, a: OnnxAttrs) -> list[Value]:
    approx = a.get("approximate", "none")
    if approx not in ("none", "tanh"):
        raise Unsupported(f"Gelu approximate={approx!r}")
    return [imp.new(imp.g.gelu(_float_in(imp, node, ins, 0), approximate=approx))]


def _window_padding(
    size: tuple[int, int], kernel: tuple[int, int], stride: tuple[int, int], pads: Sequence[int]
) -> str | None:
    """'same' or 'valid' when the ONNX pads (top, left, bottom, right) equal one of them."""
    top, left, bottom, right = pads
    if same_padding(size[0], kernel[0], stride[0]) == (top, bottom) and same_padding(
        size[1], kernel[1], stride[1]
    ) == (left, right):
        return "same"
    if not any(pads):
        return "valid"
    return None


Pair = tuple[int, int]


def _onnx_pads(a: OnnxAttrs, size: Pair, kernel: Pair, stride: Pair) -> list[int]:
    """Explicit (top, left, bottom, right) pads of a 2-D window op, resolving auto_pad."""
    auto = a.get("auto_pad", "NOTSET")
    if auto in ("SAME_UPPER", "SAME_LOWER"):
        split: list[Pair] = []
        for d in range(2):
            total = max((-(-size[d] // stride[d]) - 1) * stride[d] + kernel[d] - size[d], 0)
            small, big = total // 2, total - total // 2
            split.append((big, small) if auto == "SAME_LOWER" else (small, big))
        return [split[0][0], split[1][0], split[0][1], split[1][1]]
    if auto == "VALID":
        return [0, 0, 0, 0]
    pads = [int(p) for p in a.get("pads", [0, 0, 0, 0])]
    if len(pads) != 4:
        raise Unsupported(f"pads {pads} are not 2-D")
    return pads


def _check_2d(a: OnnxAttrs, x: Value, kernel: tuple[int, ...]) -> tuple[Pair, Pair]:
    if len(x.shape) != 4 or len(kernel) != 2:
        raise Unsupported(f"only 2-D windows (NCHW) are modelled, got input rank {len(x.shape)}")
    dil = tuple(a.get("dilations", [1, 1]))
    if any(d != 1 for d in dil):
        raise Unsupported(f"dilations {dil} are not modelled (only 1)")
    stride = tuple(int(s) for s in a.get("strides", [1, 1]))
    return (int(kernel[0]), int(kernel[1])), (stride[0], stride[1])


@handles("Conv")
def _conv(imp: Importer, i: int, node: Any, ins: Ins, a: OnnxAttrs) -> list[Value]:
    xv, wv = _req(ins, 0), _req(ins, 1)
    if len(wv.shape) != 4:
        raise Unsupported(f"only 2-D convolutions are modelled, weight has rank {len(wv.shape)}")
    kernel, stride = _check_2d(a, xv, wv.shape[2:])
    groups = int(a.get("group", 1))
    if xv.shape[1] != groups * wv.shape[1]:
        raise FormatError(
            f"{imp.where(i, node)}: group {groups} with weight {wv.shape} "
            f"does not fit {xv.shape[1]} input channels"
        )
    size = (xv.shape[2], xv.shape[3])
    pads = _onnx_pads(a, size, kernel, stride)
    padding = _window_padding(size, kernel, stride, pads)
    x = _float_in(imp, node, ins, 0)
    w = _float_in(imp, node, ins, 1)
    if padding is None:
        x = imp.explicit_pad(i, node, x, pads, 0.0)
        padding = "valid"
    bias = ins[2] if len(ins) > 2 else None
    act = "none" if bias is not None else imp.fusible_activation(node.output[0])
    y = imp.g.conv2d(x, w, stride=stride, padding=padding, activation=act)
    if bias is not None:
        c = wv.shape[0]
        if bias.const is not None and is_float_array(bias.const):
            b = imp.weight(node.input[2], bias.const.reshape(c, 1, 1))
        else:
            b = imp.g.reshape(_float_in(imp, node, ins, 2), (c, 1, 1))
        y = imp.g.ewadd(y, b)
    out = imp.new(y)
    imp.finish_fusion(out)
    return [out]


def _pool_common(
    imp: Importer, i: int, node: Any, ins: Ins, a: OnnxAttrs
) -> tuple[Tensor, Pair, Pair, list[int], str | None]:
    xv = _req(ins, 0)
    kernel, stride = _check_2d(a, xv, tuple(a["kernel_shape"]))
    size = (xv.shape[2], xv.shape[3])
    pads = _onnx_pads(a, size, kernel, stride)
    padding = _window_padding(size, kernel, stride, pads)
    if int(a.get("ceil_mode", 0)):
        for d in range(2):
            total = size[d] + pads[d] + pads[d + 2] - kernel[d]
            if total % stride[d] != 0:
                raise Unsupported("ceil_mode=1 changes the output size here; not modelled")
    return _float_in(imp, node, ins, 0), kernel, stride, pads, padding


@handles("MaxPool")
def _maxpool(imp: Importer, i: int, node: Any, ins: Ins, a: OnnxAttrs) -> list[Value]:
    if len(node.output) > 1 and node.output[1]:
        raise Unsupported("MaxPool's Indices output is not modelled")
    if int(a.get("storage_order", 0)) != 0:
        raise Unsupported("MaxPool storage_order=1 is not modelled")
    x, kernel, stride, pads, padding = _pool_common(imp, i, node, ins, a)
    if padding is None:
        x = imp.explicit_pad(i, node, x, pads, float("-inf"))
        padding = "valid"
    act = imp.fusible_activation(node.output[0])
    out = imp.new(imp.g.poolmax(x, kernel, stride, padding=padding, activation=act))
    imp.finish_fusion(out)
    return [out]


@handles("AveragePool")
def _avgpool(imp: Importer, i: int, node: Any, ins: Ins, a: OnnxAttrs) -> list[Value]:
    xv = _req(ins, 0)
    kernel, stride = _check_2d(a, xv, tuple(a["kernel_shape"]))
    size = (xv.shape[2], xv.shape[3])
    if int(a.get("ceil_mode", 0)) and one_clipped_window(size, kernel, _onnx_pads(a, size, kernel, stride)):
        return [imp.new(imp.g.add("mean", [_float_in(imp, node, ins, 0)], axes=(2, 3), keepdims=True)[0])]
    x, kernel, stride, pads, padding = _pool_common(imp, i, node, ins, a)
    include = bool(int(a.get("count_include_pad", 0)))
    if include and any(pads):
        # Padding counted in the mean: pad with zeros, then every window is full.
        x = imp.explicit_pad(i, node, x, pads, 0.0)
        padding = "valid"
    elif padding is None:
        raise Unsupported(f"AveragePool excluding padding with pads {tuple(pads)} (neither SAME nor VALID)")
    act = imp.fusible_activation(node.output[0])
    out = imp.new(imp.g.poolavg(x, kernel, stride, padding=padding, activation=act))
    imp.finish_fusion(out)
    return [out]


@handles("GlobalAveragePool", "GlobalMaxPool")
def _global_pool(imp: Importer, i: int, node: Any, ins: Ins, a: OnnxAttrs) -> list[Value]:
    xv = _req(ins, 0)
    if len(xv.shape) != 4:
        raise Unsupported(f"only 4-D inputs are modelled, got rank {len(xv.shape)}")
    x = _float_in(imp, node, ins, 0)
    op = "poolavg" if node.op_type == "GlobalAveragePool" else "poolmax"
    kernel = (xv.shape[2], xv.shape[3])
    act = imp.fusible_activation(node.output[0])
    out = imp.new(imp.g.add(op, [x], kernel=kernel, stride=(1, 1), padding="valid", activation=act)[0])
    imp.finish_fusion(out)
    return [out]


def _transposed(imp: Importer, v: Value, name: str) -> Tensor:
    if v.const is not None and is_float_array(v.const):
        return imp.weight(f"{name}_T", v.const.T)
    return imp.g.transpose(imp.tensor(v, name), (1, 0))


@handles("Gemm")
def _gemm(imp: Importer, i: int, node: Any, ins: Ins, a: OnnxAttrs) -> list[Value]:
    av, bv = _req(ins, 0), _req(ins, 1)
    if len(av.shape) != 2 or len(bv.shape) != 2:
        raise Unsupported("Gemm operands must be 2-D")
    alpha, beta = float(a.get("alpha", 1.0)), float(a.get("beta", 1.0))
    x = _transposed(imp, av, node.input[0]) if a.get("transA", 0) else _float_in(imp, node, ins, 0)
    w = _transposed(imp, bv, node.input[1]) if a.get("transB", 0) else _float_in(imp, node, ins, 1)
    cv = ins[2] if len(ins) > 2 else None
    has_c = cv is not None and beta != 0.0
    act = "none" if has_c or alpha != 1.0 else imp.fusible_activation(node.output[0])
    y = imp.g.matmul(x, w, activation=act)
    if alpha != 1.0:
        y = imp.g.smul(y, alpha)
    if has_c:
        assert cv is not None
        if cv.const is not None and is_float_array(cv.const):
            c = (
                imp.tensor(cv, node.input[2])
                if beta == 1.0
                else imp.weight(
                    f"{node.input[2]}_beta", widen_const(cv.const) * np.float32(beta), const_dtype(cv.const)
                )
            )
        else:
            c = _float_in(imp, node, ins, 2)
            if beta != 1.0:
                c = imp.g.smul(c, beta)
        y = imp.g.ewadd(y, c)
    out = imp.new(y)
    imp.finish_fusion(out)
    return [out]


@handles("MatMul")
def _matmul(imp: Importer, i: int, node: Any, ins: Ins, a: OnnxAttrs) -> list[Value]:
    av, bv = _req(ins, 0), _req(ins, 1)
    x, w = _float_in(imp, node, ins, 0), _float_in(imp, node, ins, 1)
    if len(av.shape) >= 2 and len(bv.shape) >= 2:
        act = imp.fusible_activation(node.output[0])
        out = imp.new(imp.g.matmul(x, w, activation=act))
        imp.finish_fusion(out)
        return [out]
    # NumPy's rule for 1-D operands: promote to a matrix, multiply, drop the added dim.
    if len(av.shape) == 1:
        x = imp.g.reshape(x, (1, av.shape[0]))
    if len(bv.shape) == 1:
        w = imp.g.reshape(w, (bv.shape[0], 1))
    y = imp.g.matmul(x, w)
    shape = list(y.shape)
    if len(bv.shape) == 1:
        shape.pop(-1)
    if len(av.shape) == 1:
        shape.pop(-2 if len(bv.shape) != 1 else -1)
    return [imp.new(imp.g.reshape(y, tuple(shape)))]


@handles("Concat")
def _concat(imp: Importer, i: int, node: Any, ins: Ins, a: OnnxAttrs) -> list[Value]:
    ts = [_float_in(imp, node, ins, k) for k in range(len(ins))]
    return [imp.new(imp.g.concat(ts, axis=int(a["axis"])))]


@handles("Split")
def _split(imp: Importer, i: int, node: Any, ins: Ins, a: OnnxAttrs) -> list[Value]:
    xv = _req(ins, 0)
    rank = len(xv.shape)
    axis = int(a.get("axis", 0))
    axis = axis + rank if axis < 0 else axis
    dim = xv.shape[axis]
    n = len(node.output)
    if len(ins) > 1 and ins[1] is not None:
        sizes = _const_ints(ins[1], "split sizes")
    elif "split" in a:
        sizes = [int(s) for s in a["split"]]
    elif "num_outputs" in a:
        chunk = -(-dim // int(a["num_outputs"]))
        sizes = [min(chunk, dim - k * chunk) for k in range(int(a["num_outputs"]))]
    else:
        if dim % n:
            raise FormatError(f"{imp.where(i, node)}: dim {dim} does not split into {n} equal parts")
        sizes = [dim // n] * n
    if any(s <= 0 for s in sizes):
        raise Unsupported(f"split sizes {sizes} include an empty piece")
    parts = imp.g.split(_float_in(imp, node, ins, 0), axis, sizes)
    return [imp.new(t) for t in parts]


def _reshape_to(imp: Importer, node: Any, ins: Ins, shape: Sequence[Any]) -> list[Value]:
    x, dims = _float_in(imp, node, ins, 0), tuple(d if is_symbolic(d) else int(d) for d in shape)
    return [imp.new(imp.g.add("reshape", [x], shape=dims)[0])]


@handles("Reshape")
def _reshape(imp: Importer, i: int, node: Any, ins: Ins, a: OnnxAttrs) -> list[Value]:
    xv = _req(ins, 0)
    target = _shape_ints(ins[1] if len(ins) > 1 else None, "Reshape's shape")
    if int(a.get("allowzero", 0)) and 0 in target:
        raise Unsupported("Reshape to an empty tensor (allowzero with a 0 dim)")
    # Resolve 0 (copy the input dim) here: the builder does too, but only ONNX defines it for
    # positions beyond the input rank as an error, which the builder would silently keep.
    if any(d == 0 and k >= len(xv.shape) for k, d in enumerate(target)):
        raise Unsupported(f"Reshape target {target} copies a dim the input does not have")
    dims = [xv.shape[k] if d == 0 else d for k, d in enumerate(target)]
    return _reshape_to(imp, node, ins, dims)


@handles("Flatten")
def _flatten(imp: Importer, i: int, node: Any, ins: Ins, a: OnnxAttrs) -> list[Value]:
    shape = _req(ins, 0).shape
    axis = int(a.get("axis", 1))
    axis = axis + len(shape) if axis < 0 else axis
    return _reshape_to(imp, node, ins, (volume(shape[:axis]), volume(shape[axis:])))


def _raw_axes(ins: Ins, a: OnnxAttrs) -> list[int] | None:
    """Axes from the second input (opset 13+) or the ``axes`` attribute (older); None if absent."""
    if len(ins) > 1 and ins[1] is not None:
        return _const_ints(ins[1], "axes")
    return [int(v) for v in a["axes"]] if "axes" in a else None


@handles("Squeeze")
def _squeeze(imp: Importer, i: int, node: Any, ins: Ins, a: OnnxAttrs) -> list[Value]:
    shape = _req(ins, 0).shape
    raw = _raw_axes(ins, a)
    if raw is None:
        axes = {k for k, d in enumerate(shape) if d == 1}
    else:
        axes = {ax + len(shape) if ax < 0 else ax for ax in raw}
    return _reshape_to(imp, node, ins, [d for k, d in enumerate(shape) if k not in axes])


@handles("Unsqueeze")
def _unsqueeze(imp: Importer, i: int, node: Any, ins: Ins, a: OnnxAttrs) -> list[Value]:
    shape = list(_req(ins, 0).shape)
    raw = _raw_axes(ins, a)
    if raw is None:
        raise FormatError(f"{imp.where(i, node)}: Unsqueeze without axes")
    rank = len(shape) + len(raw)
    for ax in sorted(ax + rank if ax < 0 else ax for ax in raw):
        shape.insert(ax, 1)
    return _reshape_to(imp, node, ins, shape)


@handles("Transpose")
def _transpose(imp: Importer, i: int, node: Any, ins: Ins, a: OnnxAttrs) -> list[Value]:
    rank = len(_req(ins, 0).shape)
    perm = [int(p) for p in a.get("perm", list(range(rank))[::-1])]
    return [imp.new(imp.g.transpose(_float_in(imp, node, ins, 0), perm))]


@handles("Gather")
def _gather(imp: Importer, i: int, node: Any, ins: Ins, a: OnnxAttrs) -> list[Value]:
    xv, iv = _req(ins, 0), _req(ins, 1)
    if iv.const is None:
        raise Unsupported("Gather with non-constant indices")
    axis = int(a.get("axis", 0))
    axis = axis + len(xv.shape) if axis < 0 else axis
    dim = xv.shape[axis]
    idx = np.asarray(iv.const).astype(np.int64)
    flat = [int(k) + dim if k < 0 else int(k) for k in idx.reshape(-1)]
    if idx.ndim > 1 or not flat or flat != list(range(flat[0], flat[0] + len(flat))):
        raise Unsupported("Gather with indices other than a scalar or a contiguous range")
    start, count = flat[0], len(flat)
    sizes = [s for s in (start, count, dim - start - count) if s > 0]
    x = _float_in(imp, node, ins, 0)
    piece = x if sizes == [count] else imp.g.split(x, axis, sizes)[1 if start > 0 else 0]
    if idx.ndim == 0:
        shape = [d for k, d in enumerate(piece.shape) if k != axis]
        piece = imp.g.reshape(piece, tuple(shape))
    return [imp.new(piece)]


@handles("BatchNormalization")
def _batchnorm(imp: Importer, i: int, node: Any, ins: Ins, a: OnnxAttrs) -> list[Value]:
    if int(a.get("training_mode", 0)):
        raise Unsupported("BatchNormalization in training mode")
    if any(node.output[1:]):
        raise Unsupported("BatchNormalization's running-statistics outputs are not modelled")
    x, scale, bias, mean, var = (_float_in(imp, node, ins, k) for k in range(5))
    return [imp.new(imp.g.batchnorm(x, scale, bias, mean, var, eps=float(a.get("epsilon", 1e-5))))]


@handles("Softmax")
def _softmax(imp: Importer, i: int, node: Any, ins: Ins, a: OnnxAttrs) -> list[Value]:
    return [imp.new(imp.g.softmax(_float_in(imp, node, ins, 0), axis=int(a.get("axis", -1))))]


@handles("LayerNormalization")
def _layernorm(imp: Importer, i: int, node: Any, ins: Ins, a: OnnxAttrs) -> list[Value]:
    if any(node.output[1:]):
        raise Unsupported("LayerNormalization's Mean/InvStdDev outputs are not modelled")
    xv = _req(ins, 0)
    rank = len(xv.shape)
    axis = int(a.get("axis", -1))
    axis = axis + rank if axis < 0 else axis
    norm = tuple(xv.shape[axis:])
    x = _float_in(imp, node, ins, 0)

    def param(k: int, fill: float) -> Tensor:
        v = ins[k] if k < len(ins) else None
        if v is None:
            base = f"{node.output[0]}_{'bias' if k == 2 else 'scale'}"
            return imp.weight(base, np.full(norm, fill), x.dtype)
        if tuple(v.shape) == norm:
            return imp.tensor(v, node.input[k])
        if v.const is not None and is_float_array(v.const):
            data = np.broadcast_to(widen_const(v.const), norm)
            return imp.weight(node.input[k], data, const_dtype(v.const))
        raise Unsupported(f"LayerNormalization parameter of shape {v.shape} broadcast to {norm}")

    out = imp.g.layernorm(x, param(1, 1.0), param(2, 0.0), axis=axis, eps=float(a.get("epsilon", 1e-5)))
    return [imp.new(out)]


@handles("Dropout")
def _dropout(imp: Importer, i: int, node: Any, ins: Ins, a: OnnxAttrs) -> list[Value]:
    if len(node.output) > 1 and node.output[1]:
        mask = node.output[1]
        if imp.consumers.get(mask) or mask in imp.graph_outputs:
            raise Unsupported("Dropout's mask output is not modelled")
    rate = float(a.get("ratio", 0.5))
    if len(ins) > 1 and ins[1] is not None:
        if ins[1].const is None:
            raise Unsupported("Dropout with a non-constant ratio")
        rate = float(np.asarray(ins[1].const).reshape(-1)[0])
    training = ins[2] if len(ins) > 2 else None
    if training is not None and (training.const is None or bool(training.const.reshape(-1)[0])):
        raise Unsupported("Dropout in training mode")
    if not 0.0 <= rate < 1.0:
        raise Unsupported(f"Dropout ratio {rate}")
    return [imp.new(imp.g.dropout(_float_in(imp, node, ins, 0), rate=rate))]


@handles("Identity")
def _identity(imp: Importer, i: int, node: Any, ins: Ins, a: OnnxAttrs) -> list[Value]:
    return [_req(ins, 0)]


@handles("Cast", "CastLike")
def _cast(imp: Importer, i: int, node: Any, ins: Ins, a: OnnxAttrs) -> list[Value]:
    v = _req(ins, 0)
    to = int(a["to"]) if node.op_type == "Cast" else _req(ins, 1).elem_type
    if to not in FLOAT_ELEM_DTYPES or v.elem_type not in FLOAT_ELEM_DTYPES:
        raise Unsupported("Cast to or from a non-floating element type is not modelled")
    if to == v.elem_type:
        return [v]
    return [imp.new(imp.g.cast(_float_in(imp, node, ins, 0), FLOAT_ELEM_DTYPES[to]))]


# ---------------------------------------------------------------------------------------------
# The ops of today's inference graphs (ir/ops_activation.py, ir/ops_extent.py)
# ---------------------------------------------------------------------------------------------


def _const_scalar(v: Value | None, what: str) -> float:
    """The value of a one-element numeric constant (float or integer)."""
    if v is None or v.const is None:
        raise Unsupported(f"{what} is not a constant")
    if v.const.size != 1 or v.const.dtype.kind not in "fiu":
        raise Unsupported(f"{what} is not a one-element number")
    return float(np.asarray(v.const).reshape(-1)[0])


def _same_shape_as(x: Value, *others: Value | None) -> None:
    """Refuse constant operands that would widen ``x``'s shape by broadcasting."""
    for o in others:
        if o is not None and broadcast_shapes(x.shape, o.shape) != x.shape:
            raise Unsupported(f"an operand of shape {o.shape} broadcasts {x.shape} to a larger shape")


@handles("Clip")
def _clip(imp: Importer, i: int, node: Any, ins: Ins, a: OnnxAttrs) -> list[Value]:
    xv = _req(ins, 0)
    lo_v = ins[1] if len(ins) > 1 else None
    hi_v = ins[2] if len(ins) > 2 else None
    if lo_v is None or hi_v is None:
        raise Unsupported("Clip without both min and max is not modelled")
    lo, hi = _const_scalar(lo_v, "Clip's min"), _const_scalar(hi_v, "Clip's max")
    if lo > hi:
        raise Unsupported(f"Clip with min {lo:g} > max {hi:g} is not modelled")
    _same_shape_as(xv, lo_v, hi_v)
    return [imp.new(imp.g.add("clip", [_float_in(imp, node, ins, 0)], min=lo, max=hi)[0])]


@handles("Pow")
def _pow(imp: Importer, i: int, node: Any, ins: Ins, a: OnnxAttrs) -> list[Value]:
    xv, ev = _req(ins, 0), _req(ins, 1)
    if xv.const is not None:
        raise Unsupported("Pow of a constant base is not modelled")
    exponent = _const_scalar(ev, "Pow's exponent")
    _same_shape_as(xv, ev)
    return [imp.new(imp.g.add("pow", [_float_in(imp, node, ins, 0)], exponent=exponent)[0])]


@handles("HardSigmoid")
def _hardsigmoid(imp: Importer, i: int, node: Any, ins: Ins, a: OnnxAttrs) -> list[Value]:
    alpha, beta = np.float32(a.get("alpha", 0.2)), np.float32(a.get("beta", 0.5))
    if alpha != np.float32(1.0 / 6.0) or beta != np.float32(0.5):
        raise Unsupported(f"HardSigmoid alpha={alpha:g}, beta={beta:g} (only PyTorch's 1/6, 0.5)")
    return [imp.new(imp.g.add("hardsigmoid", [_float_in(imp, node, ins, 0)])[0])]


@handles("HardSwish")
def _hardswish(imp: Importer, i: int, node: Any, ins: Ins, a: OnnxAttrs) -> list[Value]:
    return [imp.new(imp.g.add("hardswish", [_float_in(imp, node, ins, 0)])[0])]


@handles("Sqrt")
def _sqrt(imp: Importer, i: int, node: Any, ins: Ins, a: OnnxAttrs) -> list[Value]:
    """``Reciprocal(Sqrt(x))`` or ``Div(1, Sqrt(x))`` (Sqrt read by nothing else): one ``rsqrt``."""
    j = imp.single_reader(node.output[0])
    reader = imp.nodes[j] if j is not None else None
    if j is None or reader is None or reader.domain not in ("", "ai.onnx"):
        raise Unsupported("Sqrt is modelled only as 1 / Sqrt(x) (rsqrt)")
    if reader.op_type == "Div":
        one = imp.values.get(reader.input[0])
        if reader.input[1] != node.output[0] or one is None or one.const is None:
            raise Unsupported("Sqrt is modelled only as 1 / Sqrt(x) (rsqrt)")
        c = np.asarray(one.const)
        if c.dtype.kind != "f" or c.size == 0 or not np.all(c == 1):
            raise Unsupported("Sqrt is modelled only as 1 / Sqrt(x) (rsqrt)")
        _same_shape_as(_req(ins, 0), one)
    elif reader.op_type != "Reciprocal":
        raise Unsupported("Sqrt is modelled only as 1 / Sqrt(x) (rsqrt)")
    out = imp.new(imp.g.add("rsqrt", [_float_in(imp, node, ins, 0)])[0])
    imp.absorb(j, out)
    # The Sqrt's own output is read by nobody else; the reader's output is the rsqrt.
    return [out]


def _silu_reader(imp: Importer, node: Any) -> int | None:
    """The Mul reading ``x`` and ``Sigmoid(x)`` when it is the Sigmoid's only reader, else None."""
    j = imp.single_reader(node.output[0])
    if j is None:
        return None
    mul = imp.nodes[j]
    if mul.op_type != "Mul" or mul.domain not in ("", "ai.onnx"):
        return None
    if sorted(mul.input) != sorted([node.input[0], node.output[0]]):
        return None
    return j


@handles("Relu", "Sigmoid", "Tanh")
def _act(imp: Importer, i: int, node: Any, ins: Ins, a: OnnxAttrs) -> list[Value]:
    x = _float_in(imp, node, ins, 0)
    j = _silu_reader(imp, node) if node.op_type == "Sigmoid" else None
    if j is not None:  # x * Sigmoid(x): one silu
        out = imp.new(imp.g.add("silu", [x])[0])
        imp.absorb(j, out)
        return [out]
    return [imp.new(imp.g.add(ACTIVATIONS[node.op_type], [x])[0])]


@handles("ReduceMean")
def _reduce_mean(imp: Importer, i: int, node: Any, ins: Ins, a: OnnxAttrs) -> list[Value]:
    xv = _req(ins, 0)
    rank = len(xv.shape)
    raw = _raw_axes(ins, a)
    if not raw:
        if int(a.get("noop_with_empty_axes", 0)):
            return [xv]
        raw = list(range(rank))
    axes = sorted({ax + rank if ax < 0 else ax for ax in raw})
    if rank == 0 or any(not 0 <= ax < rank for ax in axes):
        raise FormatError(f"{imp.where(i, node)}: ReduceMean axes {raw} out of range for rank {rank}")
    if any(xv.shape[ax] == 0 for ax in axes):
        raise Unsupported("ReduceMean over an empty axis")
    keep = bool(int(a.get("keepdims", 1)))
    x = _float_in(imp, node, ins, 0)
    return [imp.new(imp.g.add("mean", [x], axes=tuple(axes), keepdims=keep)[0])]


@handles("Pad")
def _pad_node(imp: Importer, i: int, node: Any, ins: Ins, a: OnnxAttrs) -> list[Value]:
    xv = _req(ins, 0)
    rank = len(xv.shape)
    mode = a.get("mode", "constant")
    if mode != "constant":
        raise Unsupported(f"Pad mode {mode!r} is not modelled (only constant)")
    pads = _const_ints(ins[1] if len(ins) > 1 else None, "Pad's pads")
    value_v = ins[2] if len(ins) > 2 else None
    value = 0.0 if value_v is None else _const_scalar(value_v, "Pad's constant_value")
    if value == 0.0:
        fill = "zero"
    elif value == float("-inf"):
        fill = "neg_inf"
    else:
        raise Unsupported(f"Pad with constant {value:g} is not modelled (only 0 and -inf)")
    axes_v = ins[3] if len(ins) > 3 else None
    axes = list(range(rank)) if axes_v is None else _const_ints(axes_v, "Pad's axes")
    axes = [ax + rank if ax < 0 else ax for ax in axes]
    if len(pads) != 2 * len(axes) or any(not 0 <= ax < rank for ax in axes) or len(set(axes)) != len(axes):
        raise FormatError(f"{imp.where(i, node)}: Pad pads {pads} do not fit axes {axes} of rank {rank}")
    if any(p < 0 for p in pads):
        raise Unsupported(f"Pad with negative pads {pads} (a crop) is not modelled")
    full = [0] * (2 * rank)
    for k, ax in enumerate(axes):
        full[ax], full[rank + ax] = pads[k], pads[len(axes) + k]
    x = _float_in(imp, node, ins, 0)
    return [imp.new(imp.g.add("pad", [x], pads=tuple(full), fill=fill)[0])]


@handles("Slice")
def _slice_node(imp: Importer, i: int, node: Any, ins: Ins, a: OnnxAttrs) -> list[Value]:
    xv = _req(ins, 0)
    rank = len(xv.shape)
    starts = _const_ints(ins[1] if len(ins) > 1 else None, "Slice's starts")
    ends = _const_ints(ins[2] if len(ins) > 2 else None, "Slice's ends")
    axes_v = ins[3] if len(ins) > 3 else None
    steps_v = ins[4] if len(ins) > 4 else None
    axes = list(range(len(starts))) if axes_v is None else _const_ints(axes_v, "Slice's axes")
    steps = [1] * len(starts) if steps_v is None else _const_ints(steps_v, "Slice's steps")
    if not len(starts) == len(ends) == len(axes) == len(steps):
        raise FormatError(f"{imp.where(i, node)}: Slice starts/ends/axes/steps differ in length")
    axes = [ax + rank if ax < 0 else ax for ax in axes]
    if any(not 0 <= ax < rank for ax in axes) or len(set(axes)) != len(axes):
        raise FormatError(f"{imp.where(i, node)}: Slice axes {axes} do not fit rank {rank}")
    cuts = []
    for ax, s, e, step in zip(axes, starts, ends, steps, strict=True):
        if step < 1:
            raise Unsupported(f"Slice step {step} is not modelled (only >= 1)")
        dim = xv.shape[ax]
        # ONNX's clamping for a positive step: negatives count from the end, then clamp to [0, dim].
        s = min(max(s + dim if s < 0 else s, 0), dim)
        e = min(max(e + dim if e < 0 else e, 0), dim)
        if s >= e:
            raise Unsupported(f"Slice of axis {ax} is empty ({s}:{e})")
        if (s, e, step) != (0, dim, 1):
            cuts.append((ax, s, e, step))
    if not cuts:
        return [xv]
    y = _float_in(imp, node, ins, 0)
    for ax, s, e, step in sorted(cuts):
        y = imp.g.add("slice", [y], axis=ax, start=s, end=e, step=step)[0]
    return [imp.new(y)]


@handles("Expand")
def _expand(imp: Importer, i: int, node: Any, ins: Ins, a: OnnxAttrs) -> list[Value]:
    xv = _req(ins, 0)
    target = _shape_ints(ins[1] if len(ins) > 1 else None, "Expand's shape")
    try:
        out = broadcast_shapes(xv.shape, tuple(target))
    except ValueError as exc:
        raise FormatError(f"{imp.where(i, node)}: Expand of {xv.shape} to {target}: {exc}") from exc
    if out == xv.shape:
        return [xv]
    if 0 in out:
        raise Unsupported("Expand to an empty tensor")
    x = _float_in(imp, node, ins, 0)
    if len(out) > len(xv.shape):  # ONNX broadcasting prepends size-1 dims: a reshape, exact
        x = imp.g.reshape(x, (1,) * (len(out) - len(xv.shape)) + tuple(xv.shape))
    return [imp.new(imp.g.add("expand", [x], shape=out)[0])]
