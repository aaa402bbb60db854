"""Small value types shared by the IR: shapes, activations, padding modes, op kinds."""

from __future__ import annotations

import math
from enum import StrEnum
from typing import Any

Shape = tuple[int, ...]


class Activation(StrEnum):
    """An activation fused into conv2d, matmul or a pool (TASO's ActiMode), with its names in
    the runtimes: the one place they are written (numpy: ``ir.ops_common.activate``).

    >>> Activation.RELU.onnx_op, Activation.from_onnx("Tanh"), Activation.NONE.onnx_op
    ('Relu', <Activation.TANH: 'tanh'>, None)
    """

    NONE = "none"
    RELU = "relu"
    SIGMOID = "sigmoid"
    TANH = "tanh"

    @property
    def onnx_op(self) -> str | None:
        """The ONNX operator (``Relu``, ``Sigmoid``, ``Tanh``); None for no activation."""
        return None if self is Activation.NONE else self.value.capitalize()

    @classmethod
    def from_onnx(cls, op_type: str) -> Activation | None:
        """The activation an ONNX operator type is, or None."""
        return next((a for a in cls if a.onnx_op == op_type), None)

    def torch_fn(self, torch: Any, *, inplace: bool = False) -> Any:
        """The PyTorch function (``torch.relu``, or ``torch.relu_`` in place); None for none."""
        if self is Activation.NONE:
            return None
        return getattr(torch, self.value + ("_" if inplace else ""))


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
