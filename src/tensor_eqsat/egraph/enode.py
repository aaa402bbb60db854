"""ENode and EClass: the two value types an e-graph hands out.

An :class:`ENode` is a plain named tuple ``(op, attrs, children)``. Tuples hash and compare in C,
which is what the hash-cons (a dict keyed by ENode) spends its time on; attributes are the
canonical OpSpec attribute tuple, so two nodes are equal exactly when they denote the same op
instance over the same e-classes. Attributes are typed values inside the node, not child nodes
(TENSAT's ``Num``/``Var`` children are rejected: they inflate the e-graph and make every integer
an e-class).

An :class:`EClass` is a read-only snapshot (id, nodes, analysis data) built on demand by
:meth:`EGraph.classes`; the e-graph itself stores flat containers (see ``egraph.py``).
"""

from __future__ import annotations

from typing import Any, NamedTuple


class ENode(NamedTuple):
    """One operator application: op name, canonical attribute tuple, child e-class ids.

    >>> n = ENode("relu", (), (3,))
    >>> n.op, n.children
    ('relu', (3,))
    >>> n == ENode("relu", (), (3,)) and hash(n) == hash(ENode("relu", (), (3,)))
    True
    """

    op: str
    attrs: tuple[Any, ...]
    children: tuple[int, ...]

    def __str__(self) -> str:
        parts = [self.op, *(repr(a) for a in self.attrs), *(f"#{c}" for c in self.children)]
        return "(" + " ".join(parts) + ")"


class EClass(NamedTuple):
    """A snapshot of one e-class: canonical ``id``, its ``nodes`` in insertion order (canonical
    children; blacklisted nodes included, see :attr:`EGraph.blacklist`), and the analysis
    ``data`` (a :class:`~tensor_eqsat.egraph.analysis.TensorData` for tensor e-graphs)."""

    id: int
    nodes: tuple[ENode, ...]
    data: Any
