"""Element types of IR tensors: the one place that says what a dtype is and how values round.

Every tensor of a Graph (and every class of a tensor e-graph) carries a dtype (DESIGN.md decision
17). Leaves (``input``, ``weight``) declare theirs with a ``dtype`` attribute (default
``float32``); every other op infers its outputs' dtypes with its shapes. By default an op needs no
dtype code at all (:func:`infer_dtypes`): its outputs take the dtype of its floating inputs, which
must agree (a float16 tensor added to a bfloat16 one is a :class:`DTypeError`, which rewrites skip
like a shape error), and integer inputs (indices) do not vote. An OpSpec that computes something
else (a cast, an op whose outputs are indices) sets ``infer_dtype``.

Numerics. numpy has float16 but no bfloat16, and its float16 matmul has no BLAS. So every op of a
reduced-precision graph computes in float32 from its inputs widened exactly, and rounds its
outputs once to their dtype (:func:`evaluate`): what GPU kernels do (tensor cores accumulate in
float32 and round the stored result). Float16 values are stored as numpy ``float16``; bfloat16
values as ``float32`` arrays whose low 16 bits are zero (rounded to nearest even by
:func:`round_bf16`), so ``storage_dtype`` differs from the dtype's own name only for bfloat16.

Alternatives rejected: an ml_dtypes dependency for a bfloat16 numpy type (a new dependency for one
rounding function); computing float16 ops in numpy float16 (no BLAS, and accumulating in float16
models no runtime anyone uses).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from enum import StrEnum
from typing import Any, NamedTuple

import numpy as np

from tensor_eqsat.errors import ShapeError


class DType(StrEnum):
    """The element type of a tensor.

    >>> DType.parse("bf16"), DType.BFLOAT16.itemsize, DType.FLOAT16.short
    (<DType.BFLOAT16: 'bfloat16'>, 2, 'fp16')
    """

    FLOAT32 = "float32"
    FLOAT16 = "float16"
    BFLOAT16 = "bfloat16"
    INT64 = "int64"

    @property
    def is_float(self) -> bool:
        return self is not DType.INT64

    @property
    def itemsize(self) -> int:
        """Bytes per element."""
        return _ITEMSIZE[self]

    @property
    def short(self) -> str:
        """The short name people write (``fp32``, ``fp16``, ``bf16``, ``int64``)."""
        return _SHORT[self]

    @property
    def mantissa_bits(self) -> int:
        """Explicit mantissa bits of a float dtype (23, 10, 7); 63 for int64."""
        return _MANTISSA[self]

    @property
    def unit_roundoff(self) -> float:
        """Half the distance from 1 to the next value: the relative error of one rounding."""
        return float(2.0 ** -(self.mantissa_bits + 1))

    @property
    def storage_dtype(self) -> np.dtype[Any]:
        """The numpy dtype holding this dtype's values (float32 for bfloat16; see the module doc)."""
        return np.dtype(_STORAGE[self])

    @property
    def torch_name(self) -> str:
        """The attribute of ``torch`` naming this dtype (``torch.bfloat16``...)."""
        return self.value

    @classmethod
    def parse(cls, text: str | DType) -> DType:
        """A dtype from its name or short name; raises ValueError naming the accepted ones."""
        if isinstance(text, DType):
            return text
        key = str(text).strip().lower()
        for d in cls:
            if key in (d.value, d.short):
                return d
        if key in _ALIASES:
            return cls(_ALIASES[key])
        names = ", ".join(f"{d.value} ({d.short})" for d in cls)
        raise ValueError(f"unknown dtype {text!r} (known: {names})")

    @classmethod
    def of_array(cls, arr: np.ndarray) -> DType:
        """The dtype a numpy array's values are (float32 storage reads as float32)."""
        kind = arr.dtype
        if kind == np.float16:
            return cls.FLOAT16
        if kind.kind in "iub":
            return cls.INT64
        return cls.FLOAT32


