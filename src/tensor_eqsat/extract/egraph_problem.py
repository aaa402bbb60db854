"""From an e-graph and a cost model to an ExtractionProblem, and from a result back to a Graph.

The e-graph is read only through its public API (``classes()`` with ``id``, ``nodes`` and
``data``; ``data(cid)``; ``roots``; ``blacklist``; ``to_graph(choice)``), so extraction does not
depend on the engine's internals. A node's own cost is what the cost model charges for that
operator instance: ``op_cost(op, attrs, in_shapes, all_weights)`` with the shapes of its child
classes and whether every child depends only on weights, exactly as the cost model prices a
node of a :class:`~tensor_eqsat.ir.graph.Graph` (and, for a model that ``prices_op_dtype``, in
the dtype of its inputs, :func:`~tensor_eqsat.ir.dtypes.op_dtype`). Leaves (inputs, weights) and ``get``
projections cost 0, as they do in a graph's cost, so the DAG cost of an extraction equals the
cost model's ``graph_cost`` of the extracted graph.

Classes keep the e-graph's order and nodes their order within a class. Node costs can be kept
across calls in a :class:`NodeCostCache` (an e-node's cost never changes while its children keep
their ids), which makes rebuilding the problem after each search step cheap.

Usage (an e-graph and a cost model from their own modules)::

    ep = problem_from_egraph(egraph, cost_model)
    graph = ep.to_graph(GreedyDagExtractor().extract(ep.problem))
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol, overload

from tensor_eqsat.extract.problem import ExtractionError, ExtractionProblem
from tensor_eqsat.extract.result import ExtractionResult
from tensor_eqsat.ir.dtypes import op_dtype
from tensor_eqsat.ir.graph import Graph
from tensor_eqsat.ir.opspec import PROJECTION


class OpCostModel(Protocol):
    """What extraction needs of a cost model (:class:`tensor_eqsat.cost.model.CostModel`)."""

    def op_cost(self, op: str, attrs: Any, in_shapes: Sequence[Any], all_weights: bool) -> float: ...


class EGraphLike(Protocol):
    """What extraction needs of an e-graph (:class:`tensor_eqsat.egraph.EGraph`)."""

    @property
    def roots(self) -> list[int]: ...

    @property
    def blacklist(self) -> frozenset[Any]: ...

    def classes(self) -> Iterable[Any]: ...

    def to_graph(self, choice: Mapping[int, Any]) -> Graph: ...

    def canonicalize(self, node: Any) -> Any: ...


NodeCostCache = dict[tuple[Any, ...], float]
"""(e-node, child all-weights flags) -> own cost; reusable across problems of one e-graph and
one cost model."""


class EGraphProblem:
    """An ExtractionProblem built from an e-graph, with the e-nodes behind its node indices.

    Attributes:
        problem: the extraction problem (class keys are the e-graph's class ids).
        egraph: the e-graph it was built from.
        enodes: the e-node of each problem node index.
    """

    __slots__ = ("egraph", "enodes", "problem")

    def __init__(self, problem: ExtractionProblem, egraph: EGraphLike, enodes: list[Any]) -> None:
        self.problem = problem
        self.egraph = egraph
        self.enodes = enodes

    def choice(self, result: ExtractionResult) -> dict[int, Any]:
        """class id -> chosen e-node, for the classes reachable from the roots."""
        if result.problem is not self.problem:
            raise ExtractionError("the result answers a different extraction problem")
        keys = self.problem.class_keys
        return {keys[c]: self.enodes[result.choices[c]] for c in result.topo_classes()}  # type: ignore[misc]

    def carry_over(self, nodes: Iterable[Any]) -> list[int]:
        """A choice per class (problem node index, or -1) made of ``nodes``: the e-nodes an
        extraction chose in an earlier e-graph of this one's history, canonicalized into this one.
        A node no longer here is left out; where two fall into one class, the first is kept.

        What an earlier answer still offers: a warm start for the ILP (``IlpExtractor.extract``'s
        ``hint``), and the test that a rule application lost no earlier extraction. Because the
        non-blacklisted e-graph is acyclic, any one non-blacklisted node per class is an acyclic
        choice, so if every node of an earlier answer is still here and not blacklisted, this
        choice is a valid extraction of no higher DAG cost (it uses a subset of those nodes).
        """
        index = {node: i for i, node in enumerate(self.enodes)}
        problem = self.problem
        choice = [-1] * problem.num_classes
        for node in nodes:
            try:
                i = index.get(self.egraph.canonicalize(node))
            except (IndexError, KeyError):  # a class of another branch's e-graph
                continue
            if i is not None and choice[problem.node_class[i]] < 0:
                choice[problem.node_class[i]] = i
        return choice

    def to_graph(self, result: ExtractionResult) -> Graph:
        """The extracted graph (validated first; raises ExtractionError on an invalid result)."""
        result.check()
        return self.egraph.to_graph(self.choice(result))


def _single_dtype(data: Any) -> str | None:
    """The dtype of a class's single output (None for a multi-output class or one without dtypes)."""
    kinds = getattr(data, "dtypes", None)
    return kinds[0] if kinds is not None and len(kinds) == 1 else None


def problem_from_egraph(
    egraph: EGraphLike, cost_model: OpCostModel, *, cache: NodeCostCache | None = None
) -> EGraphProblem:
    """The extraction problem of ``egraph`` priced by ``cost_model``.

    Args:
        egraph: the e-graph (rebuilt by its ``classes()``).
        cost_model: prices each operator instance in ms.
        cache: optional node-cost cache shared across calls for the same e-graph lineage and cost
            model. Default: none.

    Raises:
        ExtractionError: the e-graph has no roots or a node names an unknown class.
        ShapeError / GraphError: from the cost model, for a node it cannot price.
    """
    table = getattr(egraph, "class_table", None)
    if table is not None:
        class_ids, counts, enodes, datas = table()
    else:  # any other EGraphLike: the same table from its classes
        classes = list(egraph.classes())
        class_ids = [cls.id for cls in classes]
        counts = [len(cls.nodes) for cls in classes]
        enodes = [node for cls in classes for node in cls.nodes]
        datas = [cls.data for cls in classes]
    index: dict[int, int] = {cid: i for i, cid in enumerate(class_ids)}
    flags = [bool(d.all_weights) for d in datas]
    # The single shape of each class (None for a multi-output one, which only ``get`` may read).
    single = [shapes[0] if len(shapes) == 1 else None for shapes in (d.shapes for d in datas)]
    # A model that prices each op in its own precision gets the dtype of the node's inputs; where
    # the e-graph has one floating dtype, every op is priced in it without asking per node.
    typed = getattr(cost_model, "prices_op_dtype", False)
    dtypes = [_single_dtype(d) for d in datas] if typed else []
    op_cost = cost_model.op_cost
    floats = {d for d in dtypes if op_dtype([d]) is not None}
    if typed and len(floats) <= 1:
        typed = False
        only = floats.pop() if floats else None
        if only is not None and only != getattr(cost_model, "dtype", None):
            op_cost = functools.partial(cost_model.op_cost, dtype=only)  # type: ignore[call-arg]
    blacklist = egraph.blacklist
    # C-level lookups (``map`` over bound ``__getitem__``) for the per-node work below.
    class_of, flag_of, shape_of = index.__getitem__, flags.__getitem__, single.__getitem__
    node_class: list[int] = []
    node_children: list[tuple[int, ...]] = []
    node_cost: list[float] = []
    node_op: list[str] = [node[0] for node in enodes]
    class_nodes: list[tuple[int, ...]] = []
    add_children, add_cost = node_children.append, node_cost.append
    # Without a cache shared across calls, a local one would only repeat the cost model's own
    # cache (keyed by op, attributes and shapes): ask the model directly.
    get_cached = cache.get if cache is not None else None
    start = 0
    for ci, count in enumerate(counts):
        if not count:
            raise ExtractionError(f"e-class {class_ids[ci]} has no e-nodes")
        end = start + count
        node_class.extend([ci] * count)
        class_nodes.append(tuple(range(start, end)))
        for node in enodes[start:end] if count > 1 else (enodes[start],):
            op, attrs, children = node
            if not children:
                add_children(())
                add_cost(0.0)
                continue
            try:
                ch = tuple(map(class_of, children))
            except KeyError as exc:
                raise ExtractionError(
                    f"e-node {node} of e-class {class_ids[ci]}: unknown child e-class {exc.args[0]}"
                ) from None
            add_children(ch)
            if op == PROJECTION:
                add_cost(0.0)
                continue
            all_w = all(map(flag_of, ch))
            cost = None if get_cached is None else get_cached((node, all_w))
            if cost is None:
                in_shapes = tuple(map(shape_of, ch))
                if None in in_shapes:
                    raise ExtractionError(
                        f"e-node {node} of e-class {class_ids[ci]} reads a multi-output class without a "
                        f"{PROJECTION!r} projection"
                    )
                if typed:
                    dtype = op_dtype([dtypes[c] for c in ch])
                    cost = float(op_cost(op, attrs, in_shapes, all_w, dtype=dtype))  # type: ignore[call-arg]
                else:
                    cost = float(op_cost(op, attrs, in_shapes, all_w))
                if not (math.isfinite(cost) and cost >= 0.0):
                    raise ExtractionError(
                        f"e-node {node} of e-class {class_ids[ci]}: cost model returned {cost!r}"
                    )
                if cache is not None:
                    cache[(node, all_w)] = cost
            add_cost(cost)
        start = end
    node_bl = [node in blacklist for node in enodes] if blacklist else [False] * len(enodes)
    roots: list[int] = []
    for r in egraph.roots:
        if r not in index:
            raise ExtractionError(f"root e-class {r} is not an e-class of the e-graph")
        if index[r] not in roots:
            roots.append(index[r])
    if not roots:
        raise ExtractionError("the e-graph has no roots")
    # Every index, cost and root was checked above: adopt the lists without a second pass.
    problem = ExtractionProblem.trusted(
        class_keys=tuple(class_ids),
        class_nodes=tuple(class_nodes),
        node_class=node_class,
        node_children=node_children,
        node_cost=node_cost,
        node_op=node_op,
        node_blacklisted=node_bl,
        node_keys=_NodeKeys(class_ids, class_nodes, node_class),
        roots=tuple(roots),
    )
    return EGraphProblem(problem, egraph, enodes)


class _NodeKeys(Sequence[tuple[int, int]]):
    """The node keys of a problem built from an e-graph, ``(class id, position in the class)``,
    made on demand: only error messages and serialization read them, and a search builds a
    problem after every step."""

    __slots__ = ("_class_ids", "_class_nodes", "_node_class")

    def __init__(
        self, class_ids: Sequence[int], class_nodes: Sequence[tuple[int, ...]], node_class: list[int]
    ) -> None:
        self._class_ids = class_ids
        self._class_nodes = class_nodes
        self._node_class = node_class

    def __len__(self) -> int:
        return len(self._node_class)

    @overload
    def __getitem__(self, i: int) -> tuple[int, int]: ...

    @overload
    def __getitem__(self, i: slice) -> Sequence[tuple[int, int]]: ...

    def __getitem__(self, i: int | slice) -> tuple[int, int] | Sequence[tuple[int, int]]:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        if i < 0:
            i += len(self)
        c = self._node_class[i]  # raises IndexError out of range
        return (self._class_ids[c], i - self._class_nodes[c][0])
