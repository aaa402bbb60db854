"""ONNX import: an ONNX model becomes a :class:`~tensor_eqsat.ir.graph.Graph`.

Algorithm. Load and check the model (a truncated or invalid file is a FormatError naming it),
convert opsets below 13 to 13 with onnx's version converter, run ONNX shape inference in strict
mode (inconsistent shapes are a FormatError), then walk the nodes in their (checked) topological
order. Each ONNX name maps to either an IR tensor or a constant known at import time
(initializers, ``Constant`` nodes, and every node whose inputs are all constants, which is folded
by running it in onnxruntime: that covers shape arithmetic such as ``Shape -> Gather -> Concat``).
A constant becomes an IR weight, with its data, when a modelled op reads it as a tensor.

Mapping (exact unless noted; see docs/interop.md for the full table):

* Conv, MaxPool, AveragePool: explicit pads equal to TASO's SAME split become ``padding="same"``,
  zero pads ``"valid"``; any other pads become an explicit opaque ``Pad`` (zeros for conv and
  count-including average pools, -inf for max pools) followed by a VALID op, which is exact. An
  average pool that excludes padding cannot be padded first and stays opaque. Conv bias is a
  separate ``ewadd`` of a (C, 1, 1) weight. Dilations other than 1, ceil_mode that changes the
  output size, and non-2-D windows stay opaque.
* Gemm: transposes (of constants precomputed), ``smul`` by alpha, ``beta * C`` added.
* Add, Mul: ``ewadd``/``ewmul``; Mul by a one-element constant that does not change the shape:
  ``smul``. Sub: ``x + (-c)`` with the constant negated, or ``a + smul(b, -1)`` (IEEE negation
  and ``a + (-b) == a - b`` are exact). Div by a constant whose elements are all equal:
  ``sdiv``; any other Div stays opaque (``x * (1/c)`` is not bit-exact).
* Squeeze, Unsqueeze, Flatten, Reshape (static target) become ``reshape``; Gather with a
  constant scalar or contiguous index range becomes ``split`` (+ ``reshape``).
* A Relu/Sigmoid/Tanh that is the only reader of a bias-free Conv, MatMul, Gemm or pool output
  is fused into it. The Erf GELU pattern ``x * 0.5 * (1 + erf(x / sqrt 2))`` (any association,
  or ``erf(x * 1/sqrt 2)``) becomes one ``gelu``.
* Every other operator is kept as an ``opaque`` op (its payload runs in onnxruntime); with
  ``strict=True`` it is an :class:`UnsupportedOpError` naming the op and the node instead.

Alternatives rejected: TASO's importer skipped unknown ops and treated Pad as a no-op (silent
wrong answers, reference/taso.md §5); mapping every explicit pad to SAME (wrong for PyTorch's
stride-2 convs with pad 1); a dedicated ``pad`` IR op (no rule could use it, and the opaque op
already gives exact semantics and a generic cost).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from tensor_eqsat.errors import FormatError, TensorEqsatError
from tensor_eqsat.io.onnx_common import (
    FLOAT,
    MIN_OPSET,
    default_opset,
    describe_source,
    elem_type_name,
    ir_version_for,
    load_model,
    require_onnx,
    require_ort,
)
from tensor_eqsat.io.onnx_export import LARGE_MODEL_BYTES
from tensor_eqsat.io.opaque import ConstSlot, Slot, TensorSlot, build_opaque
from tensor_eqsat.ir.graph import Graph, Tensor
from tensor_eqsat.ir.ops import same_padding
from tensor_eqsat.ir.types import Shape, volume

if TYPE_CHECKING:
    import onnx

log = logging.getLogger(__name__)

DETACH_BYTES = 1 << 20
"""Initializers above this size are detached from a model over LARGE_MODEL_BYTES for checking."""

EMBED_LIMIT = 64
"""Constant inputs of an opaque node with at most this many elements (and every non-float one)
are embedded in its payload; larger float constants become IR weights it reads."""

ACTIVATIONS = {"Relu": "relu", "Sigmoid": "sigmoid", "Tanh": "tanh"}


class UnsupportedOpError(FormatError):
    """Strict import met an operator (or an attribute value) the IR does not model."""


class _Unsupported(Exception):
    """Raised by a handler: this node cannot be expressed with modelled ops (reason given)."""


@dataclass
class _Value:
    """What an ONNX tensor name stands for: an IR tensor, or a constant known at import time."""

    elem_type: int
    shape: Shape
    tensor: Tensor | None = None
    const: np.ndarray | None = None


Ins = list[_Value | None]
"""A node's input values, None for omitted optional inputs."""
OnnxAttrs = dict[str, Any]


def import_onnx(
    source: Any,
    *,
    strict: bool = False,
    input_shapes: Mapping[str, Sequence[int]] | None = None,
) -> Graph:
    """Import an ONNX model (a path, bytes or an ``onnx.ModelProto``) as a Graph.

    strict: raise :class:`UnsupportedOpError` for any operator the IR does not model instead of
        keeping it as an opaque node. Default False.
    input_shapes: static shapes for inputs whose ONNX shape has symbolic dims (e.g. the batch).

    Initializers become weights carrying their data, so the Graph computes the model's function.
    Raises FormatError (unreadable or invalid model, inconsistent shapes, non-float inputs,
    dynamic shapes), UnsupportedOpError under strict.

    >>> import onnx
    >>> from onnx import helper, TensorProto as T
    >>> node = helper.make_node("Relu", ["x"], ["y"])
    >>> m = helper.make_model(helper.make_graph([node], "g",
    ...     [helper.make_tensor_value_info("x", T.FLOAT, [1, 4])],
    ...     [helper.make_tensor_value_info("y", T.FLOAT, [1, 4])]),
    ...     opset_imports=[helper.make_opsetid("", 17)])
    >>> import_onnx(m).op_counts()
    {'relu': 1}
    """
    model = load_model(source)
    return _Importer(model, describe_source(source), strict, dict(input_shapes or {})).run()


def onnx_output_names(source: Any) -> list[str]:
    """The graph output names of a model, in order (to give an exported graph the same names)."""
    return [o.name for o in load_model(source).graph.output]


