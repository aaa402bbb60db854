"""Graph <-> EGraph conversion, and e-graphs built from a list of classes.

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

``from_classes`` builds an e-graph from classes of ``(op, attrs, children)`` nodes, for importers
of e-graphs written by other tools (egraph-serialize JSON); cycles and ops outside the registry
are allowed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tensor_eqsat.egraph.analysis import Analysis, NoAnalysis, TensorAnalysis
from tensor_eqsat.egraph.egraph import EGraph, _enode
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


def from_classes(
    classes: Sequence[Sequence[tuple[str, tuple[Any, ...], Sequence[int]]]],
    *,
    roots: Sequence[int] = (),
    analysis: Analysis | None = None,
    egraph_type: type[EGraph] = EGraph,
) -> EGraph:
    """Build an e-graph from a list of classes, each a list of ``(op, attrs, children)``
    nodes whose children are indices into ``classes``; cycles are allowed. For importers of
    e-graphs written by other tools (egraph-serialize JSON).

    Class ``i`` gets id ``i`` unless congruence merges it with another (identical nodes in
    two classes unify them); ``roots`` are class indices. The analysis defaults to
    :class:`~tensor_eqsat.egraph.analysis.NoAnalysis`; a class's value is the merge of the
    values of those of its nodes whose children get values (a least fixpoint), and a class
    that never gets one raises ValueError. The result has ``cycle_filter=False``: an imported
    e-graph may be cyclic, and extraction must cope with that.

    >>> eg = from_classes([[("x", (), [])], [("f", (), [0]), ("g", (), [1])]], roots=[1])
    >>> [str(n) for n in eg.nodes(1)], eg.roots
    (['(f #0)', '(g #1)'], [1])
    """
    eg = egraph_type(NoAnalysis() if analysis is None else analysis, cycle_filter=False)
    n = len(classes)
    for i, nodes in enumerate(classes):
        if not nodes:
            raise ValueError(f"class {i} has no nodes")
        for op, _, children in nodes:
            for c in children:
                if not 0 <= c < n:
                    raise ValueError(f"class {i}: node {op!r} has child {c}, not a class index")
    # Analysis values as a least fixpoint: a node contributes once all its children have one.
    make = eg.analysis.make
    merge = eg.analysis.merge
    data: dict[int, Any] = {}
    changed = True
    while changed:
        changed = False
        for i, nodes in enumerate(classes):
            for op, attrs, children in nodes:
                if all(c in data for c in children):
                    value = make(op, tuple(attrs), [data[c] for c in children])
                    if i not in data:
                        data[i] = value
                        changed = True
                        continue
                    old = data[i]
                    new = merge(old, value)
                    if new is not old and new != old:
                        data[i] = new
                        changed = True
    missing = [i for i in range(n) if i not in data]
    if missing:
        raise ValueError(f"classes {missing[:10]} never get an analysis value (no well-founded node)")
    for i in range(n):
        eg._uf.make_set()
        eg._class_nodes[i] = ()
        eg._parents[i] = ()
        eg._data[i] = data[i]
    pending_unions: list[tuple[int, int]] = []
    for i, nodes in enumerate(classes):
        for op, attrs, children in nodes:
            node = _enode(op, tuple(attrs), tuple(children))
            other = eg._memo.get(node)
            if other is not None:
                pending_unions.append((eg._node_class[other], i))
                continue
            nid = len(eg._nodes)
            eg._nodes.append(node)
            eg._node_class.append(i)
            eg._memo[node] = nid
            eg._class_nodes[i] = (*eg._class_nodes[i], nid)
            for c in set(node[2]):
                eg._parents[c] = (*eg._parents[c], nid)
            eg._op_index.setdefault(op, {})[i] = None
            eg._num_enodes += 1
    for a, b in pending_unions:
        _union_imported(eg, a, b)
    eg.roots = roots
    eg.rebuild()
    return eg


def _union_imported(self: EGraph, a: int, b: int) -> None:
    """union() that tolerates a class without nodes of its own (duplicates during import)."""
    a, b = self.find(a), self.find(b)
    if a == b:
        return
    if not self._class_nodes[b]:
        a, b = b, a
    if not self._class_nodes[a]:
        # Fold the empty class a into b.
        merged = self.analysis.merge(self._data[b], self._data[a])
        self._uf.link(b, a)
        del self._class_nodes[a]
        self._pending.extend(self._parents.pop(a))
        del self._data[a]
        self._data[b] = merged
        self._version += 1
        return
    self.union(a, b)
