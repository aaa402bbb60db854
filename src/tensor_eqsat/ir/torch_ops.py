"""The PyTorch semantics of every op: one table, read by the executor and the timing kernels.

:data:`TORCH_OPS` maps an op name to a builder. A builder receives a :class:`TorchContext`
(torch, the device, and how to bring a numpy array onto it), the op's OpSpec and attributes and
its static input shapes, and returns a *step*: a function from the input tensors to the tuple of
output tensors. :class:`tensor_eqsat.io.torch_exec.TorchProgram` runs one step per node;
:mod:`tensor_eqsat.cost.torch_kernels` times one step on seeded random inputs, replacing only the
builders whose exact semantics it deliberately does not time (each replacement says why there).

Semantics follow the IR:

* conv2d / pools with TASO's SAME padding: symmetric pads go to the op's ``padding`` argument;
  asymmetric ones (stride 2 on an even size) use an explicit ``F.pad`` first (zeros for conv,
  -inf for max pooling); an average pool with asymmetric pads divides a zero-padded window sum
  by the precomputed count of real elements (padding excluded, like the IR and ONNX). The pads
  come from a :data:`PadsFn`, so a caller can substitute its own (the timing kernels do).
* matmul broadcasts batch dims (``torch.matmul`` does, like numpy); a fused activation runs in
  place on the op's freshly allocated output, as an eager model with ``inplace=True`` does.
* ``merge`` and ``opaque`` run the op's numpy semantics on the host (inputs copied to the CPU,
  outputs back to the device); views (reshape, transpose, split, dropout) are torch views.

This module does not import torch: the caller passes it in, so the IR stays importable without
the ``torch`` extra. The code runs on any torch device; nothing in it assumes the CPU.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from tensor_eqsat.errors import GraphError
from tensor_eqsat.ir.ops import same_padding
from tensor_eqsat.ir.opspec import Attrs, OpSpec
from tensor_eqsat.ir.types import Activation, Shape

Step = Callable[[Sequence[Any]], tuple[Any, ...]]
"""One compiled op: input tensors in, output tensors (a tuple, one per op output) out."""

Pads = tuple[int, int, int, int]
"""(top, bottom, left, right) padding of a 2-D window op."""

PadsFn = Callable[[Shape, tuple[int, int], Mapping[str, Any]], Pads]
"""The pads of a window op from its input shape (NCHW), its window (kh, kw) and its attributes."""


@dataclass(frozen=True)
class TorchContext:
    """What a builder needs besides the op: the torch module and the device steps run on."""

    torch: Any
    device: Any = "cpu"

    @property
    def F(self) -> Any:
        return self.torch.nn.functional

    def tensor(self, arr: Any, dtype: str | None = None) -> Any:
        """``arr`` as a tensor on the device (a copy: numpy arrays may be read-only), of the IR
        dtype ``dtype`` when given (bfloat16 arrives as float32 storage: ir/dtypes.py)."""
        t = self.torch.from_numpy(np.array(arr, copy=True, order="C"))
        if dtype is not None and t.is_floating_point():
            t = t.to(getattr(self.torch, dtype))
        return t.to(self.device)

    def activation(self, name: str) -> Callable[[Any], Any] | None:
        """The in-place PyTorch function of a fused activation; None for ``none``."""
        fn: Callable[[Any], Any] | None = Activation(name).torch_fn(self.torch, inplace=True)
        return fn


Builder = Callable[[TorchContext, OpSpec, Attrs, Sequence[Shape]], Step]


def same_pads(in_shape: Shape, kernel: tuple[int, int], a: Mapping[str, Any]) -> Pads:
    """The IR's exact pads: TASO's SAME (possibly one more at the bottom/right) or none."""
    if a["padding"] != "same":
        return (0, 0, 0, 0)
    top, bottom = same_padding(in_shape[2], kernel[0], a["stride"][0])
    left, right = same_padding(in_shape[3], kernel[1], a["stride"][1])
    return top, bottom, left, right


def _with_act(ctx: TorchContext, fn: Step, act: str) -> Step:
    post = ctx.activation(act)
    if post is None:
        return fn
    return lambda x: (post(fn(x)[0]),)


def _unary(name: str) -> Builder:
    def build(ctx: TorchContext, spec: OpSpec, attrs: Attrs, shapes: Sequence[Shape]) -> Step:
        fn = getattr(ctx.torch, name)
        return lambda x: (fn(x[0]),)

    return build


def _scalar(name: str, attr: str) -> Builder:
    def build(ctx: TorchContext, spec: OpSpec, attrs: Attrs, shapes: Sequence[Shape]) -> Step:
        fn, c = getattr(ctx.torch, name), spec.attr_dict(attrs)[attr]
        return lambda x: (fn(x[0], c),)

    return build


def _binary(name: str) -> Builder:
    def build(ctx: TorchContext, spec: OpSpec, attrs: Attrs, shapes: Sequence[Shape]) -> Step:
        fn = getattr(ctx.torch, name)
        return lambda x: (fn(x[0], x[1]),)

    return build


def _gelu(ctx: TorchContext, spec: OpSpec, attrs: Attrs, shapes: Sequence[Shape]) -> Step:
    F, approx = ctx.F, spec.attr_dict(attrs)["approximate"]
    return lambda x: (F.gelu(x[0], approximate=approx),)


def _batchnorm(ctx: TorchContext, spec: OpSpec, attrs: Attrs, shapes: Sequence[Shape]) -> Step:
    F, eps = ctx.F, spec.attr_dict(attrs)["eps"]
    # Inputs are (x, scale, bias, mean, var); F.batch_norm takes (x, mean, var, weight, bias).
    return lambda x: (F.batch_norm(x[0], x[3], x[4], x[1], x[2], training=False, eps=eps),)


def _groupnorm(ctx: TorchContext, spec: OpSpec, attrs: Attrs, shapes: Sequence[Shape]) -> Step:
    a = spec.attr_dict(attrs)
    F, groups, eps = ctx.F, a["groups"], a["eps"]
    return lambda x: (F.group_norm(x[0], groups, x[1], x[2], eps),)


def _softmax(ctx: TorchContext, spec: OpSpec, attrs: Attrs, shapes: Sequence[Shape]) -> Step:
    softmax, axis = ctx.torch.softmax, spec.attr_dict(attrs)["axis"]
    return lambda x: (softmax(x[0], axis),)


def _layernorm(ctx: TorchContext, spec: OpSpec, attrs: Attrs, shapes: Sequence[Shape]) -> Step:
    a = spec.attr_dict(attrs)
    F, norm, eps = ctx.F, tuple(shapes[0][a["axis"] :]), a["eps"]
    return lambda x: (F.layer_norm(x[0], norm, x[1], x[2], eps),)


def _matmul(ctx: TorchContext, spec: OpSpec, attrs: Attrs, shapes: Sequence[Shape]) -> Step:
    matmul = ctx.torch.matmul
    return _with_act(ctx, lambda x: (matmul(x[0], x[1]),), spec.attr_dict(attrs)["activation"])


def _conv2d(
    ctx: TorchContext, spec: OpSpec, attrs: Attrs, shapes: Sequence[Shape], *, pads: PadsFn = same_pads
) -> Step:
    a = spec.attr_dict(attrs)
    x_shape, w_shape = shapes[0], shapes[1]
    groups = x_shape[1] // w_shape[1]
    top, bottom, left, right = pads(x_shape, (w_shape[2], w_shape[3]), a)
    stride, F = tuple(a["stride"]), ctx.F
    if top == bottom and left == right:
        pad = (top, left)
        step: Step = lambda x: (F.conv2d(x[0], x[1], stride=stride, padding=pad, groups=groups),)  # noqa: E731
    else:
        full = (left, right, top, bottom)
        step = lambda x: (F.conv2d(F.pad(x[0], full), x[1], stride=stride, groups=groups),)  # noqa: E731
    return _with_act(ctx, step, a["activation"])


def _poolmax(
    ctx: TorchContext, spec: OpSpec, attrs: Attrs, shapes: Sequence[Shape], *, pads: PadsFn = same_pads
) -> Step:
    a = spec.attr_dict(attrs)
    kernel, stride, F = tuple(a["kernel"]), tuple(a["stride"]), ctx.F
    top, bottom, left, right = pads(shapes[0], kernel, a)
    if top == bottom and left == right and 2 * top <= kernel[0] and 2 * left <= kernel[1]:
        pad = (top, left)
        step: Step = lambda x: (F.max_pool2d(x[0], kernel, stride, pad),)  # noqa: E731
    else:
        full, inf = (left, right, top, bottom), float("-inf")
        step = lambda x: (F.max_pool2d(F.pad(x[0], full, value=inf), kernel, stride),)  # noqa: E731
    return _with_act(ctx, step, a["activation"])


def _poolavg(
    ctx: TorchContext, spec: OpSpec, attrs: Attrs, shapes: Sequence[Shape], *, pads: PadsFn = same_pads
) -> Step:
    a = spec.attr_dict(attrs)
    kernel, stride, F = tuple(a["kernel"]), tuple(a["stride"]), ctx.F
    top, bottom, left, right = pads(shapes[0], kernel, a)
    if top == bottom and left == right and 2 * top <= kernel[0] and 2 * left <= kernel[1]:
        pad = (top, left)
        step: Step = lambda x: (F.avg_pool2d(x[0], kernel, stride, pad, count_include_pad=False),)  # noqa: E731
    else:
        # Asymmetric: the window sum over a zero-padded input, divided by the real-element count.
        h, w = shapes[0][2:]
        ones = np.pad(np.ones((h, w)), ((top, bottom), (left, right)))
        win = np.lib.stride_tricks.sliding_window_view(ones, kernel)[:: stride[0], :: stride[1]]
        scale = ctx.tensor((kernel[0] * kernel[1] / win.sum(axis=(2, 3))).astype(np.float32))
        full = (left, right, top, bottom)
        step = lambda x: (F.avg_pool2d(F.pad(x[0], full), kernel, stride) * scale,)  # noqa: E731
    return _with_act(ctx, step, a["activation"])


def _concat(ctx: TorchContext, spec: OpSpec, attrs: Attrs, shapes: Sequence[Shape]) -> Step:
    cat, axis = ctx.torch.cat, spec.attr_dict(attrs)["axis"]
    return lambda x: (cat(x, axis),)


def _split(ctx: TorchContext, spec: OpSpec, attrs: Attrs, shapes: Sequence[Shape]) -> Step:
    a = spec.attr_dict(attrs)
    split, sizes, axis = ctx.torch.split, list(a["sizes"]), a["axis"]
    return lambda x: tuple(split(x[0], sizes, dim=axis))


def _reshape(ctx: TorchContext, spec: OpSpec, attrs: Attrs, shapes: Sequence[Shape]) -> Step:
    shape = tuple(spec.attr_dict(attrs)["shape"])
    return lambda x: (x[0].reshape(shape),)


def _transpose(ctx: TorchContext, spec: OpSpec, attrs: Attrs, shapes: Sequence[Shape]) -> Step:
    perm = tuple(spec.attr_dict(attrs)["perm"])
    return lambda x: (x[0].permute(perm),)


def _dropout(ctx: TorchContext, spec: OpSpec, attrs: Attrs, shapes: Sequence[Shape]) -> Step:
    return lambda x: (x[0],)


def _enlarge(ctx: TorchContext, spec: OpSpec, attrs: Attrs, shapes: Sequence[Shape]) -> Step:
    w, ref = shapes
    dh, dw = ref[2] - w[2], ref[3] - w[3]
    full, pad = (dw // 2, dw - dw // 2, dh // 2, dh - dh // 2), ctx.F.pad
    return lambda x: (pad(x[0], full),)


def _bnfold_weight(ctx: TorchContext, spec: OpSpec, attrs: Attrs, shapes: Sequence[Shape]) -> Step:
    a = spec.attr_dict(attrs)
    shape = [1] * len(shapes[0])
    shape[a["axis"]] = -1
    eps, torch = a["eps"], ctx.torch

    def run(x: Sequence[Any]) -> tuple[Any, ...]:
        # float64, rounded to the weight's dtype once (as the numpy semantics do).
        mult = x[1].double() / torch.sqrt(x[2].double() + eps)
        return ((x[0].double() * mult.reshape(shape)).to(x[0].dtype),)

    return run


def _bnfold_bias(ctx: TorchContext, spec: OpSpec, attrs: Attrs, shapes: Sequence[Shape]) -> Step:
    eps, torch = spec.attr_dict(attrs)["eps"], ctx.torch

    def run(x: Sequence[Any]) -> tuple[Any, ...]:
        scale, bias, mean, var = (t.double() for t in x[:4])
        dtype = x[4].dtype if len(x) == 5 else x[1].dtype  # the optional fifth input's
        return ((bias - mean * scale / torch.sqrt(var + eps)).to(dtype),)

    return run


def _attention(ctx: TorchContext, spec: OpSpec, attrs: Attrs, shapes: Sequence[Shape]) -> Step:
    a = spec.attr_dict(attrs)
    sdpa, scale = ctx.F.scaled_dot_product_attention, a["scale"] / a["divisor"]
    out = spec.infer_shapes(shapes, attrs)[0]
    # F.scaled_dot_product_attention wants q, k, v with the same batch dims (broadcast views).
    q_shape = out[:-2] + tuple(shapes[0][-2:])
    k_shape = out[:-2] + (shapes[1][-1], shapes[1][-2])
    v_shape = out[:-2] + tuple(shapes[2][-2:])

    causal, nan_rows = a["causal"], a["masked_rows"] == "nan"
    torch = ctx.torch

    def run(x: Sequence[Any]) -> tuple[Any, ...]:
        q, k, v = x[0].expand(q_shape), x[1].transpose(-2, -1).expand(k_shape), x[2].expand(v_shape)
        mask = x[3] if len(x) == 4 else None
        out = sdpa(q, k, v, attn_mask=mask, scale=scale, is_causal=causal)
        if mask is None or not nan_rows:
            return (out,)
        empty = fully_masked_rows(torch, mask, causal, q.shape[-2], k.shape[-2])
        return (torch.where(empty, torch.full((), float("nan"), dtype=out.dtype, device=out.device), out),)

    return run


def causal_mask(torch: Any, rows: int, keys: int, dtype: Any, device: Any) -> Any:
    """The additive mask of ``is_causal``: -inf where key ``j > i`` for query ``i`` (top-left)."""
    upper = torch.ones(rows, keys, dtype=torch.bool, device=device).triu(1)
    return torch.zeros(rows, keys, dtype=dtype, device=device).masked_fill(upper, float("-inf"))


def fully_masked_rows(torch: Any, mask: Any, causal: bool, rows: int, keys: int) -> Any:
    """Where an additive attention ``mask`` (with ``causal``) masks every key of a query row:
    a boolean tensor of shape ``mask.shape[:-1] + (1,)`` that broadcasts against the output.
    Softmax gives NaN there and ``F.scaled_dot_product_attention`` gives 0."""
    if causal:
        mask = mask + causal_mask(torch, rows, keys, mask.dtype, mask.device)
    return torch.amax(mask, dim=-1, keepdim=True) == float("-inf")


def _on_host(ctx: TorchContext, spec: OpSpec, attrs: Attrs, shapes: Sequence[Shape]) -> Step:
    """The op's numpy semantics: inputs copied to the host, outputs back to the device."""

    def run(x: Sequence[Any]) -> tuple[Any, ...]:
        outs = spec.evaluate([t.detach().cpu().numpy() for t in x], attrs)
        return tuple(ctx.tensor(np.asarray(o)) for o in outs)

    return run


