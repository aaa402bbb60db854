"""The CostModel protocol, the accounting every cost model shares, and graph costs.

A cost model prices one operator instance in milliseconds from exactly what an e-graph extractor
knows about an e-node: the op name, its canonical attribute tuple, its input shapes and whether all
of its inputs depend only on weights. A graph costs the sum over its live operators (TASO's model:
serial execution, no overlap between kernels; ../reference/taso.md §2.2).

The rules that are the same for every model live in one place, :meth:`KernelCostModel.op_cost`:

* leaves (``input``, ``weight``), free views (reshape, transpose, split, dropout, noop) and the
  e-graph's projection op ``get`` cost 0;
* with ``weight_ops="fold"`` (the default) an op whose inputs are all weights costs 0, because it is
  precomputed once at load time; ``weight_ops="count"`` prices it like any other op, as TENSAT did;
* weight transforms (``merge``, ``enlarge``) on weights cost 0 in both modes, as in TASO;
* ``taso_compat=True`` makes concats free, as TASO's rewrite-created concats were (needCopy false);
  by default a concat of activations costs its memory traffic.

An op whose shapes hold symbolic dims (ir/symbolic.py) is priced at representative shapes: the
weighted mean of its price at a :class:`~tensor_eqsat.ir.symbolic.ShapePoints` set (TensorRT's
min/opt/max profiles with weights), by default at the symbols' hints. The kernels only ever see
concrete shapes.

Everything else is the subclass's :meth:`KernelCostModel.kernel_ms`, called once per distinct op
configuration: results are kept in a dict keyed by ``(op, attrs, in_shapes, all_weights)``, because
extraction asks for the same few configurations millions of times.

A model may also carry an :class:`EagerLaunch` composition (``execution``): the price of an op
is then what it adds to a PyTorch eager forward pass rather than its isolated kernel time (see
:mod:`tensor_eqsat.cost.execution`). It stays a per-op price, so extraction sums it like any other.

Alternatives rejected: a cost per e-node cached inside the e-graph (couples the e-graph to one cost
model), and a critical-path (parallel) graph cost (the paper's figures are TASO's serial sums).
"""

from __future__ import annotations

import abc
import copy
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol, runtime_checkable

from tensor_eqsat.cost.execution import EagerLaunch
from tensor_eqsat.errors import GraphError, TensorEqsatError
from tensor_eqsat.ir.dtypes import DType, op_dtype
from tensor_eqsat.ir.graph import Graph, Node
from tensor_eqsat.ir.ops import get_op
from tensor_eqsat.ir.opspec import PROJECTION, Attrs, OpSpec
from tensor_eqsat.ir.symbolic import ShapePoints, concrete, is_symbolic
from tensor_eqsat.ir.types import OpKind, Shape


class CostModelError(TensorEqsatError):
    """A cost model cannot be built or used (bad spec, bad profile, missing optional dependency)."""


class WeightOps(StrEnum):
    """How ops whose inputs are all weights are priced.

    FOLD: they cost 0 (precomputed at load time, in the original and the optimized graph alike).
    COUNT: they cost what any other op costs (TENSAT's accounting).
    """

    FOLD = "fold"
    COUNT = "count"


@runtime_checkable
class CostModel(Protocol):
    """Prices operator instances and graphs in milliseconds.

    ``op_cost`` receives what an extractor has for an e-node: the op name, its canonical attribute
    tuple (see :class:`~tensor_eqsat.ir.opspec.OpSpec`), the input shapes, and whether all inputs
    depend only on weights. ``graph_cost`` is the sum of ``op_cost`` over the graph's live nodes.
    """

    def op_cost(self, op: str, attrs: Attrs, in_shapes: Sequence[Shape], all_weights: bool) -> float:
        """Milliseconds of one instance of ``op``."""
        ...

    def graph_cost(self, graph: Graph) -> float:
        """Milliseconds of a whole graph (sum over its live nodes)."""
        ...


_FREE_KINDS = frozenset({OpKind.LEAF, OpKind.VIEW})

CostKey = tuple[Any, ...]
"""(op, attrs, in_shapes, all_weights) as given by the caller (shapes normalised when unhashable)."""