_ITEMSIZE = {DType.FLOAT32: 4, DType.FLOAT16: 2, DType.BFLOAT16: 2, DType.INT64: 8}
_SHORT = {DType.FLOAT32: "fp32", DType.FLOAT16: "fp16", DType.BFLOAT16: "bf16", DType.INT64: "int64"}
_MANTISSA = {DType.FLOAT32: 23, DType.FLOAT16: 10, DType.BFLOAT16: 7, DType.INT64: 63}
_STORAGE = {
    DType.FLOAT32: "float32",
    DType.FLOAT16: "float16",
    DType.BFLOAT16: "float32",
    DType.INT64: "int64",
}

_ALIASES = {"float": "float32", "half": "float16"}

DTYPE_NAMES: tuple[str, ...] = tuple(d.value for d in DType)
"""Every dtype's name: the choices of a leaf's ``dtype`` attribute."""

FLOAT_DTYPES: tuple[DType, ...] = (DType.FLOAT32, DType.FLOAT16, DType.BFLOAT16)


class DTypeError(ShapeError):
    """An op's inputs have dtypes it cannot accept (floating inputs of different dtypes).

    A ShapeError, so every place that skips an ill-typed node (rewrites, rule instantiation)
    skips this one too.
    """


def round_bf16(arr: np.ndarray) -> np.ndarray:
    """Float32 values rounded to the nearest bfloat16 (ties to even), kept as float32.

    NaN stays NaN; values beyond bfloat16's range become infinity, as a cast does.

    >>> round_bf16(np.array([1.0, 1.00390625, 1.01171875, 3.14159], dtype=np.float32)).tolist()
    [1.0, 1.0, 1.015625, 3.140625]
    """
    return _rounded(arr, _bf16_chunk)


def round_fp16(arr: np.ndarray) -> np.ndarray:
    """Float32 values rounded to the nearest float16 (ties to even), kept as float32: the values
    of ``arr.astype(float16).astype(float32)``, bit for bit, about three times as fast (the
    mantissa rounded in chunks that stay in cache, float16's subnormals by float32 arithmetic).

    >>> round_fp16(np.array([1.0, 1.00048828125, 1.0014648, 70000.0, 1e-8], dtype=np.float32)).tolist()
    [1.0, 1.0, 1.001953125, inf, 0.0]
    """
    return _rounded(arr, _fp16_chunk)


_ROUND_CHUNK = 1 << 18
"""Elements :func:`round_bf16` and :func:`round_fp16` round at a time (1 MiB of float32)."""

_ChunkRounder = Callable[[np.ndarray, np.ndarray, np.ndarray, np.ndarray], None]


def _rounded(arr: np.ndarray, round_chunk: _ChunkRounder) -> np.ndarray:
    """``arr`` as float32, rounded by ``round_chunk(bits, out, scratch, values)`` one chunk at a
    time: it writes the rounded bits of the chunk's float32 ``values`` (``bits``, their uint32
    view) into ``out``, with ``scratch`` a uint32 buffer of the chunk's size. Chunks stay in
    cache (whole-array passes over a VGG-19's weights took seconds each)."""
    shape = np.shape(arr)
    flat = np.ascontiguousarray(arr, dtype=np.float32).reshape(-1)  # (a 0-d array becomes 1-d here)
    bits = flat.view(np.uint32)
    out = np.empty(flat.shape, dtype=np.uint32)
    scratch = np.empty(min(_ROUND_CHUNK, flat.size), dtype=np.uint32)
    for lo in range(0, flat.size, _ROUND_CHUNK):
        hi = lo + _ROUND_CHUNK
        b = bits[lo:hi]
        round_chunk(b, out[lo:hi], scratch[: b.size], flat[lo:hi])
    return np.asarray(out.view(np.float32).reshape(shape))