def _functional(name: str) -> Builder:
    def build(ctx: TorchContext, spec: OpSpec, attrs: Attrs, shapes: Sequence[Shape]) -> Step:
        fn = getattr(ctx.F, name)
        return lambda x: (fn(x[0]),)

    return build


def _clip(ctx: TorchContext, spec: OpSpec, attrs: Attrs, shapes: Sequence[Shape]) -> Step:
    a = spec.attr_dict(attrs)
    clamp, lo, hi = ctx.torch.clamp, a["min"], a["max"]
    return lambda x: (clamp(x[0], lo, hi),)


def _pow(ctx: TorchContext, spec: OpSpec, attrs: Attrs, shapes: Sequence[Shape]) -> Step:
    e = spec.attr_dict(attrs)["exponent"]
    exponent = int(e) if float(e).is_integer() else e  # x ** 2 as PyTorch models write it
    return lambda x: (ctx.torch.pow(x[0], exponent),)


def _pad(ctx: TorchContext, spec: OpSpec, attrs: Attrs, shapes: Sequence[Shape]) -> Step:
    a = spec.attr_dict(attrs)
    full = torch_pads(a["pads"])
    value = float("-inf") if a["fill"] == "neg_inf" else 0.0
    pad = ctx.F.pad
    return lambda x: (pad(x[0], full, value=value),)


