"""ONNX import: an ONNX model becomes a :class:`~tensor_eqsat.ir.graph.Graph`.

Algorithm. Load and check the model (a truncated or invalid file is a FormatError naming it),
convert opsets below 13 to 13 with onnx's version converter, run ONNX shape inference in strict
mode (inconsistent shapes are a FormatError), then walk the nodes in their (checked) topological
order. Each ONNX name maps to either an IR tensor or a constant known at import time
(initializers, ``Constant`` nodes, and every node whose inputs are all constants, which is folded
by running it in onnxruntime: that covers shape arithmetic such as ``Shape -> Gather -> Concat``).
A constant becomes an IR weight, with its data, when a modelled op reads it as a tensor.

The per-operator mapping lives in :mod:`tensor_eqsat.io.onnx_ops` (full table in
docs/interop.md); operators it does not map become ``opaque`` ops, or an
:class:`UnsupportedOpError` under ``strict=True``. The Erf GELU pattern
(``x * 0.5 * (1 + erf(x / sqrt 2))`` in any association, or ``erf(x * 1/sqrt 2)``) is found by
:mod:`tensor_eqsat.io.onnx_gelu` and imported as one ``gelu``.

Alternatives rejected: TASO's importer skipped unknown ops and treated Pad as a no-op (silent
wrong answers, reference/taso.md §5).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from tensor_eqsat.errors import FormatError, TensorEqsatError, naming
from tensor_eqsat.io.inputs import INPUT_SHAPES, with_input_shapes
from tensor_eqsat.io.onnx_common import (
    FLOAT,
    FLOAT_ELEM_DTYPES,
    MIN_OPSET,
    const_dtype,
    default_opset,
    describe_source,
    elem_type_name,
    ir_version_for,
    is_float_array,
    load_model,
    require_onnx,
    require_ort,
    widen_const,
)
from tensor_eqsat.io.onnx_dims import (
    NotFoldable,
    SymbolTable,
    as_values,
    concrete_array,
    fold,
    has_symbols,
    out_elem_type,
    probe_shapes,
)
from tensor_eqsat.io.onnx_files import LARGE_MODEL_BYTES, model_bytes
from tensor_eqsat.io.onnx_gelu import find_gelu
from tensor_eqsat.io.onnx_ops import ACTIVATIONS, HANDLERS, Ins, OnnxAttrs, Unsupported, Value
from tensor_eqsat.io.opaque import ConstSlot, Slot, TensorSlot, build_opaque
from tensor_eqsat.ir.dtypes import DTypeError
from tensor_eqsat.ir.graph import Graph, Tensor
from tensor_eqsat.ir.symbolic import UndecidedDim
from tensor_eqsat.ir.types import Shape, volume

if TYPE_CHECKING:
    import onnx

log = logging.getLogger(__name__)

DETACH_BYTES = 1 << 20
"""Initializers above this size are detached from a model over LARGE_MODEL_BYTES for checking."""

EMBED_LIMIT = 64
"""Constant inputs of an opaque node with at most this many elements (and every non-float one)
are embedded in its payload; larger float constants become IR weights it reads."""


class UnsupportedOpError(FormatError):
    """Strict import met an operator (or an attribute value) the IR does not model."""


def import_onnx(
    source: Any,
    *,
    strict: bool = False,
    input_shapes: Mapping[str, Sequence[int]] | None = None,
    hints: Mapping[str, int] | None = None,
) -> Graph:
    """Import an ONNX model (a path, bytes or an ``onnx.ModelProto``) as a Graph.

    strict: raise :class:`UnsupportedOpError` for any operator the IR does not model instead of
        keeping it as an opaque node. Default False.
    input_shapes: static shapes for inputs whose ONNX shape has symbolic dims (e.g. the batch).
        Without it, a ``dim_param`` becomes a symbolic dim (see :mod:`tensor_eqsat.io.onnx_dims`).
    hints: the representative size of each symbol, by name (the default: 1 for a batch-like
        name, 128 for others; :func:`~tensor_eqsat.io.onnx_dims.default_hint`).

    Initializers become weights carrying their data, so the Graph computes the model's function.
    Inputs of any element type are accepted; the nodes reading a non-float input become opaque
    (see :mod:`tensor_eqsat.io.inputs`).
    Raises FormatError (unreadable or invalid model, inconsistent shapes, a dim with neither a
    value nor a name, a hint for no symbol of the model), UnsupportedOpError under strict.

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
    return Importer(model, describe_source(source), strict, dict(input_shapes or {}), hints).run()


