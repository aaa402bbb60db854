"""PyTorch kernels for timing one op configuration (used by the measured cost model).

:func:`build_kernel` allocates seeded random inputs of the given shapes on a device once and
returns a closure that runs the op on them. The op's PyTorch code is the executor's, from the one
table :data:`tensor_eqsat.ir.torch_ops.TORCH_OPS` (conv and matmul with the fused activation
applied in place afterwards, element-wise ops allocating their output), except where timing
deliberately departs from the exact semantics because the difference does not change the time:

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

from tensor_eqsat.ir.ops import decode_shapes, get_op, same_padding
from tensor_eqsat.ir.opspec import Attrs, OpSpec
from tensor_eqsat.ir.torch_ops import TORCH_OPS, Builder, Pads, Step, TorchContext, window_builder
from tensor_eqsat.ir.types import OpKind, Shape

Kernel = Callable[[], Any]


def _sym_pad(size: int, kernel: int, stride: int, padding: str) -> int:
    if padding != "same":
        return 0
    before, after = same_padding(size, kernel, stride)
    return math.ceil((before + after) / 2)


def symmetric_pads(in_shape: Shape, kernel: tuple[int, int], a: Mapping[str, Any]) -> Pads:
    """SAME padding split evenly, ``ceil(total / 2)`` per side (TASO's runtime and cuDNN do this;
    the one extra row or column of the exact pads does not change the time)."""
    ph = _sym_pad(in_shape[2], kernel[0], a["stride"][0], a["padding"])
    pw = _sym_pad(in_shape[3], kernel[1], a["stride"][1], a["padding"])
    return ph, ph, pw, pw


def _merge(ctx: TorchContext, spec: OpSpec, attrs: Attrs, shapes: Sequence[Shape]) -> Step:
    # Timed as its memory traffic on the device: the executor's host round trip through numpy
    # is an artefact of running it, not the cost of the weight transform.
    torch, count = ctx.torch, spec.attr_dict(attrs)["count"]

    def run(xs: Sequence[Any]) -> tuple[Any, ...]:
        (w,) = xs
        cout, cin_g = w.shape[0], w.shape[1]
        out = torch.zeros((cout, cin_g * count, *w.shape[2:]), dtype=w.dtype, device=w.device)
        out.view(cout, count, cin_g, *w.shape[2:])[:, 0].copy_(w)
        return (out,)

    return run


def _opaque(ctx: TorchContext, spec: OpSpec, attrs: Attrs, shapes: Sequence[Shape]) -> Step:
    # Timed as a generic memory-bound op (read each input, write each output): the executor runs
    # it through onnxruntime on the host, the same in the original and the optimized graph.
    torch, outs = ctx.torch, decode_shapes(spec.attr_dict(attrs)["output_shapes"])
    device = ctx.device if shapes else "cpu"

    def run(xs: Sequence[Any]) -> tuple[Any, ...]:
        for x in xs:
            x.sum()
        return tuple(torch.zeros(s, dtype=torch.float32, device=device) for s in outs)

    return run


_TIMING: dict[str, Builder] = {
    **{op: b for op, b in TORCH_OPS.items() if get_op(op).kind not in (OpKind.LEAF, OpKind.VIEW)},
    # The deliberate differences from the executor (see the module docstring).
    "conv2d": window_builder("conv2d", symmetric_pads),
    "poolmax": window_builder("poolmax", symmetric_pads),
    "poolavg": window_builder("poolavg", symmetric_pads),
    "merge": _merge,
    "opaque": _opaque,
}


def has_kernel(op: str) -> bool:
    """Whether :func:`build_kernel` can time ``op``."""
    return op in _TIMING


def build_kernel(
    torch: Any,
    spec: OpSpec,
    attrs: Attrs,
    in_shapes: Sequence[Shape],
    device: Any,
    seed: int = 0,
    dtype: str = "float32",
) -> Kernel:
    """A closure running one instance of ``spec`` on fresh seeded random inputs of ``dtype``
    (default float32; the values are the float32 draws rounded) on ``device``.

    Raises KeyError when the op has no PyTorch kernel (check :func:`has_kernel` first).
    """
    builder = _TIMING[spec.name]
    gen = torch.Generator().manual_seed(seed)
    xs = []
    for i, shape in enumerate(in_shapes):
        x = torch.randn(tuple(shape), generator=gen, dtype=torch.float32)
        if i in spec.positive_inputs:
            x = x.abs() + 0.5
        xs.append(x.to(device=device, dtype=getattr(torch, dtype)))
    step = builder(TorchContext(torch, device), spec, attrs, [tuple(s) for s in in_shapes])
    return lambda: step(xs)