class KernelCostModel(abc.ABC):
    """Base class of the real cost models: shared free-op rules plus a per-configuration cache.

    Subclasses implement :meth:`kernel_ms`, the time of one kernel launch of a costed op; it is
    called at most once per ``(op, attrs, in_shapes)`` (and ``all_weights`` value).

    weight_ops: ``"fold"`` (default) or ``"count"``; see :class:`WeightOps`.
    taso_compat: make concats free as TASO's rewrite-created concats were. Default False.
    """

    execution: EagerLaunch | None = None
    """When set, :meth:`op_cost` is the op's share of an eager forward pass (its launch floor, and
    a host cost for views), not its isolated kernel time; see :mod:`tensor_eqsat.cost.execution`."""

    spec: str = "kernel"
    """The cost-model spec string this instance answers to (``"roofline:a100"`` ...)."""

    dtype: DType = DType.FLOAT32
    """The precision priced: bytes and compute rates of this dtype (see :meth:`with_dtype`)."""

    shape_points: ShapePoints | None = None
    """Where an op with symbolic dims is priced: the weighted mean of its price at these points
    (:meth:`at_shapes`). Default None: at the symbols' hints."""

    prices_op_dtype = True
    """:meth:`op_cost` takes the dtype each op runs in (``dtype=``): callers that know it pass it
    (a graph's costs, extraction), so a float32 island in a bfloat16 graph is priced in float32."""

    def __init__(self, *, weight_ops: WeightOps | str = WeightOps.FOLD, taso_compat: bool = False) -> None:
        try:
            self.weight_ops = WeightOps(weight_ops)
        except ValueError:
            choices = ", ".join(w.value for w in WeightOps)
            raise CostModelError(f"weight_ops must be one of {choices}, got {weight_ops!r}") from None
        self.taso_compat = bool(taso_compat)
        self._costs: dict[CostKey, float] = {}
        self._by_dtype: dict[DType, KernelCostModel] = {}

    # -- the protocol ---------------------------------------------------------------------------
    def op_cost(
        self,
        op: str,
        attrs: Attrs,
        in_shapes: Sequence[Shape],
        all_weights: bool,
        dtype: DType | str | None = None,
    ) -> float:
        """Milliseconds of one instance of ``op`` (cached per configuration).

        dtype: the precision the op runs in (:func:`~tensor_eqsat.ir.dtypes.op_dtype` of its
            inputs' dtypes): an op in another dtype than :attr:`dtype` is priced by this model in
            that dtype (:meth:`with_dtype`, made once per dtype), its bytes and rates. Default
            None: :attr:`dtype`.

        Raises GraphError for an unknown op and ShapeError when the shapes do not suit it.
        """
        if dtype is not None and dtype != self.dtype:
            return self.in_dtype(dtype).op_cost(op, attrs, in_shapes, all_weights)
        key = (op, attrs, in_shapes, all_weights)
        try:
            return self._costs[key]
        except KeyError:
            pass
        except TypeError:
            # Unhashable shapes (lists): normalise once, then use the same cache.
            in_shapes = tuple(tuple(int(d) for d in s) for s in in_shapes)
            key = (op, attrs, in_shapes, all_weights)
            cached = self._costs.get(key)
            if cached is not None:
                return cached
        cost = self._price(op, attrs, tuple(in_shapes), bool(all_weights))
        self._costs[key] = cost
        return cost

    def graph_cost(self, graph: Graph) -> float:
        """Milliseconds of ``graph``: the sum of :meth:`op_cost` over its live nodes."""
        return graph_cost(self, graph)

    # -- the shared rules -----------------------------------------------------------------------
    def _price(self, op: str, attrs: Attrs, in_shapes: tuple[Shape, ...], all_weights: bool) -> float:
        if op == PROJECTION:
            return 0.0
        spec = get_op(op)
        if any(is_symbolic(d) for s in in_shapes for d in s) or spec.has_symbolic_attrs(attrs):
            return self._price_symbolic(spec, attrs, in_shapes, all_weights)
        # Reject malformed configurations first, free or not, so a bad e-node never prices silently.
        spec.infer_shapes(in_shapes, attrs)
        launch = self.execution
        if not self.is_costed(spec, all_weights):
            if launch is not None and spec.kind is OpKind.VIEW and not all_weights and op != "noop":
                return launch.view_ms
            return 0.0
        if launch is not None:
            return launch.op_ms(float(self.kernel_ms(spec, attrs, in_shapes)))
        return float(self.kernel_ms(spec, attrs, in_shapes))

    def _price_symbolic(
        self, spec: OpSpec, attrs: Attrs, in_shapes: tuple[Shape, ...], all_weights: bool
    ) -> float:
        """The weighted mean of the op's price at the representative shapes (:attr:`shape_points`,
        or the hints): a configuration with symbolic dims is priced where it will run."""
        points = self.shape_points.points if self.shape_points is not None else ((1.0, {}),)
        total = sum(w for w, _ in points)
        cost = 0.0
        for weight, point in points:
            shapes = tuple(concrete(s, point) for s in in_shapes)
            cost += weight * self.op_cost(spec.name, spec.at(attrs, point), shapes, all_weights)
        return cost / total

    def at_shapes(self, points: ShapePoints | None) -> KernelCostModel:
        """This model pricing symbolic dims at ``points`` (None: at the hints); a copy with its own
        per-configuration cache, or itself when the points are the same."""
        if points == self.shape_points:
            return self
        out = copy.copy(self)
        out.shape_points = points
        out._costs = {}
        out._by_dtype = {}
        return out

    def is_costed(self, spec: OpSpec, all_weights: bool) -> bool:
        """Whether an instance of ``spec`` runs a kernel under this model's accounting."""
        kind = spec.kind
        if kind in _FREE_KINDS:
            return False
        if all_weights and (self.weight_ops is WeightOps.FOLD or kind is OpKind.WEIGHT_TRANSFORM):
            return False
        return not (self.taso_compat and kind is OpKind.MEMORY)

    @abc.abstractmethod
    def kernel_ms(self, spec: OpSpec, attrs: Attrs, in_shapes: tuple[Shape, ...]) -> float:
        """Milliseconds of one launch of a costed op (never a leaf, view or folded op).

        The configuration has already passed shape inference.
        """

    def with_dtype(self, dtype: DType | str) -> KernelCostModel:
        """This model pricing graphs that run in ``dtype`` (itself when it does already): the
        copy's own per-configuration cache starts empty. Subclasses read :attr:`dtype` for bytes
        and rates; one that does not prices every dtype alike.

        >>> from tensor_eqsat.cost.roofline import RooflineCostModel
        >>> m = RooflineCostModel(profile="a100")
        >>> half = m.with_dtype("bf16")
        >>> half.dtype, m.dtype
        (<DType.BFLOAT16: 'bfloat16'>, <DType.FLOAT32: 'float32'>)
        """
        d = DType.parse(dtype)
        if d is self.dtype:
            return self
        out = copy.copy(self)
        out.dtype = d
        out._costs = {}
        out._by_dtype = {}
        return out

    def in_dtype(self, dtype: DType | str) -> KernelCostModel:
        """This model pricing in ``dtype``: :meth:`with_dtype`, made once per dtype and kept (its
        per-configuration cache with it)."""
        d = DType.parse(dtype)
        if d is self.dtype:
            return self
        if d not in self._by_dtype:
            self._by_dtype[d] = self.with_dtype(d)
        return self._by_dtype[d]

    @property
    def itemsize(self) -> int:
        """Bytes per element of the priced dtype."""
        return self.dtype.itemsize

    @property
    def cache_size(self) -> int:
        """Number of distinct op configurations priced so far."""
        return len(self._costs)

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(spec={self.spec!r}, weight_ops={self.weight_ops.value!r}, "
            f"taso_compat={self.taso_compat})"
        )