def onnx_output_names(source: Any) -> list[str]:
    """The graph output names of a model, in order (to give an exported graph the same names)."""
    return [o.name for o in load_model(source).graph.output]


class Importer:
    """The state of one import; handlers in :mod:`~tensor_eqsat.io.onnx_ops` build through it.

    What handlers use: ``g`` (the Graph being built), :meth:`tensor` (the IR tensor of a value,
    turning a constant into a weight), :meth:`weight` (a new weight with data), :meth:`new`
    (wrap an IR tensor as a value), :meth:`fusible_activation` / :meth:`finish_fusion`,
    :meth:`explicit_pad`, :meth:`where` (names a node in errors), ``consumers`` and
    ``graph_outputs``.
    """

    def __init__(
        self,
        model: onnx.ModelProto,
        source: str,
        strict: bool,
        input_shapes: dict[str, Sequence[int]],
        hints: Mapping[str, int] | None = None,
    ) -> None:
        self.onnx = require_onnx()
        self.source = source
        self.strict = strict
        self.symtab = SymbolTable(hints)
        # Protobuf cannot serialize more than 2 GiB, which the checker and shape inference need:
        # for big models they see a skeleton whose large initializers are declared graph inputs.
        self.detached: dict[str, Any] = {}
        if model_bytes(model) > LARGE_MODEL_BYTES:
            model = self._detach_large_initializers(model)
        self.model = self._prepare(model, input_shapes)
        self.g = Graph()
        self.values: dict[str, Value] = {}
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
        self._input_symbols()
        self.info = self._shape_info()
        self.probed: dict[str, Shape] | None = None

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
        m = with_input_shapes(model, input_shapes, self.source, extra_constants=set(self.detached))
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

    def _input_symbols(self) -> None:
        """The symbols of the inputs' ``dim_param`` s (io/onnx_dims.py), in order."""
        g = self.model.graph
        inits = {t.name for t in g.initializer} | set(self.detached)
        for inp in g.input:
            if inp.name in inits or not inp.type.HasField("tensor_type"):
                continue
            for k, d in enumerate(inp.type.tensor_type.shape.dim):
                if d.HasField("dim_param") and d.dim_param:
                    self.symtab.symbol(d.dim_param)
                elif not d.HasField("dim_value"):
                    head = f"{self.source}: input {inp.name!r} has a dim {k} with neither a size nor a name"
                    raise naming(FormatError, f"{head}; give static shapes with ", INPUT_SHAPES)
        self.symtab.check_hints(self.source)

    def _dim(self, d: Any) -> Any:
        if d.HasField("dim_value"):
            return int(d.dim_value)
        return self.symtab.known(d.dim_param) if d.HasField("dim_param") else None

    def _shape_info(self) -> dict[str, tuple[int, Shape | None]]:
        info: dict[str, tuple[int, Shape | None]] = {}
        g = self.model.graph
        for vi in list(g.input) + list(g.value_info) + list(g.output):
            tt = vi.type.tensor_type
            if not vi.type.HasField("tensor_type"):
                continue
            shape: Shape | None = None
            if tt.HasField("shape"):
                dims = [self._dim(d) for d in tt.shape.dim]
                if all(d is not None for d in dims):
                    shape = tuple(dims)
            if vi.name not in info or info[vi.name][1] is None:
                info[vi.name] = (tt.elem_type, shape)
        return info

    # -- main loop -----------------------------------------------------------------------------
    def run(self) -> Graph:
        onnx = self.onnx
        graph = self.model.graph
        for t in [*graph.initializer, *self.detached.values()]:
            arr = onnx.numpy_helper.to_array(t)
            self.values[t.name] = Value(t.data_type, tuple(arr.shape), const=arr)
        for inp in graph.input:
            if inp.name in self.values or inp.name in self.detached:
                continue  # an initializer listed as an input (IR < 4): a constant
            self._add_input(inp)
        for i, node in enumerate(self.nodes):
            if node.op_type == "Constant" and node.domain in ("", "ai.onnx"):
                arr = _constant_value(onnx, node)
                if arr is not None:  # other forms (sparse) are folded by onnxruntime below
                    self.values[node.output[0]] = Value(_elem_type(onnx, arr), tuple(arr.shape), const=arr)
                    self.skip.add(i)
        self.gelu, fused = find_gelu(
            self.nodes, self.producer, self.consumers, self.graph_outputs, self._scalar
        )
        self.skip.update(fused)
        for i, node in enumerate(self.nodes):
            if i in self.skip:
                continue
            self._refuse_subgraphs(i, node)
            self._import_node(i, node)
        outs = []
        for o in graph.output:
            v = self.values.get(o.name)
            if v is None:
                raise FormatError(f"{self.source}: graph output {o.name!r} is never produced")
            if v.tensor is not None:
                outs.append(v.tensor)
            elif v.const is not None and is_float_array(v.const):
                outs.append(self.tensor(v, o.name))
            elif v.sym is not None:
                self._materialize(o.name, v)
                assert v.tensor is not None
                outs.append(v.tensor)
            else:
                raise FormatError(f"{self.source}: graph output {o.name!r} is a non-float constant")
        for t in outs:
            self.g.output(t)
        if self.opaque_ops:
            kinds = sorted(set(self.opaque_ops))
            log.info("%s: kept %d opaque nodes: %s", self.source, len(self.opaque_ops), kinds)
        return _prune(self.g)

    def _refuse_subgraphs(self, i: int, node: onnx.NodeProto) -> None:
        """Control flow (If, Loop, Scan: nodes with graph attributes) is one clear error."""
        graph_kinds = (self.onnx.AttributeProto.GRAPH, self.onnx.AttributeProto.GRAPHS)
        if any(a.type in graph_kinds for a in node.attribute):
            name = f" {node.name!r}" if node.name else ""
            raise FormatError(
                f"{self.source}: node {i} ({node.op_type}{name}): control flow with subgraphs "
                "(If, Loop, Scan) is not supported; export the model with the branch taken "
                "(e.g. torch.onnx.export of a traced model)"
            )

    def _add_input(self, inp: onnx.ValueInfoProto) -> None:
        tt = inp.type.tensor_type
        if not inp.type.HasField("tensor_type"):
            raise FormatError(f"{self.source}: input {inp.name!r} is not a tensor")
        dims = [self._dim(d) for d in tt.shape.dim]  # (every dim has a value or a symbol)
        t = self.g.input(tuple(dims), name=inp.name, dtype=_ir_dtype(self.onnx, tt.elem_type))
        self.used.add(inp.name)
        # An input of another type (token ids, a mask) can only feed opaque nodes, whose payloads
        # then declare its type (io/inputs.py); the float32 tensors they produce are rewritable.
        self.values[inp.name] = Value(tt.elem_type, tuple(dims), tensor=t)

    def _scalar(self, name: str) -> float | None:
        v = self.values.get(name)
        if v is None or v.const is None or v.const.size != 1 or v.const.dtype.kind != "f":
            return None
        return float(v.const.reshape(-1)[0])

    def where(self, i: int, node: onnx.NodeProto) -> str:
        name = f" {node.name!r}" if node.name else ""
        return f"{self.source}: node {i}{name} ({node.op_type})"

    def _import_node(self, i: int, node: onnx.NodeProto) -> None:
        where = self.where(i, node)
        if i in self.gelu:  # the last Mul of a GELU pattern; the nodes before it were skipped
            x = self.values[self.gelu[i]]
            try:
                out = self.new(self.g.gelu(self.tensor(x, self.gelu[i])))
            except (Unsupported, TensorEqsatError) as exc:
                raise FormatError(f"{where}: GELU pattern: {exc}") from exc
            self._check_shape(where, node.output[0], out)
            self.values[node.output[0]] = out
            return
        ins: list[Value | None] = []
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
            # Static shapes make these constants, so the shape arithmetic after them folds too;
            # symbolic dims make them shape values, which fold on (io/onnx_dims.py).
            self._shape_const(node, present[0], _attrs(self.onnx, node))
            return
        on_shapes = any(v.sym is not None for v in present)
        if (
            default_domain
            and on_shapes
            and all(v.const is not None or v.sym is not None for v in present)
            and self._fold_shapes(node, ins)
        ):
            return
        if (present and all(v.const is not None for v in present)) or (
            node.op_type == "Constant" and default_domain
        ):
            self._fold(i, node, ins, where)
            return
        outs: list[Value] | None = None
        reason = f"{node.domain or 'ai.onnx'}.{node.op_type} is not modelled"
        handler = HANDLERS.get(node.op_type) if default_domain else None
        self.pending_fusion = None
        if handler is not None:
            try:
                outs = handler(self, i, node, ins, _attrs(self.onnx, node))
            except Unsupported as exc:
                reason = str(exc)
            except UnsupportedOpError:
                raise
            except (DTypeError, UndecidedDim) as exc:
                # Floats of different dtypes meet (around a Cast), or a shape rule's answer
                # depends on a symbol's value (a split of a symbolic dim): opaque.
                reason = str(exc)
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

    def _check_shape(self, where: str, name: str, v: Value) -> None:
        expected = self.info.get(name, (FLOAT, None))[1]
        if expected is not None and tuple(expected) != tuple(v.shape):
            raise FormatError(
                f"{where}: inconsistent shapes: ONNX infers {expected} for {name!r}, "
                f"the graph computes {v.shape}"
            )

    # -- values ----------------------------------------------------------------------------------
    def new(self, t: Tensor) -> Value:
        """The value of an IR tensor the importer built (its ONNX element type from its dtype)."""
        elem = {v: k for k, v in FLOAT_ELEM_DTYPES.items()}.get(t.dtype, FLOAT)
        return Value(elem, t.shape, tensor=t)

    def _fresh(self, base: str) -> str:
        name, k = base or "w", 1
        while name in self.used:
            name = f"{base}_{k}"
            k += 1
        self.used.add(name)
        return name

    def weight(self, base: str, data: np.ndarray, dtype: str | None = None) -> Tensor:
        """A new weight holding ``data`` in ``dtype`` (default: the data's own float dtype, float32
        for anything else)."""
        if dtype is None:
            dtype = const_dtype(data) if is_float_array(data) else "float32"
        arr = np.ascontiguousarray(widen_const(data))
        return self.g.weight(arr.shape, name=self._fresh(base), data=arr, dtype=dtype)

    def tensor(self, v: Value, name: str) -> Tensor:
        """The IR tensor of a float value (float32, float16 or bfloat16), turning a constant into
        a weight of its dtype (once)."""
        if v.tensor is not None:
            if v.elem_type not in FLOAT_ELEM_DTYPES:
                raise Unsupported(f"{name!r} has element type {elem_type_name(v.elem_type)}, not a float")
            return v.tensor
        if v.const is None:
            raise Unsupported(f"{name!r} is a shape value, not a float tensor")
        if not is_float_array(v.const):
            raise Unsupported(f"constant {name!r} has element type {v.const.dtype}, not a float")
        v.tensor = self.weight(name, v.const)
        return v.tensor

    def fusible_activation(self, out: str) -> str:
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

    def single_reader(self, out: str) -> int | None:
        """The index of the only node reading ``out`` (not a graph output, not already skipped),
        else None: a handler may then import that reader together with the node (:meth:`absorb`)."""
        users = self.consumers.get(out, [])
        if len(users) != 1 or out in self.graph_outputs or users[0] in self.skip:
            return None
        return users[0]

    def absorb(self, j: int, v: Value) -> None:
        """Node ``j`` (a reader found by :meth:`single_reader`) is imported as ``v``: skip it."""
        node = self.nodes[j]
        self._check_shape(self.where(j, node), node.output[0], v)
        self.skip.add(j)
        self.values[node.output[0]] = v

    def finish_fusion(self, v: Value) -> None:
        if self.pending_fusion is not None:
            j, name = self.pending_fusion
            self.skip.add(j)
            self.values[name] = v
            self.pending_fusion = None

    # -- constant folding and opaque nodes ---------------------------------------------------------
    def _shape_const(self, node: onnx.NodeProto, v: Value, a: OnnxAttrs) -> None:
        rank = len(v.shape)
        if node.op_type == "Size":
            dims = np.array(volume(v.shape), dtype=object)
        else:
            start, end = int(a.get("start", 0)), int(a.get("end", rank))
            start, end = (max(0, min(rank, k + rank if k < 0 else k)) for k in (start, end))
            dims = np.array(list(v.shape[start:end]), dtype=object)
        if has_symbols(dims):
            self.values[node.output[0]] = Value(7, tuple(dims.shape), sym=dims)
            return
        arr = dims.astype(np.int64)
        self.values[node.output[0]] = Value(7, tuple(arr.shape), const=arr)

    def _fold_shapes(self, node: onnx.NodeProto, ins: Ins) -> bool:
        """Fold a node on shape values (io/onnx_dims.py); False when it does not fold."""
        try:
            arrays = [None if v is None else _shape_value(v) for v in ins]
            outs = fold(node.op_type, arrays, _attrs(self.onnx, node))
        except NotFoldable as exc:
            log.debug("%s: %s", node.op_type, exc)
            return False
        elems = [v.elem_type for v in ins if v is not None]
        elem = out_elem_type(node.op_type, elems[0], _attrs(self.onnx, node), elems)
        for name, arr in zip([n for n in node.output if n], outs, strict=False):
            if has_symbols(arr):
                self.values[name] = Value(elem, tuple(arr.shape), sym=arr)
            else:
                const = concrete_array(arr, elem)
                self.values[name] = Value(elem, tuple(const.shape), const=const)
        return True

    def _probed(self) -> dict[str, Shape]:
        """The symbolic shapes ONNX could not name, fitted once (io/onnx_dims.py)."""
        if self.probed is None:
            inits = {t.name for t in self.model.graph.initializer} | set(self.detached)
            inputs = {
                vi.name: tuple(self._dim(d) for d in vi.type.tensor_type.shape.dim)
                for vi in self.model.graph.input
                if vi.name not in inits
            }
            self.probed = probe_shapes(self.model, self.symtab.symbols, inputs)
        return self.probed

    def _materialize(self, name: str, v: Value) -> None:
        """Give a shape value an IR tensor: opaque copies of the nodes that computed it, run at
        run time (its consumer cannot take it folded)."""
        j = self.producer.get(name)
        if j is None:
            raise FormatError(f"{self.source}: shape value {name!r} has no producing node")
        node = self.nodes[j]
        ins = [self.values.get(n) if n else None for n in node.input]
        made = self._opaque(j, node, ins, "a shape value read at run time", self.where(j, node), store=False)
        v.tensor = made[name].tensor

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
            self.values[name] = Value(_elem_type(onnx, arr), tuple(arr.shape), const=arr)

    def _opaque(
        self, i: int, node: onnx.NodeProto, ins: Ins, reason: str, where: str, store: bool = True
    ) -> dict[str, Value]:
        if self.strict:
            raise UnsupportedOpError(f"{where}: {reason}; strict import allows no opaque nodes")
        slots: list[Slot] = []
        tensors: list[Tensor] = []
        for name, v in zip(node.input, ins, strict=True):
            if v is None:
                slots.append(None)
            elif v.sym is not None:
                if v.tensor is None:
                    self._materialize(name, v)
                assert v.tensor is not None
                slots.append(TensorSlot(v.elem_type, v.shape))
                tensors.append(v.tensor)
            elif v.const is not None and (not is_float_array(v.const) or v.const.size <= EMBED_LIMIT):
                slots.append(ConstSlot(v.const))
            else:
                if v.tensor is None:
                    self.tensor(v, name)
                assert v.tensor is not None
                slots.append(TensorSlot(v.elem_type, v.shape))
                tensors.append(v.tensor)
        outputs: list[tuple[int, Shape] | None] = []
        for name in node.output:
            if not name:
                outputs.append(None)
                continue
            elem, shape = self.info.get(name, (0, None))
            if shape is None and self.symtab.symbols:
                shape = self._probed().get(name)
            if shape is None or not elem:
                head = f"{where}: ONNX shape inference gives no static shape and type for output {name!r}"
                if self.symtab.symbols:  # (io/onnx_dims.py: probe_shapes)
                    head += " and its size is no polynomial of the symbolic dims at the sizes run"
                raise naming(
                    FormatError,
                    f"{head}; opaque nodes need them (give static input shapes with ",
                    INPUT_SHAPES,
                    ", or simplify the model)",
                )
            outputs.append((elem, shape))
        functions = [f for f in self.model.functions if (f.domain, f.name) == (node.domain, node.op_type)]
        attrs = build_opaque(node, slots, outputs, self.model.opset_import, functions, where=where)
        results = self.g.add("opaque", tensors, **attrs)
        self.opaque_ops.append(node.op_type)
        present = [(name, out) for name, out in zip(node.output, outputs, strict=True) if name]
        made = {}
        for (name, out), t in zip(present, results, strict=True):
            assert out is not None
            made[name] = Value(out[0], t.shape, tensor=t)
        if store:
            self.values.update(made)
        return made

    def explicit_pad(
        self, i: int, node: onnx.NodeProto, x: Tensor, pads: Sequence[int], value: float
    ) -> Tensor:
        """``x`` (NCHW) padded spatially by ONNX-order pads (top, left, bottom, right) with zeros or
        -inf: an IR ``pad``, which a VALID window op then reads (exact)."""
        top, left, bottom, right = pads
        fill = "neg_inf" if value == float("-inf") else "zero"
        if fill == "zero" and value != 0.0:
            raise Unsupported(f"padding with {value:g} is not modelled")
        return self.g.add("pad", [x], pads=(0, 0, top, left, 0, 0, bottom, right), fill=fill)[0]


