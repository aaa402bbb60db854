"""Graph <-> EGraph conversion.

``from_graph`` adds every node of a :class:`~tensor_eqsat.ir.graph.Graph` (leaves keep their
``name`` attribute, so each input and weight is its own class) and sets the roots to the graph's
outputs in order. A node with several outputs (split) becomes one tuple-valued class plus one
``(get index=I)`` class per output; a ``(node, I)`` reference of the graph maps to that ``get``
class. Identical nodes of the graph share a class (hash-consing is common-subexpression
elimination).

``to_graph`` rebuilds a graph from one chosen e-node per class, starting at the roots. A ``get``
node turns back into a ``(node, index)`` reference, input and weight names are kept, and the
source graph's weight data is copied, so the reference interpreter computes the same values for
the original and the rebuilt graph.
"""

from __future__ import annotations

from collections.abc import Mapping

from tensor_eqsat.egraph.analysis import TensorAnalysis
from tensor_eqsat.egraph.egraph import EGraph
from tensor_eqsat.egraph.enode import ENode
from tensor_eqsat.errors import GraphError
from tensor_eqsat.ir.graph import Graph, TensorRef
from tensor_eqsat.ir.opspec import PROJECTION


def from_graph(graph: Graph, *, cycle_filter: bool = True) -> EGraph:
    """The e-graph of ``graph`` (TensorAnalysis), roots = the graph's outputs in order.

    >>> g = Graph()
    >>> x = g.input((4, 8), name="x")
    >>> a, b = g.split(x, axis=1, sizes=(3, 5))
    >>> g.output(g.relu(b))
    >>> eg = from_graph(g)
    >>> [str(n) for n in eg.nodes(eg.roots[0])]
    ['(relu #3)']
    >>> eg.data(3).shapes, eg.nodes(3)[0].op, eg.data(1).shapes
    (((4, 5),), 'get', ((4, 3), (4, 5)))
    """
    eg = EGraph(TensorAnalysis(), cycle_filter=cycle_filter)
    ref_class: dict[TensorRef, int] = {}
    add = eg._add_canonical  # no unions yet, so every class id is canonical
    for node in graph.nodes:
        children = tuple([ref_class[r] for r in node.inputs])
        cid = add(ENode(node.op, node.attrs, children))
        if len(node.shapes) == 1:
            ref_class[(node.id, 0)] = cid
        else:
            for i in range(len(node.shapes)):
                ref_class[(node.id, i)] = add(ENode(PROJECTION, (i,), (cid,)))
    eg.roots = [ref_class[r] for r in graph.outputs]
    eg.weight_data = dict(graph.weight_data)
    eg.rebuild()
    return eg


def to_graph(egraph: EGraph, choice: Mapping[int, ENode]) -> Graph:
    """The graph that realizes ``egraph.roots`` with the chosen e-nodes.

    choice: canonical class id -> one e-node of that class (an extraction result). Only classes
        reachable from the roots are read.

    Raises GraphError if a needed class has no choice, a choice is not a node of its class, the
    choice is cyclic, or a tuple-valued class is used without ``get``.
    """
    graph = Graph()
    find = egraph.find
    # class -> (graph node id, output index); index None for a tuple-valued (split) class.
    done: dict[int, tuple[int, int | None]] = {}
    for root in egraph.roots:
        _realize(egraph, choice, find(root), graph, done)
    for root in egraph.roots:
        graph.outputs.append(_tensor(done, find(root)))
    for n in graph.weights():
        name = graph.name_of(n.id)
        if name in egraph.weight_data:
            graph.weight_data[name] = egraph.weight_data[name]
    return graph


def _chosen(egraph: EGraph, choice: Mapping[int, ENode], cid: int) -> ENode:
    node = choice.get(cid)
    if node is None:
        raise GraphError(f"e-class {cid} is needed but has no chosen e-node")
    if egraph.lookup(node) != cid:
        raise GraphError(f"chosen e-node {node} is not in e-class {cid}")
    return egraph.canonicalize(node)


def _tensor(done: dict[int, tuple[int, int | None]], cid: int) -> TensorRef:
    nid, index = done[cid]
    if index is None:
        raise GraphError(f"e-class {cid} is multi-output and is used without get")
    return (nid, index)


def _realize(
    egraph: EGraph,
    choice: Mapping[int, ENode],
    root: int,
    graph: Graph,
    done: dict[int, tuple[int, int | None]],
) -> None:
    """Add the chosen sub-graph of ``root`` in post-order (iteratively: graphs are deep)."""
    if root in done:
        return
    find = egraph.find
    on_path = {root}
    stack: list[tuple[int, ENode, int]] = [(root, _chosen(egraph, choice, root), 0)]
    while stack:
        cid, node, i = stack[-1]
        children = node.children
        if i < len(children):
            stack[-1] = (cid, node, i + 1)
            ch = find(children[i])
            if ch in done:
                continue
            if ch in on_path:
                raise GraphError(f"the choice is cyclic: e-class {ch} depends on itself")
            on_path.add(ch)
            stack.append((ch, _chosen(egraph, choice, ch), 0))
            continue
        stack.pop()
        on_path.discard(cid)
        if node.op == PROJECTION:
            nid, index = done[find(children[0])]
            wanted = node.attrs[0]
            if index is not None and wanted != index:
                raise GraphError(f"get index={wanted} of single-output e-class {find(children[0])}")
            done[cid] = (nid, wanted)
            continue
        outs = graph.add_node(node.op, node.attrs, [_tensor(done, find(c)) for c in children])
        done[cid] = (outs[0].node, 0 if len(outs) == 1 else None)
