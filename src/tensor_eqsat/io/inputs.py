"""Graph inputs of any ONNX element type, and valid data for them.

NLP models start with token ids (int64) and attention masks (int64 or bool). The IR computes on
float32 only, so such an input can only feed ``opaque`` nodes (a Gather into an embedding table,
a Cast, an Equal...), whose payloads declare the input's type: that declaration is where the
type lives, so it survives optimization, JSON files and export without a second table that could
drift. Float32 tensors produced by those nodes flow into the part the optimizer rewrites.

Random data must be valid, or checking and timing a model measures an error path: an integer
input that a Gather uses as indices gets ids in ``[0, n)``, ``n`` the size of the table along the
gathered axis (the smallest such table when it indexes several); any other integer input gets 0
and 1 (an attention mask); a bool input gets False and True. Values are determined by (seed,
input name), as the interpreter's float inputs are, so a Graph and its exported model see the same
data.
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from tensor_eqsat.errors import FormatError, Setting, naming
from tensor_eqsat.io.onnx_common import DTYPE_ELEMS, FLOAT, require_onnx
from tensor_eqsat.ir.graph import Graph
from tensor_eqsat.ir.interpreter import random_input
from tensor_eqsat.ir.types import Shape

if TYPE_CHECKING:
    import onnx

BOOL = 9
"""ONNX's element type code for bool."""

VIEWS = frozenset({"Reshape", "Unsqueeze", "Squeeze", "Flatten", "Identity", "Expand"})
"""Ops whose output holds the values of their first input (rearranged): ids reshaped before
the Gather that uses them are still ids of that table."""


@dataclass(frozen=True)
class InputInfo:
    """What a graph input holds: ONNX element type, and for integer indices the exclusive
    upper bound of valid values (None: not used as indices)."""

    elem_type: int = FLOAT
    bound: int | None = None


def numpy_dtype(elem_type: int) -> np.dtype[Any]:
    """The numpy dtype of an ONNX element type."""
    onnx = require_onnx()
    return np.dtype(onnx.helper.tensor_dtype_to_np_dtype(elem_type))


def input_value(name: str, shape: Shape, info: InputInfo, seed: int = 0) -> np.ndarray:
    """Seeded valid data for one input (see the module docstring).

    >>> input_value("mask", (2, 3), InputInfo(7), seed=0).dtype
    dtype('int64')
    >>> int(input_value("ids", (64,), InputInfo(7, bound=5)).max()) < 5
    True
    """
    if info.elem_type == FLOAT:
        return random_input(name, shape, seed)
    rng = np.random.default_rng([seed, zlib.crc32(name.encode()), 1])
    if info.elem_type == BOOL:
        return rng.integers(0, 2, size=shape).astype(bool)
    dtype = numpy_dtype(info.elem_type)
    if dtype.kind not in "iu":
        return rng.standard_normal(shape).astype(dtype)
    high = 2 if info.bound is None else max(1, info.bound)
    return rng.integers(0, high, size=shape).astype(dtype)


def _merge_bound(infos: dict[str, InputInfo], name: str, elem: int, bound: int | None) -> None:
    old = infos.get(name, InputInfo(elem))
    new_bound = old.bound
    if bound is not None:
        new_bound = bound if new_bound is None else min(new_bound, bound)
    infos[name] = InputInfo(elem, new_bound)


def _gather_bound(node: Any, data_shape: Shape | None) -> int | None:
    """The number of valid indices of a Gather reading ``data_shape``."""
    if data_shape is None:
        return None
    axis = 0
    for a in node.attribute:
        if a.name == "axis":
            axis = int(a.i)
    if not -len(data_shape) <= axis < len(data_shape):
        return None
    return int(data_shape[axis])


def graph_inputs(graph: Graph) -> dict[str, InputInfo]:
    """Every input of ``graph`` by name, with its element type (from the opaque nodes that read
    it; else the element type of the input's IR dtype) and index bound."""
    infos = {graph.name_of(n.id): InputInfo(DTYPE_ELEMS.get(n.dtypes[0], FLOAT)) for n in graph.inputs()}
    if not any(n.op == "opaque" for n in graph.nodes):
        return infos
    from tensor_eqsat.io.opaque import decode_payload

    root: dict[tuple[int, int], str] = {}  # a tensor holding the values of an input
    for n in graph.nodes:
        if n.op == "input":
            root[(n.id, 0)] = graph.name_of(n.id)
            continue
        if n.op != "opaque":
            continue
        model = decode_payload(n.attr_dict()["payload"])
        node = model.graph.node[0]
        declared = {vi.name: vi.type.tensor_type.elem_type for vi in model.graph.input}
        order = [vi.name for vi in model.graph.input]
        init_shapes = {t.name: tuple(int(d) for d in t.dims) for t in model.graph.initializer}
        if node.op_type in VIEWS and n.inputs and n.inputs[0] in root and node.input[0] == order[0]:
            root[(n.id, 0)] = root[n.inputs[0]]
        for pos, ref in enumerate(n.inputs):
            if ref not in root or pos >= len(order):
                continue
            slot = order[pos]
            name = root[ref]
            if graph.nodes[ref[0]].op != "input":
                # A view of the input: its bound counts, its declared type is the view's.
                if node.op_type == "Gather" and len(node.input) > 1 and node.input[1] == slot:
                    data = node.input[0]
                    shape = init_shapes.get(data)
                    if shape is None and data in order:
                        shape = graph.shape_of(n.inputs[order.index(data)])
                    _merge_bound(infos, name, infos[name].elem_type, _gather_bound(node, shape))
                continue
            elem = declared.get(slot, FLOAT)
            bound = None
            if node.op_type == "Gather" and len(node.input) > 1 and node.input[1] == slot:
                data = node.input[0]
                if data in init_shapes:
                    bound = _gather_bound(node, init_shapes[data])
                elif data in order:
                    bound = _gather_bound(node, graph.shape_of(n.inputs[order.index(data)]))
            _merge_bound(infos, name, elem, bound)
    return infos


