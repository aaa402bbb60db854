"""PyTorch kernels for timing one op configuration (used by the measured cost model).

:func:`build_kernel` allocates seeded random inputs of the given shapes on a device once and
returns a closure that runs the op on them, as PyTorch eager inference would: conv and matmul with
the fused activation applied in place afterwards, element-wise ops allocating their output.

Choices that differ from the op's exact semantics, because they do not change the time:

* SAME padding is applied symmetrically, ``ceil(total / 2)`` per side, as TASO's runtime does
  (cuDNN, like PyTorch, pads symmetrically);
* ``merge`` is timed as a zero-filled output plus one strided copy of the weight into it (its memory
  traffic), not slot by slot.
* ``opaque`` (an ONNX op the IR does not model) is timed as the generic memory-bound op every cost
  model treats it as: one read of each input and one write of each output. Its real kernel is
  onnxruntime's and the same in the original and the optimized graph.

Only costed ops have kernels: leaves and views never reach the timing code. torch is passed in
(imported lazily by the caller) so that importing this module does not need it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from tensor_eqsat.ir.ops import decode_shapes, same_padding
from tensor_eqsat.ir.opspec import Attrs, OpSpec
from tensor_eqsat.ir.types import Activation, Shape

Kernel = Callable[[], Any]
_Builder = Callable[[Any, list[Any], Mapping[str, Any]], Kernel]


def _sym_pad(size: int, kernel: int, stride: int, padding: str) -> int:
    if padding != "same":
        return 0
    before, after = same_padding(size, kernel, stride)
    return math.ceil((before + after) / 2)


def _activation(torch: Any, act: str) -> Callable[[Any], Any] | None:
    fn: Callable[[Any], Any] | None = Activation(act).torch_fn(torch, inplace=True)
    return fn


def _with_act(torch: Any, fn: Kernel, act: str) -> Kernel:
    post = _activation(torch, act)
    if post is None:
        return fn
    return lambda: post(fn())


def _conv2d(torch: Any, xs: list[Any], a: Mapping[str, Any]) -> Kernel:
    x, w = xs
    f = torch.nn.functional
    groups = x.shape[1] // w.shape[1]
    pad = (
        _sym_pad(x.shape[2], w.shape[2], a["stride"][0], a["padding"]),
        _sym_pad(x.shape[3], w.shape[3], a["stride"][1], a["padding"]),
    )
    return _with_act(
        torch, lambda: f.conv2d(x, w, stride=a["stride"], padding=pad, groups=groups), a["activation"]
    )


def _pool(kind: str) -> _Builder:
    def build(torch: Any, xs: list[Any], a: Mapping[str, Any]) -> Kernel:
        (x,) = xs
        f = torch.nn.functional
        k, s = a["kernel"], a["stride"]
        pad = (_sym_pad(x.shape[2], k[0], s[0], a["padding"]), _sym_pad(x.shape[3], k[1], s[1], a["padding"]))
        if kind == "max":
            return _with_act(torch, lambda: f.max_pool2d(x, k, s, pad), a["activation"])
        return _with_act(torch, lambda: f.avg_pool2d(x, k, s, pad, count_include_pad=False), a["activation"])

    return build


def _merge(torch: Any, xs: list[Any], a: Mapping[str, Any]) -> Kernel:
    (w,) = xs
    count = a["count"]
    cout, cin_g = w.shape[0], w.shape[1]

    def run() -> Any:
        out = torch.zeros((cout, cin_g * count, *w.shape[2:]), dtype=w.dtype, device=w.device)
        out.view(cout, count, cin_g, *w.shape[2:])[:, 0].copy_(w)
        return out

    return run


def _enlarge(torch: Any, xs: list[Any], a: Mapping[str, Any]) -> Kernel:
    w, ref = xs
    dh, dw = ref.shape[2] - w.shape[2], ref.shape[3] - w.shape[3]
    pad = (dw // 2, dw - dw // 2, dh // 2, dh - dh // 2)
    return lambda: torch.nn.functional.pad(w, pad)


def _layernorm(torch: Any, xs: list[Any], a: Mapping[str, Any]) -> Kernel:
    x, scale, bias = xs
    norm = tuple(x.shape[a["axis"] :])
    return lambda: torch.nn.functional.layer_norm(x, norm, scale, bias, a["eps"])


def _batchnorm(torch: Any, xs: list[Any], a: Mapping[str, Any]) -> Kernel:
    x, scale, bias, mean, var = xs
    f = torch.nn.functional
    return lambda: f.batch_norm(x, mean, var, scale, bias, training=False, eps=a["eps"])


def _opaque(torch: Any, xs: list[Any], a: Mapping[str, Any]) -> Kernel:
    device = xs[0].device if xs else "cpu"
    outs = decode_shapes(a["output_shapes"])

    def run() -> Any:
        for x in xs:
            x.sum()
        return [torch.zeros(s, dtype=torch.float32, device=device) for s in outs]

    return run


_BUILDERS: dict[str, _Builder] = {
    "ewadd": lambda t, xs, a: lambda: t.add(xs[0], xs[1]),
    "ewmul": lambda t, xs, a: lambda: t.mul(xs[0], xs[1]),
    "smul": lambda t, xs, a: lambda: t.mul(xs[0], a["scalar"]),
    "sdiv": lambda t, xs, a: lambda: t.div(xs[0], a["divisor"]),
    "relu": lambda t, xs, a: lambda: t.relu(xs[0]),
    "tanh": lambda t, xs, a: lambda: t.tanh(xs[0]),
    "sigmoid": lambda t, xs, a: lambda: t.sigmoid(xs[0]),
    "gelu": lambda t, xs, a: lambda: t.nn.functional.gelu(xs[0], approximate=a["approximate"]),
    "batchnorm": _batchnorm,
    "softmax": lambda t, xs, a: lambda: t.softmax(xs[0], a["axis"]),
    "layernorm": _layernorm,
    "matmul": lambda t, xs, a: _with_act(t, lambda: t.matmul(xs[0], xs[1]), a["activation"]),
    "conv2d": _conv2d,
    "poolmax": _pool("max"),
    "poolavg": _pool("avg"),
    "concat": lambda t, xs, a: lambda: t.cat(xs, a["axis"]),
    "enlarge": _enlarge,
    "merge": _merge,
    "opaque": _opaque,
}


def has_kernel(op: str) -> bool:
    """Whether :func:`build_kernel` can time ``op``."""
    return op in _BUILDERS


def build_kernel(
    torch: Any, spec: OpSpec, attrs: Attrs, in_shapes: Sequence[Shape], device: Any, seed: int = 0
) -> Kernel:
    """A closure running one instance of ``spec`` on fresh seeded random inputs on ``device``.

    Raises KeyError when the op has no PyTorch kernel (check :func:`has_kernel` first).
    """
    builder = _BUILDERS[spec.name]
    gen = torch.Generator().manual_seed(seed)
    xs = []
    for i, shape in enumerate(in_shapes):
        x = torch.randn(tuple(shape), generator=gen, dtype=torch.float32)
        if i in spec.positive_inputs:
            x = x.abs() + 0.5
        xs.append(x.to(device))
    return builder(torch, xs, spec.attr_dict(attrs))
