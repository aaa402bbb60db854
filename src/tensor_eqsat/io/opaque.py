"""Opaque nodes: ONNX operators the IR does not model, kept verbatim.

The importer turns such a node into one ``opaque`` op (see :mod:`tensor_eqsat.ir.ops`). Its
``payload`` is a base64, self-contained, single-node ONNX model: the node with its attributes,
its small constant inputs as initializers, and typed inputs ``in0..`` for the tensors the IR
feeds it. Being a whole model, the payload runs in onnxruntime as it is (the op's numpy
semantics) and the exporter inlines it back, renaming inputs, outputs and constants.

Alternatives rejected: storing only the serialized NodeProto (it cannot carry the constant
inputs nor the opset the node was written for, and an int64 ``pads`` input would then have to
become a float IR weight); skipping the node as TASO did (a silent wrong answer).
"""

from __future__ import annotations

import base64
import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from tensor_eqsat.errors import FormatError
from tensor_eqsat.io.onnx_common import default_opset, ir_version_for, require_onnx
from tensor_eqsat.io.onnx_dims import onnx_dims
from tensor_eqsat.ir.ops import encode_shapes
from tensor_eqsat.ir.types import Shape

if TYPE_CHECKING:
    import onnx


@dataclass(frozen=True)
class TensorSlot:
    """A node input fed by an IR tensor (an input of the opaque op)."""

    elem_type: int
    shape: Shape


@dataclass(frozen=True)
class ConstSlot:
    """A node input holding a constant, embedded in the payload."""

    value: np.ndarray


Slot = TensorSlot | ConstSlot | None
"""One node input: an IR tensor, an embedded constant, or None for an omitted optional input."""


def build_opaque(
    node: onnx.NodeProto,
    slots: Sequence[Slot],
    outputs: Sequence[tuple[int, Shape] | None],
    opset_imports: Sequence[onnx.OperatorSetIdProto],
    functions: Sequence[onnx.FunctionProto] = (),
    *,
    where: str = "",
) -> dict[str, Any]:
    """The attributes of an ``opaque`` op wrapping ``node``.

    slots: one entry per node input (see :data:`Slot`); the opaque op's inputs are the
        TensorSlots, in order.
    outputs: one (element type, shape) per node output, None for an omitted output; the opaque
        op's outputs are the present ones, in order.
    opset_imports / functions: copied from the source model so the node keeps its meaning.
    where: names the node in errors.

    Raises FormatError when the single-node model is not valid ONNX (for instance a control-flow
    node whose body reads tensors of the enclosing graph).
    """
    onnx = require_onnx()
    helper = onnx.helper
    in_names: list[str] = []
    graph_inputs: list[Any] = []
    inits: list[Any] = []
    in_shapes: list[Shape] = []
    for i, slot in enumerate(slots):
        if slot is None:
            in_names.append("")
        elif isinstance(slot, TensorSlot):
            name = f"in{len(graph_inputs)}"
            in_names.append(name)
            graph_inputs.append(helper.make_tensor_value_info(name, slot.elem_type, onnx_dims(slot.shape)))
            in_shapes.append(tuple(slot.shape))
        else:
            name = f"const{i}"
            in_names.append(name)
            inits.append(onnx.numpy_helper.from_array(np.asarray(slot.value), name))
    out_names: list[str] = []
    graph_outputs: list[Any] = []
    out_shapes: list[Shape] = []
    for j, out in enumerate(outputs):
        if out is None:
            out_names.append("")
            continue
        name = f"out{j}"
        out_names.append(name)
        graph_outputs.append(helper.make_tensor_value_info(name, out[0], onnx_dims(out[1])))
        out_shapes.append(tuple(out[1]))
    copy = onnx.NodeProto()
    copy.CopyFrom(node)
    del copy.input[:]
    del copy.output[:]
    copy.input.extend(in_names)
    copy.output.extend(out_names)
    graph = helper.make_graph([copy], "opaque", graph_inputs, graph_outputs, initializer=inits)
    model = helper.make_model(graph, opset_imports=list(opset_imports), functions=list(functions))
    model.ir_version = ir_version_for(model.opset_import)
    try:
        onnx.checker.check_model(model)
    except Exception as exc:
        text = " ".join(str(exc).split())  # the checker's message spans lines
        raise FormatError(f"{where}: cannot keep {node.op_type} as an opaque node: {text}") from exc
    return {
        "op_type": node.op_type,
        "domain": node.domain,
        "payload": base64.b64encode(model.SerializeToString()).decode("ascii"),
        "input_shapes": encode_shapes(in_shapes),
        "output_shapes": encode_shapes(out_shapes),
    }


@functools.lru_cache(maxsize=256)
def _decode(payload: str) -> bytes:
    return base64.b64decode(payload)


def decode_payload(payload: str) -> onnx.ModelProto:
    """The single-node model of an opaque op (a fresh copy the caller may modify)."""
    onnx = require_onnx()
    return onnx.load_from_string(_decode(payload))


def payload_opset(payload: str) -> int:
    """The default-domain opset an opaque node was written for."""
    return default_opset(decode_payload(payload))


def convert_payload(model: onnx.ModelProto, target_opset: int, *, where: str = "") -> onnx.ModelProto:
    """The payload model converted to ``target_opset`` (onnx's version converter).

    Raises FormatError naming the node when the converter has no adapter for it.
    """
    onnx = require_onnx()
    if default_opset(model) == target_opset:
        return model
    try:
        out = onnx.version_converter.convert_version(model, target_opset)
    except Exception as exc:
        op = model.graph.node[0].op_type
        raise FormatError(
            f"{where}: cannot convert opaque {op} from opset {default_opset(model)} to {target_opset}: {exc}"
        ) from exc
    return out