def model_inputs(model: onnx.ModelProto) -> dict[str, InputInfo]:
    """Every real input of an ONNX model (initializers excluded) with its element type and
    index bound (from the Gathers that use it as indices, shapes from the initializers or from
    ONNX shape inference)."""
    onnx = require_onnx()
    g = model.graph
    inits = {t.name: tuple(int(d) for d in t.dims) for t in g.initializer}
    infos: dict[str, InputInfo] = {}
    for vi in g.input:
        if vi.name not in inits:
            infos[vi.name] = InputInfo(vi.type.tensor_type.elem_type)
    if all(i.elem_type == FLOAT for i in infos.values()):
        return infos
    shapes: dict[str, Shape] = dict(inits)
    try:
        inferred = onnx.shape_inference.infer_shapes(model)
        for vi in list(inferred.graph.value_info) + list(inferred.graph.input):
            dims = vi.type.tensor_type.shape.dim
            if dims and all(d.HasField("dim_value") for d in dims):
                shapes.setdefault(vi.name, tuple(int(d.dim_value) for d in dims))
    except Exception:  # bounds are then taken from the initializers only
        pass
    root = {name: name for name, info in infos.items() if info.elem_type != FLOAT}
    for node in g.node:
        if node.domain not in ("", "ai.onnx") or not node.input:
            continue
        if node.op_type in VIEWS and node.input[0] in root:
            for out in node.output:
                root[out] = root[node.input[0]]
        if node.op_type == "Gather" and len(node.input) > 1 and node.input[1] in root:
            name = root[node.input[1]]
            _merge_bound(infos, name, infos[name].elem_type, _gather_bound(node, shapes.get(node.input[0])))
    return infos


INPUT_SHAPES = Setting("input_shapes={name: (d0, d1, ...)}", "--input-shape NAME=D0,D1,...")
"""How a message asks for static input shapes: the argument in Python, the option on the CLI."""

INPUT_SHAPES_NAME = Setting("input_shapes", "--input-shape")
"""The same setting, named in a message about the shapes given."""


def with_input_shapes(
    model: onnx.ModelProto,
    input_shapes: Mapping[str, Sequence[int]],
    source: str = "model",
    *,
    extra_constants: set[str] | None = None,
) -> onnx.ModelProto:
    """A copy of ``model`` whose named inputs have the given static shapes (the Python form of
    ``--input-shape NAME=D0,D1,...``); shapes recorded for the old input shapes are dropped, so
    that shape inference recomputes them.

    Raises FormatError naming ``source`` for an unknown input or a wrong rank.
    """
    onnx = require_onnx()
    m = onnx.ModelProto()
    m.CopyFrom(model)
    if not input_shapes:
        return m
    inits = {t.name for t in m.graph.initializer} | (extra_constants or set())
    declared = {i.name for i in m.graph.input if i.name not in inits}
    unknown = sorted(set(input_shapes) - declared)
    if unknown:
        known = ", ".join(sorted(declared))
        raise naming(
            FormatError,
            f"{source}: ",
            INPUT_SHAPES_NAME,
            f" names unknown inputs {unknown} (inputs: {known})",
        )
    for inp in m.graph.input:
        if inp.name in input_shapes:
            dims = [int(d) for d in input_shapes[inp.name]]
            shape = inp.type.tensor_type.shape
            if len(shape.dim) != len(dims):
                raise naming(
                    FormatError,
                    f"{source}: input {inp.name!r} has rank {len(shape.dim)}, ",
                    INPUT_SHAPES_NAME,
                    f" gives {len(dims)} dims",
                )
            for dim, v in zip(shape.dim, dims, strict=True):
                dim.Clear()
                dim.dim_value = v
    del m.graph.value_info[:]
    for out in m.graph.output:
        out.type.tensor_type.ClearField("shape")
    return m


def make_feed(
    shapes: Mapping[str, Shape], infos: Mapping[str, InputInfo], seed: int = 0
) -> dict[str, np.ndarray]:
    """Valid seeded data for each named input."""
    return {
        name: input_value(name, shape, infos.get(name, InputInfo()), seed) for name, shape in shapes.items()
    }


__all__ = [
    "INPUT_SHAPES",
    "INPUT_SHAPES_NAME",
    "InputInfo",
    "graph_inputs",
    "input_value",
    "make_feed",
    "model_inputs",
    "numpy_dtype",
    "with_input_shapes",
]
