"""Element-wise ops of today's inference graphs: ``silu``, ``hardsigmoid``, ``hardswish``,
``clip`` (ReLU6, hardtanh, clamp), ``pow`` (by a constant exponent) and ``rsqrt``.

They are what MobileNet-v2/v3, EfficientNet and Llama-style decoders (RMSNorm, SwiGLU) are made
of (issue 33). Each is one PyTorch call, so the FX importer maps it to one op with the call's
exact semantics, and the search can reason around it instead of stopping at an opaque region.
The numpy semantics follow PyTorch's definitions (``hardsigmoid(x) = min(max(x + 3, 0), 6) / 6``).

Alternatives rejected: spelling them with existing ops (``silu`` as ``x * sigmoid(x)`` is an
extra kernel and an extra read of ``x`` on every runtime, and the cost models would price two
ops where the runtime runs one); a fused-activation attribute on conv/matmul for each (TASO's
three activations are what its rules know; a new one would need every rule that reads
``activation`` to learn it).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from tensor_eqsat.errors import ShapeError
from tensor_eqsat.ir.ops_common import A, out_volume_flops, same_shape, sigmoid_numpy
from tensor_eqsat.ir.opspec import AttrSpec, OpSpec
from tensor_eqsat.ir.types import OpKind, Shape

SPECS: list[OpSpec] = []
"""This family's ops, in registration order (:mod:`tensor_eqsat.ir.ops` registers them)."""


def _f32(x: Any) -> np.ndarray:
    return np.asarray(x).astype(np.float32, copy=False)


def hardsigmoid_numpy(x: np.ndarray) -> np.ndarray:
    """PyTorch's ``hardsigmoid``: ``min(max(x + 3, 0), 6) / 6``."""
    return _f32(
        np.minimum(np.maximum(x + np.float32(3.0), np.float32(0.0)), np.float32(6.0)) / np.float32(6.0)
    )


def _unary(
    name: str, fn: Any, flops: int, doc: str, attrs: tuple[AttrSpec, ...] = (), infer: Any = same_shape
) -> None:
    SPECS.append(
        OpSpec(
            name=name,
            inputs=("x",),
            attrs=attrs,
            infer=infer,
            compute=lambda x, a: (_f32(fn(x[0], a)),),
            flops=out_volume_flops(flops),
            kind=OpKind.ELEMENTWISE,
            doc=doc,
        )
    )


_unary("silu", lambda x, a: x * sigmoid_numpy(x), 5, "x * sigmoid(x) (SiLU, swish)")


_unary("hardsigmoid", lambda x, a: hardsigmoid_numpy(x), 3, "min(max(x + 3, 0), 6) / 6")


_unary("hardswish", lambda x, a: x * hardsigmoid_numpy(x), 4, "x * hardsigmoid(x)")


def _clip_infer(shapes: Sequence[Shape], a: A) -> tuple[Shape, ...]:
    if a["min"] > a["max"]:
        raise ShapeError("clip", f"min {a['min']:g} > max {a['max']:g}", shapes, attr="min")
    return same_shape(shapes, a)


_unary(
    "clip",
    lambda x, a: np.minimum(np.maximum(x, np.float32(a["min"])), np.float32(a["max"])),
    2,
    "min(max(x, min), max): ReLU6, hardtanh, clamp with both bounds",
    (AttrSpec("min", "float"), AttrSpec("max", "float")),
    _clip_infer,
)


def _pow(x: np.ndarray, a: Any) -> np.ndarray:
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        return np.power(x, np.float32(a["exponent"]))


_unary("pow", _pow, 4, "x to a constant power", (AttrSpec("exponent", "float"),))


def _rsqrt(x: np.ndarray, a: Any) -> np.ndarray:
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.float32(1.0) / np.sqrt(x)


_unary("rsqrt", _rsqrt, 2, "1 / sqrt(x)")