def _drop_bits(b: np.ndarray, o: np.ndarray, t: np.ndarray, drop: int) -> None:
    """Float32 bits ``b`` rounded to nearest, ties to even, at the ``drop``-th mantissa bit, into
    ``o`` (the low ``drop`` bits zero); ``t`` is left holding the magnitudes' bits (sign cleared).
    In uint32, only NaNs can wrap around; values past the last finite step round to infinity."""
    np.right_shift(b, drop, out=t)
    t &= 1
    t += (1 << (drop - 1)) - 1
    np.add(t, b, out=o)
    o &= 0xFFFFFFFF ^ ((1 << drop) - 1)
    np.bitwise_and(b, 0x7FFFFFFF, out=t)


def _bf16_chunk(b: np.ndarray, o: np.ndarray, t: np.ndarray, f: np.ndarray) -> None:
    _drop_bits(b, o, t, 16)
    nan = t > 0x7F800000  # (wrapped around: fixed here)
    if nan.any():
        o[nan] = 0x7FC00000 | (b[nan] & 0x80000000)  # a quiet NaN of the same sign


def _fp16_chunk(b: np.ndarray, o: np.ndarray, t: np.ndarray, f: np.ndarray) -> None:
    _drop_bits(b, o, t, 13)
    small = t < 0x38800000  # zero or subnormal in float16 (ReLU outputs: half of them)
    if small.any():
        # A multiple of 2**-24, ties to even: float32's rounding of x + 0.75 (0.75's ulp is
        # 2**-24 and its last mantissa bit even), the sign kept for zeros.
        with np.errstate(invalid="ignore", over="ignore"):  # (NaN and infinity: below)
            q = f + np.float32(0.75)
            q -= np.float32(0.75)
        np.copysign(q, f, out=q)
        np.copyto(o.view(np.float32), q, where=small)
    big = t >= 0x477FF000  # beyond float16's range, infinite or NaN (rare): the cast decides
    if big.any():
        with np.errstate(over="ignore"):
            cast = f[big].astype(np.float16).astype(np.float32)
            o[big] = cast.view(np.uint32)


def round_values(arr: np.ndarray, dtype: DType | str) -> np.ndarray:
    """Float32 ``arr`` rounded to ``dtype``'s values, kept as float32 (what an op of a
    reduced-precision graph stores, computed in float32: io/torch_exec.py's float32 compute)."""
    d = DType.parse(dtype)
    if d is DType.BFLOAT16:
        return round_bf16(arr)
    if d is DType.FLOAT16:
        return round_fp16(arr)
    return np.asarray(arr, dtype=np.float32)


def round_to(arr: np.ndarray, dtype: DType | str) -> np.ndarray:
    """``arr`` rounded to ``dtype`` and held in its storage dtype (see the module docstring).

    Integer and bool arrays pass unchanged (indices, masks).
    """
    d = DType.parse(dtype)
    a = np.asarray(arr)
    if a.dtype.kind in "iub" or not d.is_float:
        return a
    if d is DType.BFLOAT16:
        return round_bf16(a.astype(np.float32, copy=False))
    return a.astype(d.storage_dtype, copy=False)


def widen(arr: np.ndarray) -> np.ndarray:
    """A float array as float32 (exact for float16 and bfloat16); other arrays unchanged."""
    a = np.asarray(arr)
    if a.dtype.kind == "f" and a.dtype != np.float32:
        return a.astype(np.float32)
    return a


def default_infer(op: str, in_dtypes: Sequence[str], n_outputs: int) -> tuple[str, ...]:
    """The dtype rule of an op without its own: outputs take the common dtype of its floating
    inputs (float32 when it has none); floating inputs of different dtypes raise DTypeError.

    >>> default_infer("matmul", ["float16", "float16"], 1)
    ('float16',)
    >>> default_infer("ewadd", ["float16", "bfloat16"], 1)
    Traceback (most recent call last):
    ...
    tensor_eqsat.ir.dtypes.DTypeError: ewadd: inputs have different dtypes: float16, bfloat16
    """
    floats = [d for d in in_dtypes if d != DType.INT64]
    out = floats[0] if floats else DType.FLOAT32.value
    if any(d != out for d in floats):
        raise DTypeError(op, "inputs have different dtypes: " + ", ".join(str(d) for d in in_dtypes))
    return (str(out),) * n_outputs