class UnitCostModel(KernelCostModel):
    """Every costed op costs 1.0: the trivial default, handy for tests and for counting kernels.

    The free-op, weight-folding and ``taso_compat`` rules are the same as for the real models.

    >>> from tensor_eqsat.ir.graph import Graph
    >>> g = Graph()
    >>> x = g.input((1, 8))
    >>> y = g.relu(g.reshape(g.relu(x), (8, 1)))
    >>> g.output(y)
    >>> UnitCostModel().graph_cost(g)
    2.0
    """

    spec = "unit"

    def kernel_ms(self, spec: OpSpec, attrs: Attrs, in_shapes: tuple[Shape, ...]) -> float:
        return 1.0


# ---------------------------------------------------------------------------------------------
# Graph costs
# ---------------------------------------------------------------------------------------------


def weight_only_flags(graph: Graph) -> list[bool]:
    """Per node id: True when the node depends only on weights.

    A weight leaf is weight-only; an input leaf is not; any other node is weight-only when every
    one of its inputs is.
    """
    flags: list[bool] = []
    for n in graph.nodes:
        if n.op == "weight":
            flags.append(True)
        elif not n.inputs:
            flags.append(False)
        else:
            flags.append(all(flags[src] for src, _ in n.inputs))
    return flags


def node_costs(model: CostModel, graph: Graph) -> Iterator[tuple[Node, float]]:
    """(node, milliseconds) for every live node of ``graph``, in topological order.

    Live nodes are those some graph output depends on; weights that hang off nothing and other dead
    nodes are not part of the computation. Raises GraphError when the graph has no outputs.
    """
    if not graph.outputs:
        raise GraphError("cannot cost a graph with no outputs")
    live = graph.live_nodes()
    flags = weight_only_flags(graph)
    typed = getattr(model, "prices_op_dtype", False)
    for n in graph.nodes:
        if n.id not in live or not n.inputs:
            continue
        in_shapes = tuple(graph.shape_of(r) for r in n.inputs)
        # A node's "all inputs are weights" is the flag of its inputs, i.e. its own flag.
        if typed:
            # Each op in its own precision (an fp32 softmax island of a bf16 graph in fp32).
            dtype = op_dtype([graph.dtype_of(r) for r in n.inputs])
            yield n, model.op_cost(n.op, n.attrs, in_shapes, flags[n.id], dtype=dtype)  # type: ignore[call-arg]
        else:
            yield n, model.op_cost(n.op, n.attrs, in_shapes, flags[n.id])