class _Importer:
    def __init__(
        self, model: onnx.ModelProto, source: str, strict: bool, input_shapes: dict[str, Sequence[int]]
    ) -> None:
        self.onnx = require_onnx()
        self.source = source
        self.strict = strict
        # Protobuf cannot serialize more than 2 GiB, which the checker and shape inference need:
        # for big models they see a skeleton whose large initializers are declared graph inputs.
        self.detached: dict[str, Any] = {}
        if model.ByteSize() > LARGE_MODEL_BYTES:
            model = self._detach_large_initializers(model)
        self.model = self._prepare(model, input_shapes)
        self.g = Graph()
        self.values: dict[str, _Value] = {}
        self.used: set[str] = set()
        self.skip: set[int] = set()
        self.gelu: dict[int, str] = {}
        self.opaque_ops: list[str] = []
        self.pending_fusion: tuple[int, str] | None = None
        graph = self.model.graph
        self.nodes = list(graph.node)
        self.graph_outputs = {o.name for o in graph.output}
        self.consumers: dict[str, list[int]] = {}
        self.producer: dict[str, int] = {}
        for i, n in enumerate(self.nodes):
            for name in n.input:
                if name:
                    self.consumers.setdefault(name, []).append(i)
            for name in n.output:
                if name:
                    self.producer[name] = i
        self.info = self._shape_info()

    # -- preparation ---------------------------------------------------------------------------
    def _detach_large_initializers(self, model: onnx.ModelProto) -> onnx.ModelProto:
        helper = self.onnx.helper
        skeleton = self.onnx.ModelProto()
        skeleton.CopyFrom(model)
        kept = []
        for t in skeleton.graph.initializer:
            if len(t.raw_data) > DETACH_BYTES:
                self.detached[t.name] = t
                skeleton.graph.input.append(helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)))
            else:
                kept.append(t)
        del skeleton.graph.initializer[:]
        skeleton.graph.initializer.extend(kept)
        return skeleton

    def _prepare(self, model: onnx.ModelProto, input_shapes: dict[str, Sequence[int]]) -> onnx.ModelProto:
        onnx = self.onnx
        m = onnx.ModelProto()
        m.CopyFrom(model)
        inits = {t.name for t in m.graph.initializer} | set(self.detached)
        declared = {i.name for i in m.graph.input if i.name not in inits}
        unknown = sorted(set(input_shapes) - declared)
        if unknown:
            raise FormatError(f"{self.source}: input_shapes names unknown inputs {unknown}")
        for inp in m.graph.input:
            if inp.name in input_shapes:
                dims = [int(d) for d in input_shapes[inp.name]]
                shape = inp.type.tensor_type.shape
                if len(shape.dim) != len(dims):
                    raise FormatError(
                        f"{self.source}: input {inp.name!r} has rank {len(shape.dim)}, "
                        f"input_shapes gives {len(dims)} dims"
                    )
                for dim, v in zip(shape.dim, dims, strict=True):
                    dim.Clear()
                    dim.dim_value = v
        if input_shapes:
            # Shapes recorded for the old input shapes would contradict the new ones: re-infer.
            del m.graph.value_info[:]
            for out in m.graph.output:
                out.type.tensor_type.ClearField("shape")
        m = self._check(m)
        opset = default_opset(m)
        if opset < MIN_OPSET:
            try:
                m = onnx.version_converter.convert_version(m, MIN_OPSET)
            except Exception as exc:
                raise FormatError(
                    f"{self.source}: opset {opset} model could not be converted to opset {MIN_OPSET}: "
                    f"{_first_line(exc)}"
                ) from exc
            m = self._check(m)
        return m

    def _check(self, m: onnx.ModelProto) -> onnx.ModelProto:
        """Strict shape inference and the checker; FormatError says which failed and why."""
        onnx = self.onnx
        try:
            inferred = onnx.shape_inference.infer_shapes(m, check_type=True, strict_mode=True, data_prop=True)
        except Exception as exc:
            inferred, shape_error = None, exc
        # The checker wants a shape on every graph output, which exporters often leave out;
        # run it on the inferred model when there is one.
        try:
            onnx.checker.check_model(inferred if inferred is not None else m)
        except Exception as exc:
            if inferred is not None or "shape" not in str(exc):
                raise FormatError(f"{self.source}: invalid ONNX model: {_first_line(exc)}") from exc
        if inferred is None:
            raise FormatError(
                f"{self.source}: inconsistent shapes: {_first_line(shape_error)}"
            ) from shape_error
        return inferred

    def _shape_info(self) -> dict[str, tuple[int, Shape | None]]:
        info: dict[str, tuple[int, Shape | None]] = {}
        g = self.model.graph
        for vi in list(g.input) + list(g.value_info) + list(g.output):
            tt = vi.type.tensor_type
            if not vi.type.HasField("tensor_type"):
                continue
            shape: Shape | None = None
            if tt.HasField("shape"):
                dims = [d.dim_value if d.HasField("dim_value") else None for d in tt.shape.dim]
                if all(d is not None for d in dims):
                    shape = tuple(int(d) for d in dims if d is not None)
            if vi.name not in info or info[vi.name][1] is None:
                info[vi.name] = (tt.elem_type, shape)
        return info

    # -- main loop -----------------------------------------------------------------------------
    def run(self) -> Graph:
        onnx = self.onnx
        graph = self.model.graph
        for t in [*graph.initializer, *self.detached.values()]:
            arr = onnx.numpy_helper.to_array(t)
            self.values[t.name] = _Value(t.data_type, tuple(arr.shape), const=arr)
        for inp in graph.input:
            if inp.name in self.values or inp.name in self.detached:
                continue  # an initializer listed as an input (IR < 4): a constant
            self._add_input(inp)
        for i, node in enumerate(self.nodes):
            if node.op_type == "Constant" and node.domain in ("", "ai.onnx"):
                arr = _constant_value(onnx, node)
                if arr is not None:  # other forms (sparse) are folded by onnxruntime below
                    self.values[node.output[0]] = _Value(_elem_type(onnx, arr), tuple(arr.shape), const=arr)
                    self.skip.add(i)
        self._find_gelu()
        for i, node in enumerate(self.nodes):
            if i in self.skip:
                continue
            self._import_node(i, node)
        outs = []
        for o in graph.output:
            v = self.values.get(o.name)
            if v is None:
                raise FormatError(f"{self.source}: graph output {o.name!r} is never produced")
            if v.tensor is not None:
                outs.append(v.tensor)
            elif v.const is not None and v.const.dtype == np.float32:
                outs.append(self._tensor(v, o.name))
            else:
                raise FormatError(f"{self.source}: graph output {o.name!r} is a non-float constant")
        for t in outs:
            self.g.output(t)
        if self.opaque_ops:
            kinds = sorted(set(self.opaque_ops))
            log.info("%s: kept %d opaque nodes: %s", self.source, len(self.opaque_ops), kinds)
        return _prune(self.g)

    def _add_input(self, inp: onnx.ValueInfoProto) -> None:
        tt = inp.type.tensor_type
        if not inp.type.HasField("tensor_type"):
            raise FormatError(f"{self.source}: input {inp.name!r} is not a tensor")
        if tt.elem_type != FLOAT:
            raise FormatError(
                f"{self.source}: input {inp.name!r} has element type {elem_type_name(tt.elem_type)}; "
                "graphs take float32 inputs only"
            )
        dims = []
        for d in tt.shape.dim:
            if not d.HasField("dim_value"):
                raise FormatError(
                    f"{self.source}: input {inp.name!r} has a symbolic dim {d.dim_param!r}; "
                    "give static shapes with input_shapes={...}"
                )
            dims.append(int(d.dim_value))
        t = self.g.input(tuple(dims), name=inp.name)
        self.used.add(inp.name)
        self.values[inp.name] = _Value(FLOAT, tuple(dims), tensor=t)

    def _where(self, i: int, node: onnx.NodeProto) -> str:
        name = f" {node.name!r}" if node.name else ""
        return f"{self.source}: node {i}{name} ({node.op_type})"

    def _import_node(self, i: int, node: onnx.NodeProto) -> None:
        where = self._where(i, node)
        if i in self.gelu:  # the last Mul of a GELU pattern; the nodes before it were skipped
            x = self.values[self.gelu[i]]
            try:
                out = self._new(self.g.gelu(self._tensor(x, self.gelu[i])))
            except (_Unsupported, TensorEqsatError) as exc:
                raise FormatError(f"{where}: GELU pattern: {exc}") from exc
            self._check_shape(where, node.output[0], out)
            self.values[node.output[0]] = out
            return
        ins: list[_Value | None] = []
        for name in node.input:
            if not name:
                ins.append(None)
                continue
            v = self.values.get(name)
            if v is None:
                raise FormatError(f"{where}: input {name!r} is not produced by any earlier node")
            ins.append(v)
        present = [v for v in ins if v is not None]
        default_domain = node.domain in ("", "ai.onnx")
        if default_domain and node.op_type in ("Shape", "Size") and present:
            # Static shapes make these constants, so the shape arithmetic after them folds too.
            self._shape_const(node, present[0], _attrs(self.onnx, node))
            return
        if (present and all(v.const is not None for v in present)) or (
            node.op_type == "Constant" and default_domain
        ):
            self._fold(i, node, ins, where)
            return
        outs: list[_Value] | None = None
        reason = f"{node.domain or 'ai.onnx'}.{node.op_type} is not modelled"
        handler = _HANDLERS.get(node.op_type) if default_domain else None
        self.pending_fusion = None
        if handler is not None:
            try:
                outs = handler(self, i, node, ins, _attrs(self.onnx, node))
            except _Unsupported as exc:
                reason = str(exc)
            except UnsupportedOpError:
                raise
            except TensorEqsatError as exc:
                raise FormatError(f"{where}: {exc}") from exc
            finally:
                self.pending_fusion = None
        if outs is None:
            self._opaque(i, node, ins, reason, where)
            return
        for name, v in zip(node.output, outs, strict=False):
            if not name:
                continue
            self._check_shape(where, name, v)
            self.values[name] = v

    def _check_shape(self, where: str, name: str, v: _Value) -> None:
        expected = self.info.get(name, (FLOAT, None))[1]
        if expected is not None and tuple(expected) != tuple(v.shape):
            raise FormatError(
                f"{where}: inconsistent shapes: ONNX infers {expected} for {name!r}, "
                f"the graph computes {v.shape}"
            )

    # -- values ----------------------------------------------------------------------------------
    def _new(self, t: Tensor) -> _Value:
        return _Value(FLOAT, t.shape, tensor=t)

    def _fresh(self, base: str) -> str:
        name, k = base or "w", 1
        while name in self.used:
            name = f"{base}_{k}"
            k += 1
        self.used.add(name)
        return name

    def _weight(self, base: str, data: np.ndarray) -> Tensor:
        arr = np.ascontiguousarray(data, dtype=np.float32)
        return self.g.weight(arr.shape, name=self._fresh(base), data=arr)

    def _tensor(self, v: _Value, name: str) -> Tensor:
        """The IR tensor of a float value, turning a constant into a weight (once)."""
        if v.tensor is not None:
            if v.elem_type != FLOAT:
                raise _Unsupported(f"{name!r} has element type {elem_type_name(v.elem_type)}, not float32")
            return v.tensor
        assert v.const is not None
        if v.const.dtype != np.float32:
            raise _Unsupported(f"constant {name!r} has element type {v.const.dtype}, not float32")
        v.tensor = self._weight(name, v.const)
        return v.tensor

    def _fusible_activation(self, out: str) -> str:
        """The activation to fuse into the producer of ``out``: its only reader, if an activation.

        The fusion is committed by :meth:`_finish_fusion` once the producer is built, so a
        handler that gives up halfway leaves the activation node to be imported on its own.
        """
        users = self.consumers.get(out, [])
        if len(users) != 1 or out in self.graph_outputs or users[0] in self.skip:
            return "none"
        j = users[0]
        node = self.nodes[j]
        act = ACTIVATIONS.get(node.op_type) if node.domain in ("", "ai.onnx") else None
        if act is None:
            return "none"
        self.pending_fusion = (j, node.output[0])
        return act

    def _finish_fusion(self, v: _Value) -> None:
        if self.pending_fusion is not None:
            j, name = self.pending_fusion
            self.skip.add(j)
            self.values[name] = v
            self.pending_fusion = None

    # -- constant folding and opaque nodes ---------------------------------------------------------
    def _shape_const(self, node: onnx.NodeProto, v: _Value, a: OnnxAttrs) -> None:
        rank = len(v.shape)
        if node.op_type == "Size":
            arr = np.array(volume(v.shape), dtype=np.int64)
        else:
            start, end = int(a.get("start", 0)), int(a.get("end", rank))
            start, end = (max(0, min(rank, k + rank if k < 0 else k)) for k in (start, end))
            arr = np.array(v.shape[start:end], dtype=np.int64)
        self.values[node.output[0]] = _Value(7, tuple(arr.shape), const=arr)

    def _fold(self, i: int, node: onnx.NodeProto, ins: Ins, where: str) -> None:
        onnx = self.onnx
        helper = onnx.helper
        inputs, inits = [], []
        for k, v in enumerate(ins):
            if v is None:
                inputs.append("")
                continue
            assert v.const is not None
            inputs.append(f"c{k}")
            inits.append(onnx.numpy_helper.from_array(v.const, f"c{k}"))
        outs = [f"o{k}" if name else "" for k, name in enumerate(node.output)]
        copy = onnx.NodeProto()
        copy.CopyFrom(node)
        del copy.input[:]
        del copy.output[:]
        copy.input.extend(inputs)
        copy.output.extend(outs)
        out_infos = []
        for k, name in enumerate(node.output):
            if name:
                elem = self.info.get(name, (0, None))[0]
                # An output of unknown type is declared without one; onnxruntime accepts that.
                vi = helper.make_tensor_value_info(f"o{k}", elem, None) if elem else onnx.ValueInfoProto()
                vi.name = f"o{k}"
                out_infos.append(vi)
        model = helper.make_model(
            helper.make_graph([copy], "fold", [], out_infos, initializer=inits),
            opset_imports=list(self.model.opset_import),
            functions=list(self.model.functions),
        )
        model.ir_version = ir_version_for(model.opset_import)
        ort = require_ort()
        try:
            opts = ort.SessionOptions()
            opts.intra_op_num_threads = 1
            opts.log_severity_level = 3
            sess = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
            results = sess.run(None, {})
        except Exception as exc:
            raise FormatError(f"{where}: folding this all-constant node failed: {_first_line(exc)}") from exc
        present = [name for name in node.output if name]
        for name, arr in zip(present, results, strict=True):
            arr = np.asarray(arr)
            self.values[name] = _Value(_elem_type(onnx, arr), tuple(arr.shape), const=arr)

    def _opaque(self, i: int, node: onnx.NodeProto, ins: Ins, reason: str, where: str) -> None:
        if self.strict:
            raise UnsupportedOpError(f"{where}: {reason}; strict import allows no opaque nodes")
        slots: list[Slot] = []
        tensors: list[Tensor] = []
        for name, v in zip(node.input, ins, strict=True):
            if v is None:
                slots.append(None)
            elif v.const is not None and (v.const.dtype != np.float32 or v.const.size <= EMBED_LIMIT):
                slots.append(ConstSlot(v.const))
            else:
                if v.tensor is None:
                    self._tensor(v, name)
                assert v.tensor is not None
                slots.append(TensorSlot(v.elem_type, v.shape))
                tensors.append(v.tensor)
        outputs: list[tuple[int, Shape] | None] = []
        for name in node.output:
            if not name:
                outputs.append(None)
                continue
            elem, shape = self.info.get(name, (0, None))
            if shape is None or not elem:
                raise FormatError(
                    f"{where}: ONNX shape inference gives no static shape and type for output {name!r}; "
                    "opaque nodes need them (give input_shapes=... or simplify the model)"
                )
            outputs.append((elem, shape))
        functions = [f for f in self.model.functions if (f.domain, f.name) == (node.domain, node.op_type)]
        attrs = build_opaque(node, slots, outputs, self.model.opset_import, functions, where=where)
        results = self.g.add("opaque", tensors, **attrs)
        self.opaque_ops.append(node.op_type)
        present = [(name, out) for name, out in zip(node.output, outputs, strict=True) if name]
        for (name, out), t in zip(present, results, strict=True):
            assert out is not None
            self.values[name] = _Value(out[0], t.shape, tensor=t)

    def _explicit_pad(
        self, i: int, node: onnx.NodeProto, x: Tensor, pads: Sequence[int], value: float
    ) -> Tensor:
        """``x`` padded spatially by ONNX-order pads (top, left, bottom, right), as an opaque Pad."""
        onnx = self.onnx
        where = self._where(i, node)
        if self.strict:
            raise UnsupportedOpError(
                f"{where}: pads {tuple(pads)} are neither TASO's SAME nor VALID and need an explicit Pad; "
                "strict import allows no opaque nodes"
            )
        top, left, bottom, right = pads
        full = np.array([0, 0, top, left, 0, 0, bottom, right], dtype=np.int64)
        pad_node = onnx.helper.make_node("Pad", ["x", "pads", "value"], ["y"], mode="constant")
        n, c, h, w = x.shape
        out_shape = (n, c, h + top + bottom, w + left + right)
        attrs = build_opaque(
            pad_node,
            [TensorSlot(FLOAT, x.shape), ConstSlot(full), ConstSlot(np.array(value, dtype=np.float32))],
            [(FLOAT, out_shape)],
            [onnx.helper.make_opsetid("", max(default_opset(self.model), MIN_OPSET))],
            where=where,
        )
        self.opaque_ops.append("Pad")
        return self.g.add("opaque", [x], **attrs)[0]

    # -- GELU pattern ------------------------------------------------------------------------------
    def _scalar(self, name: str) -> float | None:
        v = self.values.get(name)
        if v is None or v.const is None or v.const.size != 1 or v.const.dtype.kind != "f":
            return None
        return float(v.const.reshape(-1)[0])

    def _only_user(self, name: str, op_type: str) -> int | None:
        users = self.consumers.get(name, [])
        if len(users) != 1 or name in self.graph_outputs:
            return None
        j = users[0]
        return j if self.nodes[j].op_type == op_type and self.nodes[j].domain in ("", "ai.onnx") else None

    def _mul_other(self, j: int, name: str) -> str | None:
        node = self.nodes[j]
        if node.op_type != "Mul" or len(node.input) != 2 or name not in node.input:
            return None
        a, b = node.input
        return b if a == name else a

    def _find_gelu(self) -> None:
        """Find ``x * 0.5 * (1 + erf(x / sqrt 2))`` (any association) and mark it for one gelu."""
        for ie, erf in enumerate(self.nodes):
            if erf.op_type != "Erf" or erf.domain not in ("", "ai.onnx"):
                continue
            idiv = self.producer.get(erf.input[0])
            if idiv is None or self._only_user(erf.input[0], "Erf") is None:
                continue
            div = self.nodes[idiv]
            x = None
            if div.op_type == "Div" and _close(self._scalar(div.input[1]), math.sqrt(2.0)):
                x = div.input[0]
            elif div.op_type == "Mul":
                for a, b in (div.input, div.input[::-1]):
                    if _close(self._scalar(b), 1.0 / math.sqrt(2.0)):
                        x = a
            if x is None or self._scalar(x) is not None:
                continue
            iadd = self._only_user(erf.output[0], "Add")
            if iadd is None:
                continue
            add = self.nodes[iadd]
            other = add.input[1] if add.input[0] == erf.output[0] else add.input[0]
            if not _close(self._scalar(other), 1.0):
                continue
            s = add.output[0]
            found = self._gelu_tail(x, s)
            if found is None:
                continue
            final, inner = found
            self.gelu[final] = x
            self.skip.update({idiv, ie, iadd, *inner})

    def _gelu_tail(self, x: str, s: str) -> tuple[int, list[int]] | None:
        """The final Mul of ``x * 0.5 * s`` and the inner nodes, for the three associations."""
        users = self.consumers.get(s, [])
        if len(users) != 1 or s in self.graph_outputs:
            return None
        m = users[0]
        other = self._mul_other(m, s)
        if other is None:
            return None
        mout = self.nodes[m].output[0]
        if other == x:  # (x * s) * 0.5
            m2 = self._only_user(mout, "Mul")
            if m2 is not None and _close(self._scalar(self._mul_other(m2, mout) or ""), 0.5):
                return m2, [m]
            return None
        if _close(self._scalar(other), 0.5):  # x * (s * 0.5)
            m2 = self._only_user(mout, "Mul")
            if m2 is not None and self._mul_other(m2, mout) == x:
                return m2, [m]
            return None
        ip = self.producer.get(other)  # (x * 0.5) * s
        if ip is None or self._only_user(other, "Mul") is None:
            return None
        half = self._mul_other(ip, x)
        if half is not None and _close(self._scalar(half), 0.5):
            return m, [ip]
        return None