# ---------------------------------------------------------------------------------------------
# Small helpers
# ---------------------------------------------------------------------------------------------


def _shape_value(v: Value) -> np.ndarray:
    """A shape value, or an integer constant as one (io/onnx_dims.py)."""
    if v.sym is not None:
        return v.sym
    assert v.const is not None
    return as_values(v.const)


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


def _ir_dtype(onnx: Any, elem_type: int) -> str:
    """The IR dtype of an input's ONNX element type: integers and bools (ids, masks) are int64 to
    the IR, float16 and bfloat16 their own, anything else float32 (such inputs feed opaque nodes
    only, whose payloads declare the exact type)."""
    p = onnx.TensorProto
    if elem_type in (p.FLOAT16, p.BFLOAT16):
        return "float16" if elem_type == p.FLOAT16 else "bfloat16"
    ints = (p.INT8, p.INT16, p.INT32, p.INT64, p.UINT8, p.UINT16, p.UINT32, p.UINT64, p.BOOL)
    return "int64" if elem_type in ints else "float32"


def _elem_type(onnx: Any, arr: np.ndarray) -> int:
    return int(onnx.helper.np_dtype_to_tensor_dtype(arr.dtype))


def _first_line(exc: BaseException) -> str:
    """An exception's message on one line: onnx's and onnxruntime's span several, and their first
    line alone stops mid-sentence ("... however input 'b' of node: ")."""
    text = " ".join(str(exc).split())
    return text or type(exc).__name__


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