def evaluate(
    compute: Any, arrays: Sequence[np.ndarray], attrs: Mapping[str, Any], out_dtypes: Sequence[str] | None
) -> tuple[np.ndarray, ...]:
    """Run an op's numpy ``compute`` in float32 from widened inputs, then round each float
    output to its dtype once (``out_dtypes`` None: no rounding, the float32 values)."""
    outs = compute([widen(a) for a in arrays], attrs)
    if out_dtypes is None:
        return tuple(outs)
    return tuple(round_to(o, d) for o, d in zip(outs, out_dtypes, strict=True))


class Tolerance(NamedTuple):
    """How close a result must be to its float32 reference: every element within
    ``atol + rtol * max(|ref|, scale_floor * max|REF|)``, ``max|REF|`` the output's largest
    magnitude (io/equivalence.py). ``scale_floor`` 1 compares every element at the output's
    scale (norm-wise, the usual test for reduced precision: an element that cancels to nearly
    zero carries the rounding error of the large values it was computed from)."""

    rtol: float
    atol: float
    scale_floor: float


def tolerance(dtype: DType | str, *, tf32: bool = False) -> Tolerance:
    """The numeric check's tolerance for a model that runs in ``dtype``; ``tf32``: its float32
    matmuls and convolutions run on TF32 tensor cores (10 mantissa bits, as float16), where the
    check cannot turn TF32 off. Default False.

    Measured on the 13 zoo models (``benchmarks/precision_error.py``): the largest error that
    rounding alone causes, against the float32 reference with the same weights, with a margin.
    A wrong rewrite (a sign flip, swapped operands) is off by the values' own size and fails at
    every one of these (tests/unit/io/test_io_equivalence_dtypes.py).

    >>> tolerance("bf16").rtol > tolerance("fp16").rtol > tolerance("fp32").rtol
    True
    """
    d = DType.parse(dtype)
    if tf32 and d is DType.FLOAT32:
        return TF32_TOLERANCE
    return _TOLERANCE[d]


_TOLERANCE = {
    DType.FLOAT32: Tolerance(1e-3, 1e-4, 1e-2),
    DType.FLOAT16: Tolerance(2e-2, 1e-3, 1.0),
    DType.BFLOAT16: Tolerance(1e-1, 1e-2, 1.0),
    DType.INT64: Tolerance(0.0, 0.0, 1.0),
}
TF32_TOLERANCE = _TOLERANCE[DType.FLOAT16]
"""TF32 keeps float16's 10 mantissa bits (with float32's range), so it shares its tolerance."""


def graph_dtype(dtypes: Sequence[str]) -> DType:
    """The precision a model runs in: the lowest-precision float dtype among ``dtypes``
    (float32 when there is none)."""
    found = [DType.parse(d) for d in dtypes if d != DType.INT64]
    return min(found, key=lambda d: d.mantissa_bits, default=DType.FLOAT32)


def op_dtype(in_dtypes: Sequence[str | None]) -> str | None:
    """The precision an op runs in, from its inputs' dtypes: that of its floating inputs (the
    widest where they differ; integer indices and unknown ones do not vote), None when it has
    none. A cost model prices each op in this dtype (an fp32 island of a bfloat16 graph in fp32).

    >>> op_dtype(["bfloat16", "int64"]), op_dtype(["float32", "bfloat16"]), op_dtype(["int64"])
    ('bfloat16', 'float32', None)
    """
    # Called for every e-node an extraction prices: a dict lookup per input, no parsing.
    best, rank = None, -1
    for d in in_dtypes:
        r = _FLOAT_RANK.get(d) if d is not None else None
        if r is not None and r > rank:
            best, rank = d, r
    return best


_FLOAT_RANK = {d.value: d.mantissa_bits for d in FLOAT_DTYPES}
