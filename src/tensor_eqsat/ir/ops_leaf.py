"""Leaf operators: ``input`` and ``weight``, each with a name, a fixed shape and a dtype.

Their values are supplied by the interpreter (or the user), never computed. The ``dtype``
attribute (default ``float32``) is where every dtype of a graph starts (ir/dtypes.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from tensor_eqsat.ir.dtypes import DTYPE_NAMES
from tensor_eqsat.ir.ops_common import A, shape_ok, zero_flops
from tensor_eqsat.ir.opspec import AttrSpec, OpSpec
from tensor_eqsat.ir.types import OpKind, Shape

SPECS: list[OpSpec] = []
"""This family's ops, in registration order (:mod:`tensor_eqsat.ir.ops` registers them)."""


def _leaf_infer(op: str) -> Any:
    def infer(shapes: Sequence[Shape], a: A) -> tuple[Shape, ...]:
        return (tuple(a["shape"]),)

    return infer


def _leaf_compute(op: str) -> Any:
    def compute(arrays: Sequence[np.ndarray], a: A) -> tuple[np.ndarray, ...]:
        raise AssertionError(f"{op} values are supplied by the interpreter, not computed")

    return compute


def _leaf_dtype(in_dtypes: Sequence[str], a: A, n_outputs: int) -> tuple[str, ...]:
    return (str(a["dtype"]),)


for _leaf in ("input", "weight"):
    SPECS.append(
        OpSpec(
            name=_leaf,
            inputs=(),
            attrs=(
                AttrSpec(
                    "shape",
                    "dims",
                    check=shape_ok,
                    check_msg="every dim must be >= 1, and the tensor at most 2**60 elements",
                ),
                AttrSpec("name", "str", check=bool, check_msg="must be non-empty"),
                AttrSpec("dtype", "enum", default="float32", choices=DTYPE_NAMES),
            ),
            infer=_leaf_infer(_leaf),
            infer_dtype=_leaf_dtype,
            compute=_leaf_compute(_leaf),
            flops=zero_flops,
            kind=OpKind.LEAF,
            doc=f"a graph {_leaf} with a name and a fixed shape",
        )
    )
