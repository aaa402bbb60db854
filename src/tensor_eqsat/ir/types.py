"""Small value types shared by the IR: shapes, activations, padding modes, op kinds."""

from __future__ import annotations

import math
from enum import StrEnum

Shape = tuple[int, ...]


class Activation(StrEnum):
    """An activation fused into conv2d, matmul or a pool (TASO's ActiMode)."""

    NONE = "none"
    RELU = "relu"
    SIGMOID = "sigmoid"
    TANH = "tanh"


class Padding(StrEnum):
    """Padding mode of conv2d and pools: TASO's SAME (output ceil(H/s)) or VALID."""

    SAME = "same"
    VALID = "valid"


class OpKind(StrEnum):
    """The class of work an op does; cost models pick their formula by it."""

    LEAF = "leaf"  # input, weight: no work
    VIEW = "view"  # reshape, transpose, split, dropout, noop: free views
    GEMM = "gemm"  # matmul
    CONV = "conv"  # conv2d
    ELEMENTWISE = "elementwise"  # ewadd, relu, gelu, batchnorm (inference) ...
    REDUCTION = "reduction"  # softmax, layernorm
    POOL = "pool"  # poolmax, poolavg
    MEMORY = "memory"  # concat: moves bytes
    WEIGHT_TRANSFORM = "weight_transform"  # merge, enlarge: rewrite weights only


def volume(shape: Shape) -> int:
    """Number of elements of a tensor of this shape.

    >>> volume((2, 3, 4))
    24
    >>> volume(())
    1
    """
    return math.prod(shape)
