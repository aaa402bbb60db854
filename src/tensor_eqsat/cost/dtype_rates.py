"""Compute rates of a device by dtype: what pricing a float16 or bfloat16 graph needs.

A cost model prices a graph in the precision it runs in (DESIGN.md decision 17): bytes follow
the dtype's size, and the compute term the rate of the units that run it. On NVIDIA GPUs since
Volta (float16) and Ampere (bfloat16, TF32) matmuls and convolutions in those types run on tensor
cores, 2x (TF32 to float16) to 15x (float32 SIMT to bfloat16) faster than float32 kernels.

``RATES[device][dtype] = (matrix TFLOPS, vector TFLOPS)``, dense (no 2:4 sparsity), from the
vendors' datasheets (``SOURCES``). ``tf32`` is the rate of float32 work that runs on TF32 tensor
cores. A device or dtype missing here runs at its float32 rates (a CPU without half-precision
units; a P100 has no bfloat16).

:func:`compute_scale` turns this into the factor by which the compute term of one kind of op
shrinks in another dtype, given how the float32 timings were taken: PyTorch runs float32
convolutions in TF32 by default (``cudnn.allow_tf32``) and float32 matmuls in float32, so a table
recorded in float32 holds TF32 convolutions and float32 GEMMs.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from tensor_eqsat.ir.dtypes import DType
from tensor_eqsat.ir.types import OpKind

Rates = Mapping[str, tuple[float, float]]

RATES: Mapping[str, Rates] = MappingProxyType(
    {
        "a100": {
            "float32": (19.5, 19.5),
            "tf32": (156.0, 19.5),
            "float16": (312.0, 78.0),
            "bfloat16": (312.0, 39.0),
        },
        "h100": {
            "float32": (67.0, 67.0),
            "tf32": (494.7, 67.0),
            "float16": (989.4, 133.8),
            "bfloat16": (989.4, 133.8),
        },
        "h200": {
            "float32": (67.0, 67.0),
            "tf32": (494.7, 67.0),
            "float16": (989.4, 133.8),
            "bfloat16": (989.4, 133.8),
        },
        "p100": {
            "float32": (9.3, 9.3),
            "float16": (18.7, 18.7),
        },
    }
)

SOURCES: Mapping[str, str] = MappingProxyType(
    {
        "a100": "NVIDIA A100 datasheet (2021): FP32 19.5, TF32 156, FP16/BF16 tensor 312, FP16 78 and "
        "BF16 39 TFLOPS (non-tensor), dense",
        "h100": "NVIDIA H100 datasheet (2023), SXM5: FP32 67, TF32 494.7, FP16/BF16 tensor 989.4 TFLOPS "
        "dense (half the sparse figures); FP16/BF16 non-tensor 133.8 TFLOPS",
        "h200": "NVIDIA H200 datasheet (2024), SXM: the H100 SXM5's compute (FP32 67, TF32 494.7 dense, "
        "FP16/BF16 tensor 989.4 dense) with 4.8 TB/s HBM3e",
        "p100": "NVIDIA Tesla P100 datasheet (2016), PCIe: FP32 9.3, FP16 18.7 TFLOPS; no bfloat16",
    }
)

MATRIX_KINDS = frozenset({OpKind.GEMM, OpKind.CONV})
"""Kinds whose work runs on the matrix unit (tensor cores) in reduced precision."""


def rates(device: str, dtype: DType | str, *, tf32: bool = False) -> tuple[float, float]:
    """(matrix, vector) TFLOPS of ``device`` for ``dtype``; ``tf32``: float32 on TF32 tensor
    cores. A device or dtype without an entry gets its float32 rates, or (0, 0) when the device
    is unknown (callers then keep their own peaks).

    >>> rates("h200", "bf16")
    (989.4, 133.8)
    >>> rates("p100", "bf16")   # no bfloat16 units: float32 rates
    (9.3, 9.3)
    """
    table = RATES.get(device)
    if table is None:
        return (0.0, 0.0)
    d = DType.parse(dtype)
    key = "tf32" if tf32 and d is DType.FLOAT32 and "tf32" in table else d.value
    return table.get(key, table["float32"])


def runtime_rate(device: str, kind: OpKind, dtype: DType | str) -> float:
    """TFLOPS at which PyTorch's defaults run an op of ``kind`` in ``dtype`` on ``device``:
    float32 convolutions on TF32 tensor cores (``cudnn.allow_tf32``), float32 GEMMs on the
    float32 units, float16/bfloat16 matmuls and convolutions on tensor cores, everything else on
    the vector units. 0 for an unknown device."""
    d = DType.parse(dtype)
    matrix = kind in MATRIX_KINDS
    matrix_rate, vector_rate = rates(device, d, tf32=kind is OpKind.CONV)
    return matrix_rate if matrix else vector_rate


def compute_scale(
    device: str, kind: OpKind, dtype: DType | str, *, recorded: DType | str = DType.FLOAT32
) -> float:
    """How much the compute time of an op of ``kind`` changes from timings taken in ``recorded``
    to ``dtype`` on ``device`` (see :func:`runtime_rate`); 1.0 for an unknown device.

    >>> round(compute_scale("h200", OpKind.GEMM, "bf16"), 4)    # float32 GEMMs ran on SIMT units
    0.0677
    >>> round(compute_scale("h200", OpKind.CONV, "bf16"), 2)    # float32 convs ran on TF32 cores
    0.5
    >>> compute_scale("h200", OpKind.CONV, "float32")
    1.0
    """
    new = runtime_rate(device, kind, dtype)
    old = runtime_rate(device, kind, recorded)
    return old / new if new > 0 and old > 0 else 1.0
