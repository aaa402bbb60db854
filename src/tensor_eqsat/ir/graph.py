"""Graph: a tensor computation graph and its builder API.

A :class:`Graph` is a list of :class:`Node` in topological order (the builder only accepts inputs
that already exist), plus a list of output tensors. Every builder call validates its attributes
and infers output shapes on the spot, so a shape error surfaces on the line that wrote it::

    >>> g = Graph()
    >>> x = g.input((1, 64, 56, 56))
    >>> w = g.weight((64, 64, 3, 3))
    >>> y = g.conv2d(x, w, stride=(1, 1), padding="same", activation="relu")
    >>> g.output(y)
    >>> y.shape
    (1, 64, 56, 56)

Weights may carry data (``g.weight(shape, data=array)``, as ONNX initializers do); weights without
data get seeded random values in the interpreter, drawn per weight name.

A dim may be symbolic (ir/symbolic.py: a name, a hint and a range); :meth:`Graph.at` takes such a
graph at concrete sizes.

Every tensor has a dtype (``float32`` unless a leaf says otherwise: ``g.input(shape,
dtype="bfloat16")``); ops infer theirs with their shapes (ir/dtypes.py)::

    >>> h = Graph()
    >>> a = h.input((2, 3), dtype="float16"); b = h.weight((3, 4), dtype="float16")
    >>> h.matmul(a, b).dtype
    'float16'
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tensor_eqsat.errors import GraphError
from tensor_eqsat.ir.dtypes import DType, round_to
from tensor_eqsat.ir.ops import get_op
from tensor_eqsat.ir.opspec import Attrs, OpSpec
from tensor_eqsat.ir.symbolic import Point, Symbol, is_symbolic, symbols_of
from tensor_eqsat.ir.types import Shape, volume

TensorRef = tuple[int, int]
"""(node id, output index)."""


@dataclass(frozen=True)
class Node:
    """One operator instance. ``inputs`` are (node id, output index) pairs of earlier nodes;
    ``dtypes`` has one dtype name per output, as ``shapes`` has one shape (default: float32 for
    every output)."""

    id: int
    op: str
    attrs: Attrs
    inputs: tuple[TensorRef, ...]
    shapes: tuple[Shape, ...]
    dtypes: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self.dtypes:
            object.__setattr__(self, "dtypes", ("float32",) * len(self.shapes))

    @property
    def spec(self) -> OpSpec:
        return get_op(self.op)

    def attr_dict(self) -> dict[str, Any]:
        """Named attributes (a fresh dict)."""
        return dict(self.spec.attr_dict(self.attrs))


@dataclass(frozen=True)
class Tensor:
    """A handle to one output of a node of a particular graph."""

    node: int
    index: int
    shape: Shape
    graph: Graph = field(compare=False, repr=False, hash=False)

    @property
    def dtype(self) -> str:
        """The dtype name of this tensor (``float32``, ``float16``, ``bfloat16``, ``int64``)."""
        return self.graph.dtype_of(self.ref)

    @property
    def ref(self) -> TensorRef:
        return (self.node, self.index)


class Graph:
    """A tensor computation graph (see the module docstring for an example)."""

    def __init__(self) -> None:
        self.nodes: list[Node] = []
        self.outputs: list[TensorRef] = []
        self.weight_data: dict[str, np.ndarray] = {}
        self._names: dict[str, int] = {}
        self._counters: Counter[str] = Counter()

    # -- generic construction ------------------------------------------------------------------
    def add(self, op: str, inputs: Sequence[Tensor], **attrs: Any) -> tuple[Tensor, ...]:
        """Add one op instance and return its output tensors.

        Raises GraphError (unknown op, arity, foreign tensor), AttributeValueError or ShapeError.
        """
        spec = get_op(op)
        spec.check_arity(len(inputs))
        refs = []
        for i, t in enumerate(inputs):
            if not isinstance(t, Tensor):
                raise GraphError(f"{op}: input {i} is {type(t).__name__}, not a Tensor")
            if t.graph is not self:
                raise GraphError(f"{op}: input {i} belongs to another graph")
            refs.append(t.ref)
        in_shapes = [t.shape for t in inputs]
        if spec.canonicalize is not None:
            attrs = spec.canonicalize(in_shapes, dict(attrs))
        canon = spec.make_attrs(**attrs)
        shapes = spec.infer_shapes(in_shapes, canon)
        dtypes = spec.infer_dtypes([self.dtype_of(r) for r in refs], canon, len(shapes))
        self._claim_name(spec, canon)
        return self._append_raw(op, canon, tuple(refs), shapes, dtypes)

    def add_node(self, op: str, attrs: Attrs, inputs: Sequence[TensorRef]) -> tuple[Tensor, ...]:
        """Add a node from canonical attributes and raw (node, index) refs (used by converters)."""
        spec = get_op(op)
        spec.check_arity(len(inputs))
        in_shapes = []
        in_dtypes = []
        for node, idx in inputs:
            if not 0 <= node < len(self.nodes) or not 0 <= idx < len(self.nodes[node].shapes):
                raise GraphError(f"{op}: input ({node}, {idx}) does not exist")
            in_shapes.append(self.nodes[node].shapes[idx])
            in_dtypes.append(self.nodes[node].dtypes[idx])
        attrs = tuple(attrs)
        if len(attrs) < len(spec.attrs) and all(not a.required for a in spec.attrs[len(attrs) :]):
            # Trailing attributes with defaults may be omitted (written before they existed).
            attrs = attrs + tuple(a.default for a in spec.attrs[len(attrs) :])
        if len(attrs) != len(spec.attrs):
            raise GraphError(
                f"{op}: expected {len(spec.attrs)} attribute values ({', '.join(spec.attr_names)}), "
                f"got {len(attrs)}"
            )
        # Re-validate: the tuple may come from a converter or a file, not from make_attrs.
        canon = spec.make_attrs(**dict(zip(spec.attr_names, attrs, strict=True)))
        shapes = spec.infer_shapes(in_shapes, canon)
        dtypes = spec.infer_dtypes(in_dtypes, canon, len(shapes))
        self._claim_name(spec, canon)
        return self._append_raw(op, canon, tuple((int(n), int(i)) for n, i in inputs), shapes, dtypes)

    def _claim_name(self, spec: OpSpec, attrs: Attrs) -> None:
        """Register the name of an input or weight about to be appended; names are unique."""
        if not spec.is_leaf:
            return
        name = spec.attr(attrs, "name")
        if name in self._names:
            raise GraphError(f"{spec.name}: name {name!r} is already used")
        self._names[name] = len(self.nodes)

    def _append_raw(
        self,
        op: str,
        attrs: Attrs,
        refs: tuple[TensorRef, ...],
        shapes: tuple[Shape, ...],
        dtypes: tuple[str, ...],
    ) -> tuple[Tensor, ...]:
        node = Node(len(self.nodes), op, attrs, refs, shapes, tuple(str(d) for d in dtypes))
        self.nodes.append(node)
        return tuple(Tensor(node.id, i, s, self) for i, s in enumerate(shapes))

    def _one(self, op: str, inputs: Sequence[Tensor], **attrs: Any) -> Tensor:
        return self.add(op, inputs, **attrs)[0]

    def _leaf(self, op: str, shape: Sequence[int], name: str | None, dtype: str = "float32") -> Tensor:
        if name is None:
            prefix = "input" if op == "input" else "w"
            while True:
                name = f"{prefix}_{self._counters[op]}"
                self._counters[op] += 1
                if name not in self._names:
                    break
        return self._one(op, [], shape=shape, name=name, dtype=DType.parse(dtype).value)

    # -- leaves ----------------------------------------------------------------------------------
    def input(self, shape: Sequence[int], name: str | None = None, dtype: str = "float32") -> Tensor:
        """A graph input. Names are generated (``input_0``...) when not given and must be unique.

        dtype: a dtype name or short name (``bf16``). Default ``float32``.
        """
        return self._leaf("input", shape, name, dtype)

    def weight(
        self,
        shape: Sequence[int],
        name: str | None = None,
        data: np.ndarray | None = None,
        dtype: str = "float32",
    ) -> Tensor:
        """A weight (a constant known at load time), optionally with its data (rounded to
        ``dtype``, default ``float32``, and kept in its storage type: ir/dtypes.py)."""
        t = self._leaf("weight", shape, name, dtype)
        if data is not None:
            arr = round_to(np.asarray(data, dtype=np.float32), t.dtype)
            if arr.shape != t.shape:
                raise GraphError(f"weight {self.name_of(t)!r}: data shape {arr.shape} != declared {t.shape}")
            self.weight_data[self.name_of(t)] = arr
        return t

    # -- ops -------------------------------------------------------------------------------------
    def ewadd(self, a: Tensor, b: Tensor) -> Tensor:
        return self._one("ewadd", [a, b])

    def ewmul(self, a: Tensor, b: Tensor) -> Tensor:
        return self._one("ewmul", [a, b])

    def smul(self, x: Tensor, scalar: float) -> Tensor:
        return self._one("smul", [x], scalar=scalar)

    def sdiv(self, x: Tensor, divisor: float) -> Tensor:
        return self._one("sdiv", [x], divisor=divisor)

    def relu(self, x: Tensor) -> Tensor:
        return self._one("relu", [x])

    def tanh(self, x: Tensor) -> Tensor:
        return self._one("tanh", [x])

    def sigmoid(self, x: Tensor) -> Tensor:
        return self._one("sigmoid", [x])

    def gelu(self, x: Tensor, approximate: str = "none") -> Tensor:
        return self._one("gelu", [x], approximate=approximate)

    def transpose(self, x: Tensor, perm: Sequence[int]) -> Tensor:
        return self._one("transpose", [x], perm=perm)

    def matmul(self, a: Tensor, b: Tensor, activation: str = "none") -> Tensor:
        return self._one("matmul", [a, b], activation=activation)

    def conv2d(
        self,
        x: Tensor,
        w: Tensor,
        stride: Sequence[int] = (1, 1),
        padding: str = "same",
        activation: str = "none",
    ) -> Tensor:
        return self._one("conv2d", [x, w], stride=stride, padding=padding, activation=activation)

    def enlarge(self, w: Tensor, reference: Tensor) -> Tensor:
        return self._one("enlarge", [w, reference])

    def merge(self, w: Tensor, count: int, groups: int) -> Tensor:
        return self._one("merge", [w], count=count, groups=groups)

    def dropout(self, x: Tensor, rate: float = 0.0) -> Tensor:
        return self._one("dropout", [x], rate=rate)

    def poolmax(
        self,
        x: Tensor,
        kernel: Sequence[int],
        stride: Sequence[int] = (1, 1),
        padding: str = "valid",
        activation: str = "none",
    ) -> Tensor:
        return self._one("poolmax", [x], kernel=kernel, stride=stride, padding=padding, activation=activation)

    def poolavg(
        self,
        x: Tensor,
        kernel: Sequence[int],
        stride: Sequence[int] = (1, 1),
        padding: str = "valid",
        activation: str = "none",
    ) -> Tensor:
        return self._one("poolavg", [x], kernel=kernel, stride=stride, padding=padding, activation=activation)

    def concat(self, xs: Sequence[Tensor], axis: int) -> Tensor:
        if isinstance(xs, Tensor):
            raise GraphError("concat: takes a sequence of tensors, got a single Tensor")
        return self._one("concat", list(xs), axis=axis)

    def split(self, x: Tensor, axis: int, sizes: Sequence[int]) -> tuple[Tensor, ...]:
        return self.add("split", [x], axis=axis, sizes=sizes)

    def reshape(self, x: Tensor, shape: Sequence[int]) -> Tensor:
        return self._one("reshape", [x], shape=shape)

    def noop(self, *xs: Tensor) -> Tensor:
        return self._one("noop", list(xs))

    def batchnorm(
        self, x: Tensor, scale: Tensor, bias: Tensor, mean: Tensor, var: Tensor, eps: float = 1e-5
    ) -> Tensor:
        return self._one("batchnorm", [x, scale, bias, mean, var], eps=eps)

    def softmax(self, x: Tensor, axis: int = -1) -> Tensor:
        return self._one("softmax", [x], axis=axis)

    def layernorm(self, x: Tensor, scale: Tensor, bias: Tensor, axis: int = -1, eps: float = 1e-5) -> Tensor:
        return self._one("layernorm", [x, scale, bias], axis=axis, eps=eps)

    def cast(self, x: Tensor, dtype: str) -> Tensor:
        """``x`` converted to the floating dtype ``dtype`` (ir/ops_dtype.py)."""
        return self._one("cast", [x], dtype=dtype)

    # -- outputs and queries ---------------------------------------------------------------------
    def output(self, *tensors: Tensor) -> None:
        """Mark tensors as graph outputs (in order; call again to add more)."""
        for t in tensors:
            if not isinstance(t, Tensor) or t.graph is not self:
                raise GraphError("output: expected a Tensor of this graph")
            self.outputs.append(t.ref)

    def tensor(self, ref: TensorRef) -> Tensor:
        """The Tensor handle of a (node, index) ref."""
        node, idx = ref
        return Tensor(node, idx, self.nodes[node].shapes[idx], self)

    def shape_of(self, ref: TensorRef) -> Shape:
        return self.nodes[ref[0]].shapes[ref[1]]

    def dtype_of(self, ref: TensorRef) -> str:
        """The dtype name of the tensor ``ref``."""
        return self.nodes[ref[0]].dtypes[ref[1]]

    def name_of(self, t: Tensor | int) -> str:
        """The name of an input or weight tensor (or node id)."""
        node = self.nodes[t.node if isinstance(t, Tensor) else t]
        if not node.spec.is_leaf:
            raise GraphError(f"node {node.id} ({node.op}) has no name")
        return str(node.spec.attr(node.attrs, "name"))

    def __iter__(self) -> Iterator[Node]:
        """Nodes in topological order."""
        return iter(self.nodes)

    def __len__(self) -> int:
        return len(self.nodes)

    def inputs(self) -> list[Node]:
        return [n for n in self.nodes if n.op == "input"]

    def weights(self) -> list[Node]:
        return [n for n in self.nodes if n.op == "weight"]

    def op_counts(self, include_leaves: bool = False) -> dict[str, int]:
        """Op name -> count (leaves excluded unless asked), in first-seen order."""
        counts: Counter[str] = Counter()
        for n in self.nodes:
            if include_leaves or not n.spec.is_leaf:
                counts[n.op] += 1
        return dict(counts)

    def num_parameters(self) -> int:
        """Total number of weight elements."""
        return sum(volume(n.shapes[0]) for n in self.weights())

    def consumers(self) -> dict[int, list[int]]:
        """Node id -> ids of nodes that read one of its outputs."""
        out: dict[int, list[int]] = {n.id: [] for n in self.nodes}
        for n in self.nodes:
            for src, _ in n.inputs:
                out[src].append(n.id)
        return out

    def live_nodes(self) -> set[int]:
        """Ids of nodes that some output depends on."""
        seen: set[int] = set()
        stack = [ref[0] for ref in self.outputs]
        while stack:
            nid = stack.pop()
            if nid in seen:
                continue
            seen.add(nid)
            stack.extend(src for src, _ in self.nodes[nid].inputs)
        return seen

    # -- symbolic dims (ir/symbolic.py) -------------------------------------------------------
    def symbols(self) -> dict[str, Symbol]:
        """The symbols of the graph's symbolic dims, by name (empty for a static graph)."""
        return symbols_of(s for n in self.nodes for s in n.shapes)

    @property
    def is_symbolic(self) -> bool:
        """Whether some dim of the graph is symbolic."""
        return any(is_symbolic(d) for n in self.nodes for s in n.shapes for d in s)

    def at(self, point: Point | None = None) -> Graph:
        """This graph with every symbol taken at ``point`` (missing symbols, or all when None, at
        their hints): the static graph the interpreter, the check and the cost models run. Node
        ids, names and weight data are the same; a static graph is returned as it is.

        >>> from tensor_eqsat.ir.symbolic import SymDim
        >>> g = Graph(); s = SymDim.symbol("s", hint=4, lo=2)
        >>> x = g.input((s, 8), name="x"); g.output(g.reshape(x, (2 * s, 4)))
        >>> y = g.outputs[0]
        >>> g.shape_of(y), g.at().shape_of(y), g.at({"s": 3}).shape_of(y)
        ((2*s, 4), (8, 4), (6, 4))
        """
        if not self.is_symbolic:
            return self
        out = Graph()
        for n in self.nodes:
            out.add_node(n.op, n.spec.at(n.attrs, point or {}), n.inputs)
        out.outputs = list(self.outputs)
        out.weight_data = dict(self.weight_data)
        return out

    def point_of(self, inputs: Mapping[str, Any]) -> dict[str, int]:
        """The values of the symbols that the arrays ``inputs`` (by input name) give: each input
        dim that is one symbol reads its array's size there. Raises GraphError when two inputs
        disagree on a symbol."""
        point: dict[str, int] = {}
        for n in self.inputs():
            arr = inputs.get(self.name_of(n.id))
            shape = getattr(arr, "shape", None)
            if shape is None or len(shape) != len(n.shapes[0]):
                continue
            for d, size in zip(n.shapes[0], shape, strict=True):
                if is_symbolic(d) and d.expr.is_Symbol:
                    name = str(d.expr)
                    if point.setdefault(name, int(size)) != int(size):
                        raise GraphError(f"inputs disagree on symbol {name}: {point[name]} and {size}")
        return point

    def validate(self) -> None:
        """Re-check every node (arity, attributes, shapes, topological order) and the outputs."""
        for n in self.nodes:
            spec = n.spec
            spec.check_arity(len(n.inputs))
            for src, idx in n.inputs:
                if not 0 <= src < n.id:
                    raise GraphError(f"node {n.id} ({n.op}): input node {src} is not an earlier node")
                if not 0 <= idx < len(self.nodes[src].shapes):
                    raise GraphError(f"node {n.id} ({n.op}): input ({src}, {idx}) does not exist")
            shapes = spec.infer_shapes([self.shape_of(r) for r in n.inputs], n.attrs)
            if shapes != n.shapes:
                raise GraphError(f"node {n.id} ({n.op}): stored shapes {n.shapes} != inferred {shapes}")
            dtypes = spec.infer_dtypes([self.dtype_of(r) for r in n.inputs], n.attrs, len(shapes))
            if dtypes != n.dtypes:
                raise GraphError(f"node {n.id} ({n.op}): stored dtypes {n.dtypes} != inferred {dtypes}")
        if not self.outputs:
            raise GraphError("graph has no outputs")
        for ref in self.outputs:
            if not 0 <= ref[0] < len(self.nodes) or not 0 <= ref[1] < len(self.nodes[ref[0]].shapes):
                raise GraphError(f"output {ref} does not exist")
