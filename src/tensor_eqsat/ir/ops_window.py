"""Windowed operators, NCHW: ``conv2d`` (groups implied by the weight) and the ``poolmax`` /
``poolavg`` pools, with TASO's SAME/VALID padding rules and the numpy convolution they share.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from tensor_eqsat.errors import ShapeError
from tensor_eqsat.ir.ops_common import PADDINGS, A, act_attr, activate, pair_positive
from tensor_eqsat.ir.opspec import AttrSpec, OpSpec
from tensor_eqsat.ir.types import OpKind, Shape, volume

SPECS: list[OpSpec] = []
"""This family's ops, in registration order (:mod:`tensor_eqsat.ir.ops` registers them)."""


def same_padding(size: int, kernel: int, stride: int) -> tuple[int, int]:
    """TASO's SAME padding (before, after) along one spatial dim.

    >>> same_padding(112, 3, 2)   # 112 % 2 == 0: total = max(3 - 2, 0) = 1
    (0, 1)
    >>> same_padding(56, 3, 1)
    (1, 1)
    """
    total = max(kernel - stride, 0) if size % stride == 0 else max(kernel - size % stride, 0)
    return total // 2, total - total // 2


def one_clipped_window(size: Sequence[int], kernel: Sequence[int], pads: Sequence[int]) -> bool:
    """Whether a ceil-mode pool over a map of ``size`` (H, W) has one window, clipped to the
    whole unpadded map: a kernel at least the map and no padding (``pads`` any length). An
    average pool there divides by H * W: the spatial mean (HF EfficientNet's final
    ``AvgPool2d(1280, ceil_mode=True)``).

    >>> one_clipped_window((7, 7), (1280, 1280), (0, 0, 0, 0)), one_clipped_window((7, 7), (6, 6), ())
    (True, False)
    """
    return not any(pads) and all(s <= k for s, k in zip(size, kernel, strict=True))


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
    return (activate(out.astype(np.float32), a["activation"]),)


def _conv_flops(ins: Sequence[Shape], outs: Sequence[Shape], a: A) -> int:
    w = ins[1]
    return 2 * volume(outs[0]) * w[1] * w[2] * w[3]


SPECS.append(
    OpSpec(
        name="conv2d",
        inputs=("x", "weight"),
        attrs=(
            AttrSpec(
                "stride", "ints", default=(1, 1), check=pair_positive, check_msg="must be two ints >= 1"
            ),
            AttrSpec("padding", "enum", default="same", choices=PADDINGS),
            act_attr(),
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
    return (activate(np.ascontiguousarray(out, dtype=np.float32), a["activation"]),)


def _poolavg(x: Sequence[np.ndarray], a: A) -> tuple[np.ndarray, ...]:
    k, s, pad = a["kernel"], a["stride"], a["padding"]
    xp = _pad_spatial(x[0], k, s, pad, 0.0)
    total = _windows(xp, k, s).sum(axis=(4, 5), dtype=np.float64)
    ones = np.ones((1, 1) + x[0].shape[2:], dtype=np.float64)
    count = _windows(_pad_spatial(ones, k, s, pad, 0.0), k, s).sum(axis=(4, 5))
    out = (total / count).astype(np.float32)
    return (activate(out, a["activation"]),)


def _pool_flops(ins: Sequence[Shape], outs: Sequence[Shape], a: A) -> int:
    return volume(outs[0]) * a["kernel"][0] * a["kernel"][1]


for _name, _fn, _doc in (
    ("poolmax", _poolmax, "2-D max pooling NCHW, optional fused activation"),
    ("poolavg", _poolavg, "2-D average pooling NCHW (padding excluded from the mean)"),
):
    SPECS.append(
        OpSpec(
            name=_name,
            inputs=("x",),
            attrs=(
                AttrSpec("kernel", "ints", check=pair_positive, check_msg="must be two ints >= 1"),
                AttrSpec(
                    "stride", "ints", default=(1, 1), check=pair_positive, check_msg="must be two ints >= 1"
                ),
                AttrSpec("padding", "enum", default="valid", choices=PADDINGS),
                act_attr(),
            ),
            infer=_pool_infer(_name),
            compute=_fn,
            flops=_pool_flops,
            kind=OpKind.POOL,
            doc=_doc,
        )
    )
