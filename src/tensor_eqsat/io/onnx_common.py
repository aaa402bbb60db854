"""Helpers shared by the ONNX importer and exporter: loading models, element types, versions.

onnx and onnxruntime are optional dependencies (the ``onnx`` extra); :func:`require_onnx` turns
their absence into an error naming the extra instead of an ImportError deep in a call.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tensor_eqsat.errors import FormatError, TensorEqsatError

if TYPE_CHECKING:
    import onnx

MIN_OPSET = 13
"""Lowest default-domain opset the importer reads natively; older models are converted to it."""

DEFAULT_OPSET = 21
"""Opset the exporter writes when nothing in the graph asks for another one."""


FLOAT = 1
"""onnx.TensorProto.FLOAT: the element type of float32 tensors (the IR's default)."""

FLOAT16 = 10
BFLOAT16 = 16
INT64 = 7

FLOAT_ELEM_DTYPES = {FLOAT: "float32", FLOAT16: "float16", BFLOAT16: "bfloat16"}
"""ONNX element types the IR computes with, and their IR dtype names."""

DTYPE_ELEMS = {v: k for k, v in FLOAT_ELEM_DTYPES.items()}
"""IR float dtype name -> ONNX element type."""


def is_float_array(arr: Any) -> bool:
    """True for a float32, float16 or bfloat16 array (onnx gives bfloat16 as ml_dtypes')."""
    return str(getattr(arr, "dtype", "")) in ("float32", "float16", "bfloat16")


def const_dtype(arr: Any) -> str:
    """The IR dtype of a float constant array (see :func:`is_float_array`)."""
    name = str(arr.dtype)
    if name not in DTYPE_ELEMS:
        raise ValueError(f"constant of element type {name} is not float32, float16 or bfloat16")
    return name


def widen_const(arr: Any) -> Any:
    """A float constant as a float32 numpy array (exact for float16 and bfloat16)."""
    import numpy as np

    return np.asarray(arr).astype(np.float32)


def require_onnx() -> Any:
    """Import and return the ``onnx`` module, or raise TensorEqsatError naming the extra."""
    try:
        import onnx
    except ImportError:  # pragma: no cover - onnx is part of the dev and onnx extras
        raise TensorEqsatError(
            "ONNX support needs the onnx package: pip install 'tensor-eqsat[onnx]'"
        ) from None
    return onnx


def require_ort() -> Any:
    """Import and return ``onnxruntime``, or raise TensorEqsatError naming the extra."""
    try:
        import onnxruntime
    except ImportError:  # pragma: no cover
        raise TensorEqsatError(
            "running ONNX models needs onnxruntime: pip install 'tensor-eqsat[onnx]'"
        ) from None
    return onnxruntime


def describe_source(source: Any) -> str:
    """A short name for a model source, used in error messages."""
    if isinstance(source, str | os.PathLike):
        return str(source)
    if isinstance(source, bytes):
        return "<model bytes>"
    return "<ModelProto>"


def load_model(source: Any) -> onnx.ModelProto:
    """Read a model from a path, bytes or a ModelProto; FormatError names the file on failure.

    External tensor data next to a file is loaded too. A truncated or corrupt file fails here with
    the file's name, rather than later with a protobuf message.
    """
    onnx = require_onnx()
    name = describe_source(source)
    if isinstance(source, onnx.ModelProto):
        return source
    try:
        if isinstance(source, bytes):
            model = onnx.load_from_string(source)
        else:
            path = Path(source)
            if not path.is_file():
                raise FormatError(f"{name}: no such file")
            model = onnx.load(str(path))
    except FormatError:
        raise
    except Exception as exc:  # protobuf DecodeError, OSError, ...: all mean "not a readable model"
        raise FormatError(f"{name}: not a readable ONNX model ({type(exc).__name__}: {exc})") from exc
    if not model.HasField("graph"):
        raise FormatError(f"{name}: not an ONNX model (no graph)")
    return model


def default_opset(model: onnx.ModelProto) -> int:
    """The model's opset for the default ("" / "ai.onnx") domain; 1 when it declares none."""
    for imp in model.opset_import:
        if imp.domain in ("", "ai.onnx"):
            return int(imp.version)
    return 1


def ir_version_for(opset_imports: Any) -> int:
    """The lowest IR version that allows these opset imports.

    Exported models get this rather than onnx's default: onnx 1.23 stamps IR 14, which
    onnxruntime 1.31 rejects (it reads up to 13); opset 21 needs only IR 10.
    """
    onnx = require_onnx()
    try:
        need = int(onnx.helper.find_min_ir_version_for(list(opset_imports), ignore_unknown=True))
    except Exception:
        need = 7
    return max(need, 7)


def elem_type_name(elem_type: int) -> str:
    """'float', 'int64', ... for an onnx.TensorProto element type."""
    onnx = require_onnx()
    try:
        return str(onnx.helper.tensor_dtype_to_np_dtype(elem_type))
    except Exception:
        return f"type {elem_type}"