# ---------------------------------------------------------------------------------------------
# Handlers: (importer, node index, node, input values, attributes) -> output values
# ---------------------------------------------------------------------------------------------

Handler = Callable[[_Importer, int, Any, Ins, OnnxAttrs], list[_Value]]
_HANDLERS: dict[str, Handler] = {}


def _handles(*ops: str) -> Callable[[Handler], Handler]:
    def deco(fn: Handler) -> Handler:
        for op in ops:
            _HANDLERS[op] = fn
        return fn

    return deco


def _req(ins: Ins, k: int) -> _Value:
    v = ins[k] if k < len(ins) else None
    if v is None:
        raise _Unsupported(f"input {k} is missing")
    return v


def _float_in(imp: _Importer, node: Any, ins: Ins, k: int) -> Tensor:
    return imp._tensor(_req(ins, k), node.input[k])


def _const_ints(v: _Value | None, what: str) -> list[int]:
    if v is None or v.const is None:
        raise _Unsupported(f"{what} is not a constant")
    return [int(d) for d in np.asarray(v.const).reshape(-1)]


def _broadcast(*shapes: Shape) -> Shape:
    return tuple(int(d) for d in np.broadcast_shapes(*shapes))


@_handles("Add")
def _add(imp: _Importer, i: int, node: Any, ins: Ins, a: OnnxAttrs) -> list[_Value]:
    x, y = _float_in(imp, node, ins, 0), _float_in(imp, node, ins, 1)
    return [imp._new(imp.g.ewadd(x, y))]


