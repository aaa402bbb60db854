"""Edges between ops: whether an e-graph has a node of one op over a class holding another.

A pattern ``(op ... (child_op ...) ...)`` has no match unless some node with ``op`` has, at that
child position, a class holding a ``child_op`` node. Most of the source patterns a search checks
for pruning have no match, and finding that out by e-matching tries every class of the root op;
the edge test answers from the rarer of the two ops instead (its parents, or its members'
children). Blacklisted nodes are included, so a missing edge proves there is no match, and a
present one proves nothing (the search then runs as before).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tensor_eqsat.egraph.egraph import EGraph


def has_edge(egraph: EGraph, op: str, index: int, child_op: str) -> bool:
    """Whether some node with ``op`` has, as its child number ``index``, a class holding a
    node with ``child_op`` (blacklisted nodes included; rebuilds first). A pattern with
    ``(op ... (child_op ...) ...)`` at that position has no match without such an edge,
    which is cheap to rule out from the rarer of the two ops.

    >>> from tensor_eqsat.egraph.analysis import NoAnalysis
    >>> from tensor_eqsat.egraph.egraph import EGraph, ENode
    >>> eg = EGraph(NoAnalysis())
    >>> f = eg.add(ENode("f", (), (eg.add(ENode("a", (), ())), eg.add(ENode("b", (), ())))))
    >>> has_edge(eg, "f", 1, "b"), has_edge(eg, "f", 0, "b"), has_edge(eg, "g", 0, "a")
    (True, False, False)
    """
    egraph.rebuild()
    outer = egraph._op_index.get(op)
    inner = egraph._op_index.get(child_op)
    if not outer or not inner:
        return False
    find = egraph._uf.find
    nodes = egraph._nodes
    if len(inner) <= len(outer):
        parents = egraph._parents
        for c in inner:
            c = find(c)
            for nid in parents.get(c, ()):
                node = nodes[nid]
                if node[0] == op and len(node[2]) > index and find(node[2][index]) == c:
                    return True
        return False
    class_nodes = egraph._class_nodes
    for c in outer:
        for nid in class_nodes.get(find(c), ()):
            node = nodes[nid]
            if node[0] == op and len(node[2]) > index:
                for m in class_nodes[find(node[2][index])]:
                    if nodes[m][0] == child_op:
                        return True
    return False
