"""ONNX export: a :class:`~tensor_eqsat.ir.graph.Graph` becomes an ONNX model onnxruntime runs.

Algorithm. Work out which tensors the model must produce (:func:`observable_outputs`: a
``noop`` output, which only joins tensors into one root as TENSAT's models do, is replaced by the
tensors it joins), and which nodes depend on weights only. Those weight-only subgraphs (``merge``,
``enlarge``, concatenated or split weights, anything whose inputs are all weights) are evaluated
with the op's numpy semantics and written as initializers, as a deployment would fold them at
load time. Weights carry their data when the Graph has it; otherwise they get the reference
interpreter's seeded random values for their name, so onnxruntime and the interpreter compute the
same function. Every other op maps to one ONNX node, except that fused activations become a
separate Relu/Sigmoid/Tanh node and SAME padding becomes explicit (asymmetric) pads. Opaque ops
are inlined from their payload. The model passes ``onnx.checker`` (full check) before it is
returned.

Large weights. VGG-19 exports 548 MB of initializers, and every copy of them costs seconds on a
loaded CPU (the never-slower guard, the check and the write each export the model). So each
initializer's bytes are made once (``ndarray.tobytes``) and set once, in place, in the model's
own graph (``initializer.add()``: building TensorProtos apart and ``make_graph`` copied each into
the graph, and ``make_model`` copied the graph again); the size of a model is the sum of the
arrays' sizes, known while building (``ByteSize`` walked 548 MB for 2 s); and the checker sees a
skeleton, the model before its initializers over :data:`CHECK_DETACH_BYTES` are added, those
declared as graph inputs of their type and shape instead (the importer's way for models over
2 GiB, issue 36 item 6): serializing the whole model for the checker took longer than writing it.
What the skeleton does not check, that an initializer's bytes match its type and shape, holds by
construction (they are the bytes of a numpy array of that shape).

Versions: the default-domain opset is the highest of 13, what the ops need (LayerNormalization
17, Gelu 20, bfloat16 tensors 22) and the opset the opaque payloads were written for (payloads
older than the target are converted with onnx's version converter); the IR version is the lowest
that allows it (10 for opset 21), because onnx 1.23 stamps IR 14 by default, which onnxruntime 1.31 rejects.

Alternatives rejected: exporting weight-only ops as ONNX nodes (``merge`` has no ONNX
counterpart, and folding them is what a runtime does anyway, so both the original and the
optimized model are measured the same way); keeping fused activations as attributes of a custom
op (not runnable elsewhere).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from tensor_eqsat.errors import GraphError, TensorEqsatError
from tensor_eqsat.io.onnx_common import (
    BFLOAT16,
    DEFAULT_OPSET,
    DTYPE_ELEMS,
    INT64,
    MIN_OPSET,
    ir_version_for,
    require_onnx,
)
from tensor_eqsat.io.onnx_dims import DimTensors, dim_sources, onnx_dims, set_model_symbols
from tensor_eqsat.io.onnx_files import save_model
from tensor_eqsat.io.opaque import convert_payload, decode_payload, payload_opset
from tensor_eqsat.io.plan import (
    fold_weights,
    folded_reads,
    live_nodes,
    observable_outputs,
    weight_only_nodes,
)
from tensor_eqsat.ir.dtypes import round_to
from tensor_eqsat.ir.graph import Graph, Node, TensorRef
from tensor_eqsat.ir.ops import same_padding
from tensor_eqsat.ir.types import Activation

if TYPE_CHECKING:
    import onnx

ONNX_ACTIVATIONS = {a.value: a.onnx_op for a in Activation if a.onnx_op is not None}

OP_MIN_OPSET = {"layernorm": 17, "gelu": 20, "hardswish": 14, "mean": 18}
"""Ops whose ONNX counterpart needs a newer opset than :data:`MIN_OPSET`."""
BFLOAT16_OPSET = 22
"""The opset a graph with bfloat16 tensors is written at, at least: ONNX gave bfloat16 to Conv,
ConvTranspose, the pools and most activations there (a bfloat16 ResNet-50 was refused by the
checker at opset 21)."""

CHECK_DETACH_BYTES = 1 << 16
"""Initializers larger than this are declared graph inputs in the skeleton ``onnx.checker`` sees
(see the module docstring). Every constant that shape inference reads (a Reshape's shape, a
Slice's starts, a Pad's pads) is a few dozen bytes."""


def export_onnx(
    graph: Graph,
    path: str | os.PathLike[str] | None = None,
    *,
    output_names: Sequence[str] | None = None,
    opset: int | None = None,
    seed: int = 0,
    check: bool = True,
) -> onnx.ModelProto:
    """Write ``graph`` as an ONNX model (to ``path`` when given) and return the ModelProto.

    output_names: names of the graph outputs (after noop expansion, see
        :func:`observable_outputs`); default ``output_0``, ``output_1``, ... Pass
        ``onnx_output_names(original_model)`` to keep a model's names.
    opset: default-domain opset to write; default: the lowest that covers the ops and the opaque
        payloads (at least 13).
    seed: seed of the random values given to weights without data (the interpreter's). Default 0.
    check: run ``onnx.checker`` with full shape checking. Default True.

    Input and weight names are kept. The file is written atomically. Raises GraphError for a
    graph that cannot be expressed (a noop read by another op, an opset too old for an op).

    >>> g = Graph(); x = g.input((1, 3, 8, 8), name="x"); w = g.weight((4, 3, 3, 3))
    >>> g.output(g.conv2d(x, w, stride=(2, 2), activation="relu"))
    >>> m = export_onnx(g)
    >>> [n.op_type for n in m.graph.node], list(m.graph.node[0].attribute[2].ints)
    (['Conv', 'Relu'], [0, 0, 1, 1])
    """
    onnx = require_onnx()
    graph.validate()
    outputs = observable_outputs(graph)
    if output_names is not None and len(output_names) != len(outputs):
        raise GraphError(f"export: {len(output_names)} output names for {len(outputs)} outputs")
    leaf_names = {graph.name_of(n.id) for n in graph.nodes if n.spec.is_leaf}
    if output_names is None:
        names = []
        for i in range(len(outputs)):
            name = f"output_{i}"
            while name in leaf_names:
                name = f"_{name}"
            names.append(name)
    else:
        names = list(output_names)
    # A name may be listed twice for the same tensor (valid ONNX: a model may list an output
    # twice, and onnxruntime returns it twice); for two tensors it is an error.
    named: dict[str, TensorRef] = {}
    for ref, name in zip(outputs, names, strict=True):
        if named.setdefault(name, ref) != ref:
            raise GraphError(f"export: output names are not unique: {names}")
    # An output may keep a leaf's name only when it is that leaf (an input passed through, a
    # constant output): ONNX lists the value itself as the output.
    same = {name for ref, name in zip(outputs, names, strict=True) if _leaf_named(graph, ref, name)}
    clash = sorted((set(names) & leaf_names) - same)
    if clash:
        raise GraphError(f"export: output names {clash} are already input or weight names")
    ctx = _Exporter(onnx, graph, outputs, names, opset, seed)
    model = ctx.build()
    if check:
        try:
            onnx.checker.check_model(ctx.skeleton(model), full_check=True)
        except Exception as exc:
            text = " ".join(str(exc).split())  # the checker's message spans lines
            raise TensorEqsatError(f"export produced an invalid ONNX model: {text}") from exc
    ctx.add_initializers(model)
    if path is not None:
        save_model(model, path, checked=check)
    return model


def _leaf_named(graph: Graph, ref: TensorRef, name: str) -> bool:
    """True when output ``ref`` is an input or weight called ``name``."""
    node = graph.nodes[ref[0]]
    return node.spec.is_leaf and graph.name_of(node.id) == name


@dataclass
class _Exporter:
    onnx: Any
    graph: Graph
    outputs: list[TensorRef]
    output_names: list[str]
    opset: int | None
    seed: int
    nodes: list[Any] = field(default_factory=list)
    inits: list[Any] = field(default_factory=list)
    """Initializers in order: TensorProtos (an opaque payload's), or :class:`_Raw` arrays."""
    used: set[str] = field(default_factory=set)
    names: dict[TensorRef, str] = field(default_factory=dict)
    elem_types: dict[TensorRef, int] = field(default_factory=dict)
    opsets: dict[str, int] = field(default_factory=dict)
    functions: dict[tuple[str, str], Any] = field(default_factory=dict)
    _dims: DimTensors | None = None

    def fresh(self, base: str) -> str:
        name, k = base, 1
        while name in self.used:
            name = f"{base}_{k}"
            k += 1
        self.used.add(name)
        return name

    def const(self, base: str, value: np.ndarray, dtype: str | None = None) -> str:
        """A new initializer holding ``value``; a float value rounded to ``dtype`` when given."""
        name = self.fresh(base)
        self.inits.append(self.tensor_proto(value, name, dtype))
        return name

    def tensor_proto(self, value: np.ndarray, name: str, dtype: str | None = None) -> _Raw:
        """``value`` as an initializer in the IR dtype ``dtype`` (default: the array's own type);
        bfloat16, held as float32 values (ir/dtypes.py), is written as ONNX BFLOAT16. Its bytes
        are made when the model gets its initializers (:meth:`add_initializers`)."""
        arr = np.asarray(value)
        if dtype is not None and arr.dtype.kind in "f" and dtype in DTYPE_ELEMS:
            arr = round_to(arr, dtype)
            if dtype == "bfloat16":
                bits = (np.ascontiguousarray(arr, dtype=np.float32).view(np.uint32) >> 16).astype(np.uint16)
                return _Raw(name, BFLOAT16, bits)
        return _Raw(name, None, arr)

    def skeleton(self, model: onnx.ModelProto) -> onnx.ModelProto:
        """``model`` (built, without initializers) as the checker sees it: the initializers up
        to :data:`CHECK_DETACH_BYTES`, the larger ones declared graph inputs (a copy; ``model``
        is unchanged)."""
        helper = self.onnx.helper
        skeleton = self.onnx.ModelProto()
        skeleton.CopyFrom(model)
        graph = skeleton.graph
        for init in self.inits:
            if isinstance(init, _Raw) and init.array.nbytes > CHECK_DETACH_BYTES:
                elem = init.elem if init.elem is not None else self._elem(init.array)
                graph.input.append(helper.make_tensor_value_info(init.name, elem, list(init.array.shape)))
            else:
                self._add(graph, init)
        return skeleton

    def add_initializers(self, model: onnx.ModelProto) -> None:
        """Add the initializers to ``model``'s graph, in order, each made in place."""
        for init in self.inits:
            self._add(model.graph, init)

    def _elem(self, arr: np.ndarray) -> int:
        return int(self.onnx.helper.np_dtype_to_tensor_dtype(arr.dtype))

    def _add(self, graph: Any, init: Any) -> None:
        if not isinstance(init, _Raw):
            graph.initializer.append(init)  # an opaque payload's TensorProto
            return
        arr = init.array
        if init.elem is None and (arr.dtype.kind not in "biuf" or arr.dtype.byteorder == ">"):
            # Strings, big-endian data: onnx's own conversion (rare, and small).
            graph.initializer.append(self.onnx.numpy_helper.from_array(arr, init.name))
            return
        t = graph.initializer.add()
        t.name = init.name
        t.data_type = init.elem if init.elem is not None else self._elem(arr)
        t.dims.extend(arr.shape)
        t.raw_data = np.ascontiguousarray(arr).tobytes()  # the one copy of the data

    def dims(self, base: str, dims: Sequence[Any]) -> str:
        """A 1-D int64 tensor of ``dims``: a constant, or computed from the inputs' shapes where
        a dim is symbolic (io/onnx_dims.py)."""
        if self._dims is None:
            inputs = [(self.graph.name_of(n.id), n.shapes[0]) for n in self.graph.inputs()]
            self._dims = DimTensors(dim_sources(inputs), self.node, self.const, self.fresh)
        return self._dims.shape_tensor(base, dims)

    def dtype_in(self, n: Node) -> str:
        """The dtype of ``n``'s first input: what the float constants of its ONNX nodes take."""
        return self.graph.dtype_of(n.inputs[0])

    def node(self, op_type: str, inputs: Sequence[str], outputs: Sequence[str], **attrs: Any) -> None:
        name = self.fresh(f"{op_type}_{len(self.nodes)}")
        self.nodes.append(
            self.onnx.helper.make_node(op_type, list(inputs), list(outputs), name=name, **attrs)
        )

    # -- planning ------------------------------------------------------------------------------
    def _target_opset(self, live: set[int]) -> int:
        need = MIN_OPSET
        payloads = []
        for nid in live:
            n = self.graph.nodes[nid]
            need = max(need, OP_MIN_OPSET.get(n.op, MIN_OPSET))
            if "bfloat16" in n.dtypes:
                need = max(need, BFLOAT16_OPSET)
            if n.op == "opaque":
                payloads.append(payload_opset(n.spec.attr(n.attrs, "payload")))
        need = max([need, *payloads])
        if self.opset is None:
            return need if payloads else max(need, DEFAULT_OPSET)
        if self.opset < need:
            raise GraphError(f"export: opset {self.opset} is too old for this graph (needs {need})")
        return self.opset

    def build(self) -> onnx.ModelProto:
        """The model's nodes, inputs and outputs; its initializers are in :attr:`inits`."""
        helper = self.onnx.helper
        g = self.graph
        live = live_nodes(g, self.outputs)
        const = weight_only_nodes(g) & live
        self.target = self._target_opset(live)
        self.opsets[""] = self.target
        self.used.update(g.name_of(n.id) for n in g.nodes if n.spec.is_leaf)
        self.used.update(self.output_names)
        # Outputs of computed ops take the output names directly; leaves, folded constants and
        # tensors listed twice go through an Identity.
        direct: dict[TensorRef, str] = {}
        for ref, name in zip(self.outputs, self.output_names, strict=True):
            n = g.nodes[ref[0]]
            if ref not in direct and not n.spec.is_leaf and n.id not in const:
                direct[ref] = name
        # Only what an initializer holds is kept: the weight transforms' intermediates are released.
        held = folded_reads(g, const, live, self.outputs)
        values = fold_weights(g, const, seed=self.seed, keep=held)
        graph_inputs = []
        from tensor_eqsat.io.inputs import graph_inputs as input_infos

        infos = input_infos(g)
        for n in g.nodes:
            if n.op == "input":
                name = g.name_of(n.id)
                self.names[(n.id, 0)] = name
                elem = infos[name].elem_type if name in infos else _elem_of(n.dtypes[0])
                graph_inputs.append(helper.make_tensor_value_info(name, elem, onnx_dims(n.shapes[0])))
        for n in g.nodes:
            if n.id not in live or n.op == "input":
                continue
            if n.id in const:
                needed = [i for i in range(len(n.shapes)) if (n.id, i) in held]
                for i in needed:
                    base = g.name_of(n.id) if n.op == "weight" else f"{n.op}_{n.id}"
                    if n.op == "weight":
                        self.inits.append(self.tensor_proto(values[(n.id, 0)], base, n.dtypes[0]))
                        name = base
                    else:
                        part = base if len(n.shapes) == 1 else f"{base}_{i}"
                        name = self.const(part, values[(n.id, i)], n.dtypes[i])
                    self.names[(n.id, i)] = name
                continue
            outs = []
            for i in range(len(n.shapes)):
                ref = (n.id, i)
                outs.append(
                    direct.get(ref) or self.fresh(f"{n.op}_{n.id}" + (f"_{i}" if len(n.shapes) > 1 else ""))
                )
                self.names[ref] = outs[-1]
            ins = [self.names[r] for r in n.inputs]
            emit = _EMITTERS.get(n.op)
            if emit is None:
                raise GraphError(f"export: node {n.id} ({n.op}) has no ONNX mapping")
            emit(self, n, ins, outs)
        graph_outputs = []
        done: set[TensorRef] = set()
        listed: set[str] = set()
        for ref, name in zip(self.outputs, self.output_names, strict=True):
            src = self.names[ref]
            if name not in listed and src != name and (direct.get(ref) != name or ref in done):
                self.node("Identity", [src], [name])
            done.add(ref)
            listed.add(name)
            elem = self.elem_types.get(ref) or _elem_of(g.dtype_of(ref))
            graph_outputs.append(helper.make_tensor_value_info(name, elem, onnx_dims(g.shape_of(ref))))
        # Without initializers: they are added in place, after the check (see add_initializers).
        onnx_graph = helper.make_graph(self.nodes, "tensor_eqsat", graph_inputs, graph_outputs)
        opset_imports = [helper.make_opsetid(d, v) for d, v in sorted(self.opsets.items())]
        model = helper.make_model(
            onnx_graph,
            opset_imports=opset_imports,
            functions=list(self.functions.values()),
            producer_name="tensor-eqsat",
        )
        model.ir_version = ir_version_for(model.opset_import)
        set_model_symbols(model, g.symbols())  # the hints and ranges, for whoever reads it next
        return model


@dataclass(frozen=True)
class _Raw:
    """An initializer to be made from an array: ``elem`` its ONNX element type when the array's
    dtype does not say it (bfloat16 bits held as uint16), else None."""

    name: str
    elem: int | None
    array: np.ndarray


def _elem_of(dtype: str) -> int:
    """The ONNX element type of an IR dtype (int64 for the IR's integer tensors)."""
    return DTYPE_ELEMS.get(dtype, INT64)


# ---------------------------------------------------------------------------------------------
# Emitters: one per op
# ---------------------------------------------------------------------------------------------

Emitter = Callable[[_Exporter, Node, list[str], list[str]], None]
_EMITTERS: dict[str, Emitter] = {}


def _emits(*ops: str) -> Callable[[Emitter], Emitter]:
    def deco(fn: Emitter) -> Emitter:
        for op in ops:
            _EMITTERS[op] = fn
        return fn

    return deco


def _pre_activation(ctx: _Exporter, n: Node, out: str) -> str:
    """The name the main op writes: ``out`` itself, or a temporary a separate activation reads."""
    if n.attr_dict().get("activation", "none") == "none":
        return out
    return ctx.fresh(f"{n.op}_{n.id}_pre")


def _activation(ctx: _Exporter, n: Node, pre: str, out: str) -> None:
    """The fused activation of ``n`` as its own node (nothing when there is none)."""
    act = n.attr_dict().get("activation", "none")
    if act != "none":
        ctx.node(ONNX_ACTIVATIONS[act], [pre], [out])


_SIMPLE = {
    "ewadd": "Add",
    "ewmul": "Mul",
    "relu": "Relu",
    "tanh": "Tanh",
    "sigmoid": "Sigmoid",
    "matmul": "MatMul",
}


@_emits(*_SIMPLE)
def _simple(ctx: _Exporter, n: Node, ins: list[str], outs: list[str]) -> None:
    pre = _pre_activation(ctx, n, outs[0])
    ctx.node(_SIMPLE[n.op], ins, [pre])
    _activation(ctx, n, pre, outs[0])


@_emits("smul", "sdiv")
def _scalar(ctx: _Exporter, n: Node, ins: list[str], outs: list[str]) -> None:
    a = n.attr_dict()
    value = a["scalar"] if n.op == "smul" else a["divisor"]
    c = ctx.const(f"{n.op}_{n.id}_c", np.array(value, dtype=np.float32), ctx.dtype_in(n))
    ctx.node("Mul" if n.op == "smul" else "Div", [ins[0], c], outs)


@_emits("gelu")
def _gelu(ctx: _Exporter, n: Node, ins: list[str], outs: list[str]) -> None:
    ctx.node("Gelu", ins, outs, approximate=n.attr_dict()["approximate"])


def _window_pads(n: Node, x_shape: tuple[int, ...], kernel: tuple[int, int]) -> list[int]:
    a = n.attr_dict()
    if a["padding"] != "same":
        return [0, 0, 0, 0]
    top, bottom = same_padding(x_shape[2], kernel[0], a["stride"][0])
    left, right = same_padding(x_shape[3], kernel[1], a["stride"][1])
    return [top, left, bottom, right]


@_emits("conv2d")
def _conv(ctx: _Exporter, n: Node, ins: list[str], outs: list[str]) -> None:
    g = ctx.graph
    x_shape, w_shape = g.shape_of(n.inputs[0]), g.shape_of(n.inputs[1])
    kernel = (w_shape[2], w_shape[3])
    pre = _pre_activation(ctx, n, outs[0])
    ctx.node(
        "Conv",
        ins,
        [pre],
        kernel_shape=list(kernel),
        strides=list(n.attr_dict()["stride"]),
        pads=_window_pads(n, x_shape, kernel),
        group=x_shape[1] // w_shape[1],
    )
    _activation(ctx, n, pre, outs[0])


@_emits("poolmax", "poolavg")
def _pool(ctx: _Exporter, n: Node, ins: list[str], outs: list[str]) -> None:
    a = n.attr_dict()
    x_shape = ctx.graph.shape_of(n.inputs[0])
    pre = _pre_activation(ctx, n, outs[0])
    extra = {"count_include_pad": 0} if n.op == "poolavg" else {}
    ctx.node(
        "MaxPool" if n.op == "poolmax" else "AveragePool",
        ins,
        [pre],
        kernel_shape=list(a["kernel"]),
        strides=list(a["stride"]),
        pads=_window_pads(n, x_shape, a["kernel"]),
        **extra,
    )
    _activation(ctx, n, pre, outs[0])


@_emits("batchnorm")
def _batchnorm(ctx: _Exporter, n: Node, ins: list[str], outs: list[str]) -> None:
    ctx.node("BatchNormalization", ins, outs, epsilon=n.attr_dict()["eps"])


@_emits("softmax")
def _softmax(ctx: _Exporter, n: Node, ins: list[str], outs: list[str]) -> None:
    ctx.node("Softmax", ins, outs, axis=n.attr_dict()["axis"])


@_emits("layernorm")
def _layernorm(ctx: _Exporter, n: Node, ins: list[str], outs: list[str]) -> None:
    a = n.attr_dict()
    ctx.node("LayerNormalization", ins, outs, axis=a["axis"], epsilon=a["eps"])


@_emits("groupnorm")
def _groupnorm(ctx: _Exporter, n: Node, ins: list[str], outs: list[str]) -> None:
    # InstanceNormalization over [N, groups, -1] (opset 6; GroupNormalization's per-channel
    # scale needs opset 21), then the per-channel scale and bias: PyTorch's own export.
    a, shape = n.attr_dict(), ctx.graph.shape_of(n.inputs[0])
    groups, dtype = a["groups"], ctx.dtype_in(n)
    grouped, normed, back, scaled = (
        ctx.fresh(f"groupnorm_{n.id}_{p}") for p in ("grouped", "normed", "back", "scaled")
    )
    ctx.node(
        "Reshape",
        [ins[0], ctx.const(f"groupnorm_{n.id}_g", np.array([shape[0], groups, -1], np.int64))],
        [grouped],
    )
    ones = ctx.const(f"groupnorm_{n.id}_ones", np.ones(groups, np.float32), dtype)
    zeros = ctx.const(f"groupnorm_{n.id}_zeros", np.zeros(groups, np.float32), dtype)
    ctx.node("InstanceNormalization", [grouped, ones, zeros], [normed], epsilon=a["eps"])
    ctx.node("Reshape", [normed, ctx.const(f"groupnorm_{n.id}_x", np.array(shape, np.int64))], [back])
    per_channel = np.array([shape[1]] + [1] * (len(shape) - 2), np.int64)
    cols = [ctx.fresh(f"groupnorm_{n.id}_{p}") for p in ("scale", "bias")]
    for src, col in zip(ins[1:], cols, strict=True):
        ctx.node("Reshape", [src, ctx.const(f"groupnorm_{n.id}_c", per_channel)], [col])
    ctx.node("Mul", [back, cols[0]], [scaled])
    ctx.node("Add", [scaled, cols[1]], outs)


@_emits("concat")
def _concat(ctx: _Exporter, n: Node, ins: list[str], outs: list[str]) -> None:
    ctx.node("Concat", ins, outs, axis=n.attr_dict()["axis"])


@_emits("split")
def _split(ctx: _Exporter, n: Node, ins: list[str], outs: list[str]) -> None:
    a = n.attr_dict()
    sizes = ctx.dims(f"split_{n.id}_sizes", a["sizes"])
    ctx.node("Split", [ins[0], sizes], outs, axis=a["axis"])


@_emits("reshape")
def _reshape(ctx: _Exporter, n: Node, ins: list[str], outs: list[str]) -> None:
    shape = ctx.dims(f"reshape_{n.id}_shape", n.attr_dict()["shape"])
    ctx.node("Reshape", [ins[0], shape], outs)


@_emits("transpose")
def _transpose(ctx: _Exporter, n: Node, ins: list[str], outs: list[str]) -> None:
    ctx.node("Transpose", ins, outs, perm=list(n.attr_dict()["perm"]))


@_emits("dropout")
def _dropout(ctx: _Exporter, n: Node, ins: list[str], outs: list[str]) -> None:
    # Without a training_mode input ONNX Dropout is the identity, as the IR's dropout is.
    ratio = ctx.const(f"dropout_{n.id}_ratio", np.array(n.attr_dict()["rate"], dtype=np.float32))
    ctx.node("Dropout", [ins[0], ratio], outs)


@_emits("silu")
def _silu(ctx: _Exporter, n: Node, ins: list[str], outs: list[str]) -> None:
    sig = ctx.fresh(f"silu_{n.id}_sigmoid")
    ctx.node("Sigmoid", ins, [sig])
    ctx.node("Mul", [ins[0], sig], outs)


@_emits("hardsigmoid")
def _hardsigmoid(ctx: _Exporter, n: Node, ins: list[str], outs: list[str]) -> None:
    ctx.node("HardSigmoid", ins, outs, alpha=1.0 / 6.0, beta=0.5)


@_emits("hardswish")
def _hardswish(ctx: _Exporter, n: Node, ins: list[str], outs: list[str]) -> None:
    ctx.node("HardSwish", ins, outs)


@_emits("clip")
def _clip(ctx: _Exporter, n: Node, ins: list[str], outs: list[str]) -> None:
    a = n.attr_dict()
    lo = ctx.const(f"clip_{n.id}_min", np.array(a["min"], dtype=np.float32), ctx.dtype_in(n))
    hi = ctx.const(f"clip_{n.id}_max", np.array(a["max"], dtype=np.float32), ctx.dtype_in(n))
    ctx.node("Clip", [ins[0], lo, hi], outs)


@_emits("pow")
def _pow(ctx: _Exporter, n: Node, ins: list[str], outs: list[str]) -> None:
    e = ctx.const(f"pow_{n.id}_exponent", np.array(n.attr_dict()["exponent"], dtype=np.float32))
    ctx.node("Pow", [ins[0], e], outs)


@_emits("rsqrt")
def _rsqrt(ctx: _Exporter, n: Node, ins: list[str], outs: list[str]) -> None:
    root = ctx.fresh(f"rsqrt_{n.id}_sqrt")
    ctx.node("Sqrt", ins, [root])
    ctx.node("Reciprocal", [root], outs)


@_emits("pad")
def _pad(ctx: _Exporter, n: Node, ins: list[str], outs: list[str]) -> None:
    a = n.attr_dict()
    pads = ctx.const(f"pad_{n.id}_pads", np.array(a["pads"], dtype=np.int64))
    value = -np.inf if a["fill"] == "neg_inf" else 0.0
    fill = ctx.const(f"pad_{n.id}_value", np.array(value, dtype=np.float32), ctx.dtype_in(n))
    ctx.node("Pad", [ins[0], pads, fill], outs)


@_emits("slice")
def _slice(ctx: _Exporter, n: Node, ins: list[str], outs: list[str]) -> None:
    a = n.attr_dict()
    parts = [
        ctx.dims(f"slice_{n.id}_{k}", [a[key]])
        for k, key in (("starts", "start"), ("ends", "end"), ("axes", "axis"), ("steps", "step"))
    ]
    ctx.node("Slice", [ins[0], *parts], outs)


@_emits("expand")
def _expand(ctx: _Exporter, n: Node, ins: list[str], outs: list[str]) -> None:
    shape = ctx.dims(f"expand_{n.id}_shape", n.attr_dict()["shape"])
    ctx.node("Expand", [ins[0], shape], outs)


@_emits("mean")
def _mean(ctx: _Exporter, n: Node, ins: list[str], outs: list[str]) -> None:
    a = n.attr_dict()
    axes = ctx.const(f"mean_{n.id}_axes", np.array(a["axes"], dtype=np.int64))
    ctx.node("ReduceMean", [ins[0], axes], outs, keepdims=int(a["keepdims"]))


@_emits("cast")
def _cast(ctx: _Exporter, n: Node, ins: list[str], outs: list[str]) -> None:
    ctx.node("Cast", ins, outs, to=DTYPE_ELEMS[n.attr_dict()["dtype"]])


@_emits("enlarge")
def _enlarge(ctx: _Exporter, n: Node, ins: list[str], outs: list[str]) -> None:
    w, ref = (ctx.graph.shape_of(r) for r in n.inputs)
    oh, ow = (ref[2] - w[2]) // 2, (ref[3] - w[3]) // 2
    pads = [0, 0, oh, ow, 0, 0, ref[2] - w[2] - oh, ref[3] - w[3] - ow]
    ctx.node("Pad", [ins[0], ctx.const(f"enlarge_{n.id}_pads", np.array(pads, dtype=np.int64))], outs)


@_emits("merge")
def _merge(ctx: _Exporter, n: Node, ins: list[str], outs: list[str]) -> None:
    # Tile the weight `count` times along dim 1, then keep each output channel's own slot: the
    # mask multiplies by exactly 0 or 1.
    a = n.attr_dict()
    cout, cin_g = ctx.graph.shape_of(n.inputs[0])[:2]
    count, per_group = a["count"], cout // a["groups"]
    mask = np.zeros((cout, cin_g * count, 1, 1), dtype=np.float32)
    for o in range(cout):
        slot = (o // per_group) % count
        mask[o, slot * cin_g : (slot + 1) * cin_g] = 1.0
    reps = ctx.const(f"merge_{n.id}_repeats", np.array([1, count, 1, 1], dtype=np.int64))
    tiled = ctx.fresh(f"merge_{n.id}_tiled")
    ctx.node("Tile", [ins[0], reps], [tiled])
    ctx.node("Mul", [tiled, ctx.const(f"merge_{n.id}_mask", mask, ctx.dtype_in(n))], outs)


def _bn_multiplier(ctx: _Exporter, n: Node, scale: str, var: str) -> str:
    """``scale / sqrt(var + eps)`` as ONNX nodes; returns the result's name."""
    eps = ctx.const(f"{n.op}_{n.id}_eps", np.array(n.attr_dict()["eps"], dtype=np.float32), ctx.dtype_in(n))
    names = [ctx.fresh(f"{n.op}_{n.id}_{part}") for part in ("var_eps", "std", "mult")]
    ctx.node("Add", [var, eps], [names[0]])
    ctx.node("Sqrt", [names[0]], [names[1]])
    ctx.node("Div", [scale, names[1]], [names[2]])
    return names[2]


@_emits("bnfold_weight")
def _bnfold_weight(ctx: _Exporter, n: Node, ins: list[str], outs: list[str]) -> None:
    # Only reached for run-time operands: on weights the transform is folded into an initializer.
    rank, axis = len(ctx.graph.shape_of(n.inputs[0])), n.attr_dict()["axis"]
    shape = np.ones(rank, dtype=np.int64)
    shape[axis] = -1
    mult = _bn_multiplier(ctx, n, ins[1], ins[2])
    col = ctx.fresh(f"{n.op}_{n.id}_col")
    ctx.node("Reshape", [mult, ctx.const(f"{n.op}_{n.id}_shape", shape)], [col])
    ctx.node("Mul", [ins[0], col], outs)


@_emits("bnfold_bias")
def _bnfold_bias(ctx: _Exporter, n: Node, ins: list[str], outs: list[str]) -> None:
    scale, bias, mean, var = ins[:4]
    shift = ctx.fresh(f"{n.op}_{n.id}_shift")
    ctx.node("Mul", [mean, _bn_multiplier(ctx, n, scale, var)], [shift])
    out_dtype = ctx.graph.dtype_of((n.id, 0))
    if out_dtype == ctx.graph.dtype_of(n.inputs[1]):
        ctx.node("Sub", [bias, shift], outs)
        return
    wide = ctx.fresh(f"{n.op}_{n.id}_wide")  # the fifth input's dtype (a folded weight's)
    ctx.node("Sub", [bias, shift], [wide])
    ctx.node("Cast", [wide], outs, to=DTYPE_ELEMS[out_dtype])


@_emits("attention")
def _attention(ctx: _Exporter, n: Node, ins: list[str], outs: list[str]) -> None:
    # The decomposed ops, in the order the numpy semantics compute them (onnxruntime fuses
    # attention subgraphs itself where its kernels apply).
    a = n.attr_dict()
    scores = ctx.fresh(f"attention_{n.id}_scores")
    ctx.node("MatMul", [ins[0], ins[1]], [scores])
    for value, op, part in ((a["scale"], "Mul", "scaled"), (a["divisor"], "Div", "divided")):
        if value != 1.0:
            nxt = ctx.fresh(f"attention_{n.id}_{part}")
            c = ctx.const(f"attention_{n.id}_{part}_c", np.array(value, dtype=np.float32), ctx.dtype_in(n))
            ctx.node(op, [scores, c], [nxt])
            scores = nxt
    masks = list(ins[3:])
    if a["masked_rows"] == "zero" and (masks or a["causal"]):
        # Only FX graphs hold SDPA's semantics (0 in a row whose every key is masked), and they
        # are rebuilt as FX; ONNX's Softmax gives NaN there.
        raise GraphError(f"export: node {n.id} (attention with masked_rows=zero) has no exact ONNX form")
    if a["causal"]:
        rows, keys = ctx.graph.shape_of(n.inputs[0])[-2], ctx.graph.shape_of(n.inputs[1])[-1]
        upper = np.where(np.triu(np.ones((rows, keys), bool), 1), -np.inf, 0.0).astype(np.float32)
        masks.append(ctx.const(f"attention_{n.id}_causal", upper, ctx.dtype_in(n)))
    for i, m in enumerate(masks):
        masked = ctx.fresh(f"attention_{n.id}_masked{i}")
        ctx.node("Add", [scores, m], [masked])
        scores = masked
    probs = ctx.fresh(f"attention_{n.id}_probs")
    ctx.node("Softmax", [scores], [probs], axis=-1)
    ctx.node("MatMul", [probs, ins[2]], outs)


@_emits("noop")
def _noop(ctx: _Exporter, n: Node, ins: list[str], outs: list[str]) -> None:
    raise GraphError(f"export: node {n.id} (noop) is read by another op; a noop can only join outputs")


@_emits("opaque")
def _opaque(ctx: _Exporter, n: Node, ins: list[str], outs: list[str]) -> None:
    a = n.attr_dict()
    where = f"node {n.id} (opaque {a['op_type']})"
    model = convert_payload(decode_payload(a["payload"]), ctx.target, where=where)
    for imp in model.opset_import:
        domain = "" if imp.domain == "ai.onnx" else imp.domain
        if domain == "":
            continue
        have = ctx.opsets.setdefault(domain, int(imp.version))
        if have != imp.version:
            raise GraphError(f"export: {where} needs {domain} opset {imp.version}, another node {have}")
    for fn in model.functions:
        ctx.functions.setdefault((fn.domain, fn.name), fn)
    body = model.graph
    prefix = f"{a['op_type']}_{n.id}"
    rename = {vi.name: name for vi, name in zip(body.input, ins, strict=True)}
    for i, (vi, name) in enumerate(zip(body.output, outs, strict=True)):
        rename[vi.name] = name
        ctx.elem_types[(n.id, i)] = vi.type.tensor_type.elem_type
    for t in body.initializer:
        copy = ctx.onnx.TensorProto()
        copy.CopyFrom(t)
        copy.name = rename[t.name] = ctx.fresh(f"{prefix}_{t.name}")
        ctx.inits.append(copy)
    # The body is one node as imported, a few after an opset conversion (an attribute turned
    # into a Constant input): inline them all, giving internal names fresh ones.
    for original in body.node:
        node = ctx.onnx.NodeProto()
        node.CopyFrom(original)
        for k, name in enumerate(node.input):
            if name:
                node.input[k] = rename[name]
        for k, name in enumerate(node.output):
            if name:
                if name not in rename:
                    rename[name] = ctx.fresh(f"{prefix}_{name}")
                node.output[k] = rename[name]
        node.name = ctx.fresh(node.name or prefix)
        ctx.nodes.append(node)