@_handles("Sum")
def _sum(imp: _Importer, i: int, node: Any, ins: Ins, a: OnnxAttrs) -> list[_Value]:
    ts = [_float_in(imp, node, ins, k) for k in range(len(ins))]
    if len(ts) == 1:
        return [_req(ins, 0)]
    out = ts[0]
    for t in ts[1:]:
        out = imp.g.ewadd(out, t)
    return [imp._new(out)]


@_handles("Mul")
def _mul(imp: _Importer, i: int, node: Any, ins: Ins, a: OnnxAttrs) -> list[_Value]:
    for k in (0, 1):
        data, c = _req(ins, k), _req(ins, 1 - k)
        scalar = c.const is not None and c.const.size == 1 and c.const.dtype == np.float32
        if scalar and data.const is None and _broadcast(data.shape, c.shape) == data.shape:
            assert c.const is not None
            x = _float_in(imp, node, ins, k)
            return [imp._new(imp.g.smul(x, float(c.const.reshape(-1)[0])))]
    return [imp._new(imp.g.ewmul(_float_in(imp, node, ins, 0), _float_in(imp, node, ins, 1)))]


@_handles("Sub")
def _sub(imp: _Importer, i: int, node: Any, ins: Ins, a: OnnxAttrs) -> list[_Value]:
    v0, v1 = _req(ins, 0), _req(ins, 1)
    if v1.const is not None and v1.const.dtype == np.float32:
        neg = imp._weight(f"{node.input[1]}_neg", -v1.const)
        return [imp._new(imp.g.ewadd(_float_in(imp, node, ins, 0), neg))]
    minus_b = imp.g.smul(_float_in(imp, node, ins, 1), -1.0)
    if v0.const is not None:  # c - x == (-x) + c: keep the constant as the second operand
        return [imp._new(imp.g.ewadd(minus_b, _float_in(imp, node, ins, 0)))]
    return [imp._new(imp.g.ewadd(_float_in(imp, node, ins, 0), minus_b))]