def torch_pads(pads: Sequence[int]) -> tuple[int, ...]:
    """The IR's ``pads`` (before each axis, then after each axis) as ``F.pad``'s argument (last
    axis first, before then after), trailing unpadded axes left out.

    >>> torch_pads((0, 0, 1, 2, 0, 0, 3, 4))
    (2, 4, 1, 3)
    """
    r = len(pads) // 2
    out: list[int] = []
    for i in reversed(range(r)):
        out += [pads[i], pads[r + i]]
    while len(out) > 2 and out[-2:] == [0, 0]:
        out = out[:-2]
    return tuple(out)


def _slice(ctx: TorchContext, spec: OpSpec, attrs: Attrs, shapes: Sequence[Shape]) -> Step:
    a = spec.attr_dict(attrs)
    index = (slice(None),) * a["axis"] + (slice(a["start"], a["end"], a["step"]),)
    return lambda x: (x[0][index],)


def _expand(ctx: TorchContext, spec: OpSpec, attrs: Attrs, shapes: Sequence[Shape]) -> Step:
    shape = tuple(spec.attr_dict(attrs)["shape"])
    return lambda x: (x[0].expand(shape),)


def _mean(ctx: TorchContext, spec: OpSpec, attrs: Attrs, shapes: Sequence[Shape]) -> Step:
    a = spec.attr_dict(attrs)
    axes, keep, mean = list(a["axes"]), a["keepdims"], ctx.torch.mean
    return lambda x: (mean(x[0], axes, keepdim=keep),)


