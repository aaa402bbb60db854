"""The dtype conversion: ``cast``, one floating tensor rounded to another floating dtype.

Reduced-precision transformers compute their softmax and RMSNorm in float32 around bfloat16 or
float16 activations (``x.to(torch.float32)``, ``.float()``, ``softmax(..., dtype=float32)``,
``.to(dtype)`` back; ONNX ``Cast``). Without an op for it those calls stayed opaque and split the
rewritable graph at every attention and norm (issue 34). The shape is the input's; the output's
dtype is the ``dtype`` attribute; the numpy semantics are the interpreter's rounding
(ir/dtypes.py: values computed in float32 and rounded once to the output's dtype, so widening is
exact and narrowing rounds to nearest even, as ``Tensor.to`` does). Only floating dtypes take
part: an integer tensor (token ids) is cast by opaque code.

Rules match ops by name and no rule names ``cast``, so the algebra never moves a cast; rewrites
of the ops around one still fire, each side keeping its dtypes (a rule whose result would mix
dtypes is ill-typed and skipped, DESIGN.md decision 17).

Alternatives rejected: a dtype attribute on every op (each rule would have to carry it); casts
folded into their readers (a bfloat16 add reading a float32 tensor is not one PyTorch call).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from tensor_eqsat.ir.dtypes import DType, DTypeError
from tensor_eqsat.ir.ops_common import A, out_volume_flops, same_shape
from tensor_eqsat.ir.opspec import AttrSpec, OpSpec
from tensor_eqsat.ir.types import OpKind

SPECS: list[OpSpec] = []
"""This family's ops, in registration order (:mod:`tensor_eqsat.ir.ops` registers them)."""

CAST_DTYPES: tuple[str, ...] = ("float32", "float16", "bfloat16")
"""The dtypes a ``cast`` converts between (the IR's floating dtypes)."""


def _cast_dtype(in_dtypes: Sequence[str], a: A, n_outputs: int) -> tuple[str, ...]:
    if DType.parse(in_dtypes[0]) not in (DType.FLOAT32, DType.FLOAT16, DType.BFLOAT16):
        raise DTypeError("cast", f"input is {in_dtypes[0]}; only floating tensors are cast")
    return (str(a["dtype"]),)


def _cast_compute(x: Sequence[np.ndarray], a: A) -> tuple[np.ndarray, ...]:
    # The input arrives widened to float32 (exact); the interpreter rounds the output to ``dtype``.
    return (np.asarray(x[0], dtype=np.float32),)


SPECS.append(
    OpSpec(
        name="cast",
        inputs=("x",),
        attrs=(AttrSpec("dtype", "enum", choices=CAST_DTYPES),),
        infer=same_shape,
        infer_dtype=_cast_dtype,
        compute=_cast_compute,
        flops=out_volume_flops(0),
        kind=OpKind.ELEMENTWISE,
        doc="x converted to another floating dtype (rounded to nearest even when narrowing)",
    )
)