@_handles("Neg")
def _neg(imp: _Importer, i: int, node: Any, ins: Ins, a: OnnxAttrs) -> list[_Value]:
    return [imp._new(imp.g.smul(_float_in(imp, node, ins, 0), -1.0))]


@_handles("Div")
def _div(imp: _Importer, i: int, node: Any, ins: Ins, a: OnnxAttrs) -> list[_Value]:
    v0, v1 = _req(ins, 0), _req(ins, 1)
    c = v1.const
    if c is None or c.dtype != np.float32:
        raise _Unsupported("Div by a non-constant tensor is not modelled (only sdiv by a constant)")
    flat = c.reshape(-1)
    if flat.size == 0 or not np.all(flat == flat[0]) or flat[0] == 0:
        raise _Unsupported("Div by a constant whose elements differ (or are zero) is not modelled")
    if _broadcast(v0.shape, v1.shape) != v0.shape:
        raise _Unsupported("Div whose divisor widens the shape is not modelled")
    return [imp._new(imp.g.sdiv(_float_in(imp, node, ins, 0), float(flat[0])))]


@_handles("Relu", "Sigmoid", "Tanh")
def _act(imp: _Importer, i: int, node: Any, ins: Ins, a: OnnxAttrs) -> list[_Value]:
    x = _float_in(imp, node, ins, 0)
    return [imp._new(imp.g.add(ACTIVATIONS[node.op_type], [x])[0])]


@_handles("Gelu")
def _gelu(imp: _Importer, i: int, node: Any, ins: Ins, a: OnnxAttrs) -> list[_Value]:
    approx = a.get("approximate", "none")
    if approx not in ("none", "tanh"):
        raise _Unsupported(f"Gelu approximate={approx!r}")
    return [imp._new(imp.g.gelu(_float_in(imp, node, ins, 0), approximate=approx))]


def _window_padding(
    size: tuple[int, int], kernel: tuple[int, int], stride: tuple[int, int], pads: Sequence[int]
) -> str | None:
    """'same' or 'valid' when the ONNX pads (top, left, bottom, right) equal one of them."""
    top, left, bottom, right = pads
    if same_padding(size[0], kernel[0], stride[0]) == (top, bottom) and same_padding(
        size[1], kernel[1], stride[1]
    ) == (left, right):
        return "same"
    if not any(pads):
        return "valid"
    return None


Pair = tuple[int, int]


