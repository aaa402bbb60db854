"""``opaque``: an ONNX operator the IR does not model, kept verbatim and run by onnxruntime.

Its shapes are stored flat and rank-prefixed (:func:`encode_shapes`), since attributes are flat
typed values.
"""

from __future__ import annotations

import base64
import binascii
import functools
from collections.abc import Sequence
from typing import Any

import numpy as np

from tensor_eqsat.errors import GraphError, ShapeError
from tensor_eqsat.ir.ops_common import A, out_volume_flops
from tensor_eqsat.ir.opspec import AttrSpec, OpSpec
from tensor_eqsat.ir.symbolic import SymDim
from tensor_eqsat.ir.types import OpKind, Shape

SPECS: list[OpSpec] = []
"""This family's ops, in registration order (:mod:`tensor_eqsat.ir.ops` registers them)."""


def encode_shapes(shapes: Sequence[Shape]) -> tuple[int, ...]:
    """Flatten a list of shapes into one int tuple, each shape prefixed by its rank.

    Attributes are flat typed values, so ``opaque`` stores its shapes this way.

    >>> encode_shapes([(2, 3), (), (4,)])
    (2, 2, 3, 0, 1, 4)
    >>> decode_shapes((2, 2, 3, 0, 1, 4))
    ((2, 3), (), (4,))
    """
    out: list[int] = []
    for s in shapes:
        out.append(len(s))
        out.extend(d if isinstance(d, SymDim) else int(d) for d in s)
    return tuple(out)


def decode_shapes(flat: Sequence[int]) -> tuple[Shape, ...]:
    """Inverse of :func:`encode_shapes`; raises ValueError on a malformed encoding."""
    shapes = []
    i = 0
    while i < len(flat):
        rank = flat[i]
        if isinstance(rank, SymDim) or rank < 0 or i + 1 + rank > len(flat):
            raise ValueError(f"malformed shape encoding {tuple(flat)}")
        shapes.append(tuple(d if isinstance(d, SymDim) else int(d) for d in flat[i + 1 : i + 1 + rank]))
        i += 1 + rank
    return tuple(shapes)


def _shapes_ok(flat: tuple[int, ...]) -> bool:
    try:
        return all(d >= 0 for s in decode_shapes(flat) for d in s)
    except ValueError:
        return False


@functools.lru_cache(maxsize=256)
def _payload_ok(payload: str) -> bool:
    """Attribute check: base64 of an ONNX model holding one node, as the importer writes it.

    Checked when the graph is built or loaded, so a damaged payload is an error naming the node
    there, not a crash in onnxruntime after a whole optimization. Without the onnx extra only
    the base64 is checked (nothing can run the node then anyway).
    """
    try:
        raw = base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError):
        return False
    try:
        import onnx
    except ImportError:
        return bool(raw)
    try:
        model = onnx.load_from_string(raw)
    except Exception:  # protobuf's DecodeError and friends: not a model
        return False
    return len(model.graph.node) == 1


def _opaque_infer(shapes: Sequence[Shape], a: A) -> tuple[Shape, ...]:
    expected = decode_shapes(a["input_shapes"])
    got = tuple(tuple(s) for s in shapes)
    if got != expected:
        raise ShapeError(
            "opaque",
            f"{a['op_type']} was imported for input shapes {list(expected)}",
            shapes,
            attr="input_shapes",
        )
    return decode_shapes(a["output_shapes"])


@functools.lru_cache(maxsize=256)
def _opaque_session(payload: str) -> Any:
    # Imported lazily: only graphs that hold opaque nodes need onnxruntime.
    try:
        import onnxruntime as ort
    except ImportError:  # pragma: no cover - onnxruntime is part of the onnx extra
        raise GraphError(
            "opaque nodes run through onnxruntime, which is not installed (pip install 'tensor-eqsat[onnx]')"
        ) from None
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.inter_op_num_threads = 1
    opts.log_severity_level = 3
    return ort.InferenceSession(
        base64.b64decode(payload), sess_options=opts, providers=["CPUExecutionProvider"]
    )


@functools.lru_cache(maxsize=256)
def _payload_dtypes(payload: str) -> tuple[str, ...] | None:
    """The dtypes of the payload node's outputs as its model declares them; None when they are
    not all IR dtypes or onnx is not installed (then the outputs read as float32)."""
    try:
        import onnx
    except ImportError:
        return None
    model = onnx.load_from_string(base64.b64decode(payload))
    out = []
    for vi in model.graph.output:
        elem = vi.type.tensor_type.elem_type
        if elem == onnx.TensorProto.BFLOAT16:
            out.append("bfloat16")
            continue
        try:
            kind = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(elem))
        except (KeyError, TypeError, ValueError):
            return None
        # Integers and bools (ids, masks) are all "not a float" to the IR.
        out.append("int64" if kind.kind in "iub" else "float16" if kind == np.float16 else "float32")
    return tuple(out)


def _opaque_dtype(in_dtypes: Sequence[str], a: A, n_outputs: int) -> tuple[str, ...]:
    # The payload declares its types (an opaque node may read ids and write floats): no vote.
    found = _payload_dtypes(a["payload"])
    return found if found is not None and len(found) == n_outputs else ("float32",) * n_outputs


_ORT_TYPES = {"tensor(float16)": np.float16, "tensor(float)": np.float32}


def _opaque_compute(x: Sequence[np.ndarray], a: A) -> tuple[np.ndarray, ...]:
    sess = _opaque_session(a["payload"])
    ins = sess.get_inputs()
    # The interpreter hands every op float32 (ir/dtypes.py); the payload takes what it declares.
    feed = {}
    for i, v in zip(ins, x, strict=True):
        arr = np.asarray(v)
        feed[i.name] = arr.astype(_ORT_TYPES.get(i.type, arr.dtype), copy=False)
    outs = sess.run(None, feed)
    return tuple(np.asarray(o) for o in outs)


SPECS.append(
    OpSpec(
        name="opaque",
        inputs=("xs",),
        attrs=(
            AttrSpec("op_type", "str", check=bool, check_msg="must be non-empty"),
            AttrSpec("domain", "str", default=""),
            AttrSpec(
                "payload",
                "str",
                check=_payload_ok,
                check_msg="must be a base64-encoded one-node ONNX model (as import_onnx writes it)",
            ),
            AttrSpec("input_shapes", "dims", default=(), check=_shapes_ok, check_msg="malformed shapes"),
            AttrSpec("output_shapes", "dims", check=_shapes_ok, check_msg="malformed shapes"),
        ),
        infer=_opaque_infer,
        compute=_opaque_compute,
        infer_dtype=_opaque_dtype,
        flops=out_volume_flops(1),
        # Costed as a generic memory-bound op (read inputs, write outputs): the cost models need
        # no special case, and the op's true cost is the same in the original and optimized graph.
        kind=OpKind.ELEMENTWISE,
        variadic=True,
        min_inputs=0,
        doc="an ONNX op the IR does not model, kept verbatim and run by onnxruntime; never rewritten",
    )
)