def graph_cost(model: CostModel, graph: Graph) -> float:
    """Milliseconds of ``graph`` under ``model``: the sum over its live nodes (see :func:`node_costs`),
    plus, for a model that prices an execution mode, the fixed cost of one forward pass
    (:attr:`EagerLaunch.pass_ms`: the same for every graph, so no extraction depends on it)."""
    return sum(cost for _, cost in node_costs(model, graph)) + pass_cost(model)


def pass_cost(model: CostModel) -> float:
    """The fixed cost of one forward pass under ``model`` (0 without an execution mode)."""
    execution = getattr(model, "execution", None)
    return execution.pass_ms if isinstance(execution, EagerLaunch) else 0.0


@dataclass(frozen=True)
class CostReport:
    """A graph's cost and where it goes.

    total_ms: the graph cost.
    by_op: op name -> milliseconds summed over its live instances (descending).
    count_by_op: op name -> number of live instances (free ones included).
    by_kind: op kind (``"gemm"``, ``"conv"``, ...) -> milliseconds.
    kernels: number of live instances that run a kernel (a non-zero cost, views excluded).
    pass_ms: the forward pass's fixed cost (in ``total_ms``, in no op), 0 without an execution mode.
    """

    total_ms: float
    by_op: dict[str, float] = field(default_factory=dict)
    count_by_op: dict[str, int] = field(default_factory=dict)
    by_kind: dict[str, float] = field(default_factory=dict)
    kernels: int = 0
    pass_ms: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict with ``cost_ms``, ``by_op``, ``count_by_op``, ``by_kind``, ``kernels``,
        ``pass_ms``."""
        return {
            "cost_ms": self.total_ms,
            "by_op": dict(self.by_op),
            "count_by_op": dict(self.count_by_op),
            "by_kind": dict(self.by_kind),
            "kernels": self.kernels,
            "pass_ms": self.pass_ms,
        }


def cost_breakdown(model: CostModel, graph: Graph) -> CostReport:
    """The graph cost of ``graph`` with its per-op-type and per-kind breakdown.

    >>> from tensor_eqsat.ir.graph import Graph
    >>> g = Graph()
    >>> x = g.input((4, 4))
    >>> g.output(g.relu(g.ewadd(x, g.relu(x))))
    >>> r = cost_breakdown(UnitCostModel(), g)
    >>> r.total_ms, r.by_op, r.count_by_op
    (3.0, {'relu': 2.0, 'ewadd': 1.0}, {'relu': 2, 'ewadd': 1})
    """
    by_op: dict[str, float] = {}
    counts: Counter[str] = Counter()
    by_kind: dict[str, float] = {}
    total = 0.0
    kernels = 0
    for node, cost in node_costs(model, graph):
        counts[node.op] += 1
        by_op[node.op] = by_op.get(node.op, 0.0) + cost
        kind = node.spec.kind.value
        by_kind[kind] = by_kind.get(kind, 0.0) + cost
        total += cost
        kernels += cost > 0.0 and node.spec.kind is not OpKind.VIEW  # eager views cost a host call
    order = sorted(by_op, key=lambda op: (-by_op[op], op))
    fixed = pass_cost(model)
    return CostReport(
        total_ms=total + fixed,
        by_op={op: by_op[op] for op in order},
        count_by_op={op: counts[op] for op in order},
        by_kind=dict(sorted(by_kind.items(), key=lambda kv: (-kv[1], kv[0]))),
        kernels=kernels,
        pass_ms=fixed,
    )