def _cast(ctx: TorchContext, spec: OpSpec, attrs: Attrs, shapes: Sequence[Shape]) -> Step:
    dtype = getattr(ctx.torch, spec.attr_dict(attrs)["dtype"])
    return lambda x: (x[0].to(dtype),)


def _noop(ctx: TorchContext, spec: OpSpec, attrs: Attrs, shapes: Sequence[Shape]) -> Step:
    raise GraphError("a noop is read by another op; a noop can only join outputs")


TORCH_OPS: dict[str, Builder] = {
    "ewadd": _binary("add"),
    "ewmul": _binary("mul"),
    "smul": _scalar("mul", "scalar"),
    "sdiv": _scalar("div", "divisor"),
    "relu": _unary("relu"),
    "tanh": _unary("tanh"),
    "sigmoid": _unary("sigmoid"),
    "gelu": _gelu,
    "batchnorm": _batchnorm,
    "softmax": _softmax,
    "layernorm": _layernorm,
    "groupnorm": _groupnorm,
    "matmul": _matmul,
    "conv2d": _conv2d,
    "poolmax": _poolmax,
    "poolavg": _poolavg,
    "concat": _concat,
    "split": _split,
    "reshape": _reshape,
    "transpose": _transpose,
    "dropout": _dropout,
    "enlarge": _enlarge,
    "merge": _on_host,
    "bnfold_weight": _bnfold_weight,
    "bnfold_bias": _bnfold_bias,
    "attention": _attention,
    "opaque": _on_host,
    "noop": _noop,
    "silu": _functional("silu"),
    "hardsigmoid": _functional("hardsigmoid"),
    "hardswish": _functional("hardswish"),
    "clip": _clip,
    "pow": _pow,
    "rsqrt": _unary("rsqrt"),
    "pad": _pad,
    "slice": _slice,
    "expand": _expand,
    "mean": _mean,
    "cast": _cast,
}
"""Every non-leaf op's PyTorch builder (leaves are the program's inputs and constants)."""


def window_builder(op: str, pads: PadsFn) -> Builder:
    """The conv2d / poolmax / poolavg builder with ``pads`` in place of the exact SAME pads."""
    base = {"conv2d": _conv2d, "poolmax": _poolmax, "poolavg": _poolavg}[op]
    return functools.partial(base, pads=pads)


def torch_step(ctx: TorchContext, spec: OpSpec, attrs: Attrs, in_shapes: Sequence[Shape]) -> Step:
    """The step running one instance of ``spec``; GraphError when the op has no PyTorch builder."""
    builder = TORCH_OPS.get(spec.name)
    if builder is None:
        raise GraphError(f"op {spec.name!r} has no PyTorch implementation")
    return builder(ctx, spec, attrs, in_shapes)
