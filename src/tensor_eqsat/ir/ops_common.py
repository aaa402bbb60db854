"""Helpers shared by the operator families registered in :mod:`tensor_eqsat.ir.ops`.

Attribute specs (activation, padding), the numpy activations, axis checks and canonicalization,
and FLOP-count factories. Nothing here registers an op.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from tensor_eqsat.errors import ShapeError
from tensor_eqsat.ir.opspec import AttrSpec
from tensor_eqsat.ir.symbolic import concrete
from tensor_eqsat.ir.types import Activation, Padding, Shape, volume

A = Mapping[str, Any]
"""The named view of an op's attributes that shape and compute functions receive."""

ACTIVATIONS = tuple(a.value for a in Activation)
PADDINGS = tuple(p.value for p in Padding)


def pair_positive(v: tuple[int, ...]) -> bool:
    """Attribute check: two ints, both >= 1 (stride, kernel)."""
    return len(v) == 2 and all(x >= 1 for x in v)


def act_attr() -> AttrSpec:
    """The fused-activation attribute (default ``none``) of conv2d, matmul and the pools."""
    return AttrSpec("activation", "enum", default="none", choices=ACTIVATIONS)


def fmt_shape(shape: Shape) -> str:
    """A shape as a tuple string, for error messages."""
    return str(tuple(shape))


def activate(x: np.ndarray, act: str) -> np.ndarray:
    """Apply the fused activation ``act`` (an :class:`~tensor_eqsat.ir.types.Activation` value)."""
    kind = Activation(act)
    if kind is Activation.NONE:
        return x
    if kind is Activation.RELU:
        return np.maximum(x, 0).astype(x.dtype, copy=False)
    if kind is Activation.SIGMOID:
        return sigmoid_numpy(x)
    return np.tanh(x)


def sigmoid_numpy(x: np.ndarray) -> np.ndarray:
    """The logistic sigmoid, without overflow for large ``|x|``."""
    # Split by sign so that large |x| never overflows exp().
    out = np.empty_like(x)
    pos = x >= 0
    out[pos] = 1.0 / (1.0 + np.exp(-x[pos]))
    ex = np.exp(x[~pos])
    out[~pos] = ex / (1.0 + ex)
    return out


def zero_flops(ins: Sequence[Shape], outs: Sequence[Shape], a: A) -> int:
    """FLOP count of a view or leaf: zero."""
    return 0


def out_volume_flops(factor: int) -> Any:
    """FLOP count ``factor`` times the number of output elements."""

    def flops(ins: Sequence[Shape], outs: Sequence[Shape], a: A) -> int:
        return factor * sum(volume(s) for s in outs)

    return flops


MAX_ELEMENTS = 2**60
"""The most elements a tensor may have: its size in bytes (8 per element at most) must fit the
64-bit sizes of numpy, ONNX and PyTorch, so no shape reaches them that they cannot express."""


def shape_ok(v: tuple[int, ...]) -> bool:
    """Attribute check: every dim >= 1 (over its whole range, for a symbolic dim), and at most
    :data:`MAX_ELEMENTS` elements in all (at the hints: an unbounded symbol has no largest size)."""
    return all(d >= 1 for d in v) and math.prod(concrete(v)) <= MAX_ELEMENTS


def same_shape(shapes: Sequence[Shape], a: A) -> tuple[Shape, ...]:
    """Shape inference of an op whose output has its (first) input's shape."""
    return (tuple(shapes[0]),)


def axis_canon(key: str, default: int | None = None) -> Any:
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


def check_axis(op: str, shapes: Sequence[Shape], axis: int, rank: int) -> None:
    """Raise ShapeError unless ``axis`` is a valid axis of a rank-``rank`` input."""
    if not 0 <= axis < rank:
        raise ShapeError(op, f"axis {axis} out of range for rank {rank}", shapes, attr="axis")