def _onnx_pads(a: OnnxAttrs, size: Pair, kernel: Pair, stride: Pair) -> list[int]:
    """Explicit (top, left, bottom, right) pads of a 2-D window op, resolving auto_pad."""
    auto = a.get("auto_pad", "NOTSET")
    if auto in ("SAME_UPPER", "SAME_LOWER"):
        split: list[Pair] = []
        for d in range(2):
            total = max((-(-size[d] // stride[d]) - 1) * stride[d] + kernel[d] - size[d], 0)
            small, big = total // 2, total - total // 2
            split.append((big, small) if auto == "SAME_LOWER" else (small, big))
        return [split[0][0], split[1][0], split[0][1], split[1][1]]
    if auto == "VALID":
        return [0, 0, 0, 0]
    pads = [int(p) for p in a.get("pads", [0, 0, 0, 0])]
    if len(pads) != 4:
        raise _Unsupported(f"pads {pads} are not 2-D")
    return pads


def _check_2d(a: OnnxAttrs, x: _Value, kernel: tuple[int, ...]) -> tuple[Pair, Pair]:
    if len(x.shape) != 4 or len(kernel) != 2:
        raise _Unsupported(f"only 2-D windows (NCHW) are modelled, got input rank {len(x.shape)}")
    dil = tuple(a.get("dilations", [1, 1]))
    if any(d != 1 for d in dil):
        raise _Unsupported(f"dilations {dil} are not modelled (only 1)")
    stride = tuple(int(s) for s in a.get("strides", [1, 1]))
    return (int(kernel[0]), int(kernel[1])), (stride[0], stride[1])


@_handles("Conv")
def _conv(imp: _Importer, i: int, node: Any, ins: Ins, a: OnnxAttrs) -> list[_Value]:
    xv, wv = _req(ins, 0), _req(ins, 1)
    if len(wv.shape) != 4:
        raise _Unsupported(f"only 2-D convolutions are modelled, weight has rank {len(wv.shape)}")
    kernel, stride = _check_2d(a, xv, wv.shape[2:])
    groups = int(a.get("group", 1))
    if xv.shape[1] != groups * wv.shape[1]:
        raise FormatError(
            f"{imp._where(i, node)}: group {groups} with weight {wv.shape} "
            f"does not fit {xv.shape[1]} input channels"
        )
    size = (xv.shape[2], xv.shape[3])
    pads = _onnx_pads(a, size, kernel, stride)
    padding = _window_padding(size, kernel, stride, pads)
    x = _float_in(imp, node, ins, 0)
    w = _float_in(imp, node, ins, 1)
    if padding is None:
        x = imp._explicit_pad(i, node, x, pads, 0.0)
        padding = "valid"
    bias = ins[2] if len(ins) > 2 else None
    act = "none" if bias is not None else imp._fusible_activation(node.output[0])
    y = imp.g.conv2d(x, w, stride=stride, padding=padding, activation=act)
    if bias is not None:
        c = wv.shape[0]
        if bias.const is not None and bias.const.dtype == np.float32:
            b = imp._weight(node.input[2], bias.const.reshape(c, 1, 1))
        else:
            b = imp.g.reshape(_float_in(imp, node, ins, 2), (c, 1, 1))
        y = imp.g.ewadd(y, b)
    out = imp._new(y)
    imp._finish_fusion(out)
    return [out]


def _pool_common(
    imp: _Importer, i: int, node: Any, ins: Ins, a: OnnxAttrs
) -> tuple[Tensor, Pair, Pair, list[int], str | None]:
    xv = _req(ins, 0)
    kernel, stride = _check_2d(a, xv, tuple(a["kernel_shape"]))
    size = (xv.shape[2], xv.shape[3])
    pads = _onnx_pads(a, size, kernel, stride)
    padding = _window_padding(size, kernel, stride, pads)
    if int(a.get("ceil_mode", 0)):
        for d in range(2):
            total = size[d] + pads[d] + pads[d + 2] - kernel[d]
            if total % stride[d] != 0:
                raise _Unsupported("ceil_mode=1 changes the output size here; not modelled")
    return _float_in(imp, node, ins, 0), kernel, stride, pads, padding


@_handles("MaxPool")
def _maxpool(imp: _Importer, i: int, node: Any, ins: Ins, a: OnnxAttrs) -> list[_Value]:
    if len(node.output) > 1 and node.output[1]:
        raise _Unsupported("MaxPool's Indices output is not modelled")
    if int(a.get("storage_order", 0)) != 0:
        raise _Unsupported("MaxPool storage_order=1 is not modelled")
    x, kernel, stride, pads, padding = _pool_common(imp, i, node, ins, a)
    if padding is None:
        x = imp._explicit_pad(i, node, x, pads, float("-inf"))
        padding = "valid"
    act = imp._fusible_activation(node.output[0])
    out = imp._new(imp.g.poolmax(x, kernel, stride, padding=padding, activation=act))
    imp._finish_fusion(out)
    return [out]


@_handles("AveragePool")
def _avgpool(imp: _Importer, i: int, node: Any, ins: Ins, a: OnnxAttrs) -> list[_Value]:
    x, kernel, stride, pads, padding = _pool_common(imp, i, node, ins, a)
    include = bool(int(a.get("count_include_pad", 0)))
    if include and any(pads):
        # Padding counted in the mean: pad with zeros, then every window is full.
        x = imp._explicit_pad(i, node, x, pads, 0.0)
        padding = "valid"
    elif padding is None:
        raise _Unsupported(f"AveragePool excluding padding with pads {tuple(pads)} (neither SAME nor VALID)")
    act = imp._fusible_activation(node.output[0])
    out = imp._new(imp.g.poolavg(x, kernel, stride, padding=padding, activation=act))
    imp._finish_fusion(out)
    return [out]


@_handles("GlobalAveragePool", "GlobalMaxPool")
def _global_pool(imp: _Importer, i: int, node: Any, ins: Ins, a: OnnxAttrs) -> list[_Value]:
    xv = _req(ins, 0)
    if len(xv.shape) != 4:
        raise _Unsupported(f"only 4-D inputs are modelled, got rank {len(xv.shape)}")
    x = _float_in(imp, node, ins, 0)
    op = "poolavg" if node.op_type == "GlobalAveragePool" else "poolmax"
    kernel = (xv.shape[2], xv.shape[3])
    act = imp._fusible_activation(node.output[0])
    out = imp._new(imp.g.add(op, [x], kernel=kernel, stride=(1, 1), padding="valid", activation=act)[0])
    imp._finish_fusion(out)
    return [out]


def _transposed(imp: _Importer, v: _Value, name: str) -> Tensor:
    if v.const is not None and v.const.dtype == np.float32:
        return imp._weight(f"{name}_T", v.const.T)
    return imp.g.transpose(imp._tensor(v, name), (1, 0))


@_handles("Gemm")
def _gemm(imp: _Importer, i: int, node: Any, ins: Ins, a: OnnxAttrs) -> list[_Value]:
    av, bv = _req(ins, 0), _req(ins, 1)
    if len(av.shape) != 2 or len(bv.shape) != 2:
        raise _Unsupported("Gemm operands must be 2-D")
    alpha, beta = float(a.get("alpha", 1.0)), float(a.get("beta", 1.0))
    x = _transposed(imp, av, node.input[0]) if a.get("transA", 0) else _float_in(imp, node, ins, 0)
    w = _transposed(imp, bv, node.input[1]) if a.get("transB", 0) else _float_in(imp, node, ins, 1)
    cv = ins[2] if len(ins) > 2 else None
    has_c = cv is not None and beta != 0.0
    act = "none" if has_c or alpha != 1.0 else imp._fusible_activation(node.output[0])
    y = imp.g.matmul(x, w, activation=act)
    if alpha != 1.0:
        y = imp.g.smul(y, alpha)
    if has_c:
        assert cv is not None
        if cv.const is not None and cv.const.dtype == np.float32:
            c = (
                imp._tensor(cv, node.input[2])
                if beta == 1.0
                else imp._weight(f"{node.input[2]}_beta", cv.const * np.float32(beta))
            )
        else:
            c = _float_in(imp, node, ins, 2)
            if beta != 1.0:
                c = imp.g.smul(c, beta)
        y = imp.g.ewadd(y, c)
    out = imp._new(y)
    imp._finish_fusion(out)
    return [out]


@_handles("MatMul")
def _matmul(imp: _Importer, i: int, node: Any, ins: Ins, a: OnnxAttrs) -> list[_Value]:
    av, bv = _req(ins, 0), _req(ins, 1)
    x, w = _float_in(imp, node, ins, 0), _float_in(imp, node, ins, 1)
    if len(av.shape) >= 2 and len(bv.shape) >= 2:
        act = imp._fusible_activation(node.output[0])
        out = imp._new(imp.g.matmul(x, w, activation=act))
        imp._finish_fusion(out)
        return [out]
    # NumPy's rule for 1-D operands: promote to a matrix, multiply, drop the added dim.
    if len(av.shape) == 1:
        x = imp.g.reshape(x, (1, av.shape[0]))
    if len(bv.shape) == 1:
        w = imp.g.reshape(w, (bv.shape[0], 1))
    y = imp.g.matmul(x, w)
    shape = list(y.shape)
    if len(bv.shape) == 1:
        shape.pop(-1)
    if len(av.shape) == 1:
        shape.pop(-2 if len(bv.shape) != 1 else -1)
    return [imp._new(imp.g.reshape(y, tuple(shape)))]


@_handles("Concat")
def _concat(imp: _Importer, i: int, node: Any, ins: Ins, a: OnnxAttrs) -> list[_Value]:
    ts = [_float_in(imp, node, ins, k) for k in range(len(ins))]
    return [imp._new(imp.g.concat(ts, axis=int(a["axis"])))]


@_handles("Split")
def _split(imp: _Importer, i: int, node: Any, ins: Ins, a: OnnxAttrs) -> list[_Value]:
    xv = _req(ins, 0)
    rank = len(xv.shape)
    axis = int(a.get("axis", 0))
    axis = axis + rank if axis < 0 else axis
    dim = xv.shape[axis]
    n = len(node.output)
    if len(ins) > 1 and ins[1] is not None:
        sizes = _const_ints(ins[1], "split sizes")
    elif "split" in a:
        sizes = [int(s) for s in a["split"]]
    elif "num_outputs" in a:
        chunk = -(-dim // int(a["num_outputs"]))
        sizes = [min(chunk, dim - k * chunk) for k in range(int(a["num_outputs"]))]
    else:
        if dim % n:
            raise FormatError(f"{imp._where(i, node)}: dim {dim} does not split into {n} equal parts")
        sizes = [dim // n] * n
    if any(s <= 0 for s in sizes):
        raise _Unsupported(f"split sizes {sizes} include an empty piece")
    parts = imp.g.split(_float_in(imp, node, ins, 0), axis, sizes)
    return [imp._new(t) for t in parts]


def _reshape_to(imp: _Importer, node: Any, ins: Ins, shape: Sequence[int]) -> list[_Value]:
    x = _float_in(imp, node, ins, 0)
    return [imp._new(imp.g.reshape(x, tuple(int(d) for d in shape)))]


@_handles("Reshape")
def _reshape(imp: _Importer, i: int, node: Any, ins: Ins, a: OnnxAttrs) -> list[_Value]:
    xv = _req(ins, 0)
    target = _const_ints(ins[1] if len(ins) > 1 else None, "Reshape's shape")
    if int(a.get("allowzero", 0)) and 0 in target:
        raise _Unsupported("Reshape to an empty tensor (allowzero with a 0 dim)")
    # Resolve 0 (copy the input dim) here: the builder does too, but only ONNX defines it for
    # positions beyond the input rank as an error, which the builder would silently keep.
    if any(d == 0 and k >= len(xv.shape) for k, d in enumerate(target)):
        raise _Unsupported(f"Reshape target {target} copies a dim the input does not have")
    dims = [xv.shape[k] if d == 0 else d for k, d in enumerate(target)]
    return _reshape_to(imp, node, ins, dims)


@_handles("Flatten")
def _flatten(imp: _Importer, i: int, node: Any, ins: Ins, a: OnnxAttrs) -> list[_Value]:
    shape = _req(ins, 0).shape
    axis = int(a.get("axis", 1))
    axis = axis + len(shape) if axis < 0 else axis
    return _reshape_to(imp, node, ins, (volume(shape[:axis]), volume(shape[axis:])))


def _raw_axes(ins: Ins, a: OnnxAttrs) -> list[int] | None:
    """Axes from the second input (opset 13+) or the ``axes`` attribute (older); None if absent."""
    if len(ins) > 1 and ins[1] is not None:
        return _const_ints(ins[1], "axes")
    if "axes" in a:
        return [int(v) for v in a["axes"]]
    return None


@_handles("Squeeze")
def _squeeze(imp: _Importer, i: int, node: Any, ins: Ins, a: OnnxAttrs) -> list[_Value]:
    shape = _req(ins, 0).shape
    raw = _raw_axes(ins, a)
    if raw is None:
        axes = {k for k, d in enumerate(shape) if d == 1}
    else:
        axes = {ax + len(shape) if ax < 0 else ax for ax in raw}
    return _reshape_to(imp, node, ins, [d for k, d in enumerate(shape) if k not in axes])


@_handles("Unsqueeze")
def _unsqueeze(imp: _Importer, i: int, node: Any, ins: Ins, a: OnnxAttrs) -> list[_Value]:
    shape = list(_req(ins, 0).shape)
    raw = _raw_axes(ins, a)
    if raw is None:
        raise FormatError(f"{imp._where(i, node)}: Unsqueeze without axes")
    rank = len(shape) + len(raw)
    for ax in sorted(ax + rank if ax < 0 else ax for ax in raw):
        shape.insert(ax, 1)
    return _reshape_to(imp, node, ins, shape)


@_handles("Transpose")
def _transpose(imp: _Importer, i: int, node: Any, ins: Ins, a: OnnxAttrs) -> list[_Value]:
    rank = len(_req(ins, 0).shape)
    perm = [int(p) for p in a.get("perm", list(range(rank))[::-1])]
    return [imp._new(imp.g.transpose(_float_in(imp, node, ins, 0), perm))]


@_handles("Gather")
def _gather(imp: _Importer, i: int, node: Any, ins: Ins, a: OnnxAttrs) -> list[_Value]:
    xv, iv = _req(ins, 0), _req(ins, 1)
    if iv.const is None:
        raise _Unsupported("Gather with non-constant indices")
    axis = int(a.get("axis", 0))
    axis = axis + len(xv.shape) if axis < 0 else axis
    dim = xv.shape[axis]
    idx = np.asarray(iv.const).astype(np.int64)
    flat = [int(k) + dim if k < 0 else int(k) for k in idx.reshape(-1)]
    if idx.ndim > 1 or not flat or flat != list(range(flat[0], flat[0] + len(flat))):
        raise _Unsupported("Gather with indices other than a scalar or a contiguous range")
    start, count = flat[0], len(flat)
    sizes = [s for s in (start, count, dim - start - count) if s > 0]
    x = _float_in(imp, node, ins, 0)
    piece = x if sizes == [count] else imp.g.split(x, axis, sizes)[1 if start > 0 else 0]
    if idx.ndim == 0:
        shape = [d for k, d in enumerate(piece.shape) if k != axis]
        piece = imp.g.reshape(piece, tuple(shape))
    return [imp._new(piece)]


@_handles("BatchNormalization")
def _batchnorm(imp: _Importer, i: int, node: Any, ins: Ins, a: OnnxAttrs) -> list[_Value]:
    if int(a.get("training_mode", 0)):
        raise _Unsupported("BatchNormalization in training mode")
    if any(node.output[1:]):
        raise _Unsupported("BatchNormalization's running-statistics outputs are not modelled")
    x, scale, bias, mean, var = (_float_in(imp, node, ins, k) for k in range(5))
    return [imp._new(imp.g.batchnorm(x, scale, bias, mean, var, eps=float(a.get("epsilon", 1e-5))))]


@_handles("Softmax")
def _softmax(imp: _Importer, i: int, node: Any, ins: Ins, a: OnnxAttrs) -> list[_Value]:
    return [imp._new(imp.g.softmax(_float_in(imp, node, ins, 0), axis=int(a.get("axis", -1))))]


@_handles("LayerNormalization")
def _layernorm(imp: _Importer, i: int, node: Any, ins: Ins, a: OnnxAttrs) -> list[_Value]:
    if any(node.output[1:]):
        raise _Unsupported("LayerNormalization's Mean/InvStdDev outputs are not modelled")
    xv = _req(ins, 0)
    rank = len(xv.shape)
    axis = int(a.get("axis", -1))
    axis = axis + rank if axis < 0 else axis
    norm = tuple(xv.shape[axis:])

    def param(k: int, fill: float) -> Tensor:
        v = ins[k] if k < len(ins) else None
        if v is None:
            return imp._weight(f"{node.output[0]}_{'bias' if k == 2 else 'scale'}", np.full(norm, fill))
        if tuple(v.shape) == norm:
            return imp._tensor(v, node.input[k])
        if v.const is not None and v.const.dtype == np.float32:
            return imp._weight(node.input[k], np.broadcast_to(v.const, norm))
        raise _Unsupported(f"LayerNormalization parameter of shape {v.shape} broadcast to {norm}")

    x = _float_in(imp, node, ins, 0)
    out = imp.g.layernorm(x, param(1, 1.0), param(2, 0.0), axis=axis, eps=float(a.get("epsilon", 1e-5)))
    return [imp._new(out)]


@_handles("Dropout")
def _dropout(imp: _Importer, i: int, node: Any, ins: Ins, a: OnnxAttrs) -> list[_Value]:
    if len(node.output) > 1 and node.output[1]:
        mask = node.output[1]
        if imp.consumers.get(mask) or mask in imp.graph_outputs:
            raise _Unsupported("Dropout's mask output is not modelled")
    rate = float(a.get("ratio", 0.5))
    if len(ins) > 1 and ins[1] is not None:
        if ins[1].const is None:
            raise _Unsupported("Dropout with a non-constant ratio")
        rate = float(np.asarray(ins[1].const).reshape(-1)[0])
    training = ins[2] if len(ins) > 2 else None
    if training is not None and (training.const is None or bool(training.const.reshape(-1)[0])):
        raise _Unsupported("Dropout in training mode")
    if not 0.0 <= rate < 1.0:
        raise _Unsupported(f"Dropout ratio {rate}")
    return [imp._new(imp.g.dropout(_float_in(imp, node, ins, 0), rate=rate))]


@_handles("Identity")
def _identity(imp: _Importer, i: int, node: Any, ins: Ins, a: OnnxAttrs) -> list[_Value]:
    return [_req(ins, 0)]


@_handles("Cast", "CastLike")
def _cast(imp: _Importer, i: int, node: Any, ins: Ins, a: OnnxAttrs) -> list[_Value]:
    v = _req(ins, 0)
    to = int(a["to"]) if node.op_type == "Cast" else _req(ins, 1).elem_type
    if to != FLOAT or v.elem_type != FLOAT:
        raise _Unsupported("Cast between element types is not modelled")
    return [v]


# ---------------------------------------------------------------------------------------------
# Small helpers
# ---------------------------------------------------------------------------------------------


def _attrs(onnx: Any, node: Any) -> dict[str, Any]:
    out = {}
    for attr in node.attribute:
        v = onnx.helper.get_attribute_value(attr)
        out[attr.name] = v.decode() if isinstance(v, bytes) else v
    return out


def _constant_value(onnx: Any, node: Any) -> np.ndarray | None:
    a = {attr.name: attr for attr in node.attribute}
    if "value" in a:
        return np.asarray(onnx.numpy_helper.to_array(a["value"].t))
    if "value_float" in a:
        return np.array(a["value_float"].f, dtype=np.float32)
    if "value_floats" in a:
        return np.array(list(a["value_floats"].floats), dtype=np.float32)
    if "value_int" in a:
        return np.array(a["value_int"].i, dtype=np.int64)
    if "value_ints" in a:
        return np.array(list(a["value_ints"].ints), dtype=np.int64)
    return None


def _elem_type(onnx: Any, arr: np.ndarray) -> int:
    return int(onnx.helper.np_dtype_to_tensor_dtype(arr.dtype))


def _close(v: float | None, target: float) -> bool:
    return v is not None and abs(v - target) <= 1e-4 * max(1.0, abs(target))


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _prune(g: Graph) -> Graph:
    """A copy of ``g`` with only the nodes its outputs need (all inputs are kept, in order)."""
    live = g.live_nodes() | {n.id for n in g.inputs()}
    out = Graph()
    remap: dict[int, int] = {}
    for n in g.nodes:
        if n.id not in live:
            continue
        ts = out.add_node(n.op, n.attrs, [(remap[s], k) for s, k in n.inputs])
        remap[n.id] = ts[0].node
        if n.op == "weight":
            name = g.name_of(n.id)
            if name in g.weight_data:
                out.weight_data[name] = g.weight_data[name]
    out.outputs = [(remap[s], k) for s, k in g.outputs]
    return out
