"""The e-graph's internal tables, as the rewrite engine reads them: one named, documented view.

E-matching and rule application run in the innermost loops of the optimizer, where a method
call per node or per class would cost more than the work itself. So the rewrite engine
(``rewrite/ematch.py``, ``rewrite/rewrite.py``, ``rewrite/multi.py``) reads the e-graph's tables
directly, and does so only through :class:`EGraphInternals` (``egraph.internals``), which names
each table and states its invariants. Nothing else outside egraph/ should use it: every other
caller has EGraph's public API.

The tables are live (the view holds the e-graph, not copies) and must be treated as read-only;
the two mutating entry points, :meth:`EGraphInternals.add_new_node` and the e-graph's own
``union``, keep them consistent.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tensor_eqsat.egraph.egraph import EGraph


class EGraphInternals:
    """The e-graph's tables for the rewrite engine (see the module docstring)."""

    __slots__ = ("_eg",)

    def __init__(self, egraph: EGraph) -> None:
        self._eg = egraph

    @property
    def find(self) -> Callable[[int], int]:
        """The union-find's ``find``: a class id -> its canonical id."""
        return self._eg._uf.find

    @property
    def memo(self) -> dict[Any, int]:
        """The hash-cons: canonical e-node -> node index."""
        return self._eg._memo

    @property
    def node_class(self) -> list[int]:
        """Node index -> the class it was added to (canonicalize with :attr:`find`)."""
        return self._eg._node_class

    @property
    def data(self) -> dict[int, Any]:
        """Canonical class id -> its analysis value."""
        return self._eg._data

    @property
    def class_nodes(self) -> dict[int, tuple[int, ...]]:
        """Canonical class id -> indices of its nodes."""
        return self._eg._class_nodes

    @property
    def op_index(self) -> dict[str, dict[int, None]]:
        """Op name -> the classes holding a node with that op (keys; may hold stale ids)."""
        return self._eg._op_index

    @property
    def height(self) -> dict[int, float]:
        """Canonical class id -> its height (heights grow along every edge; see egraph.py)."""
        return self._eg._height

    @property
    def blacklist_version(self) -> int:
        """A counter that changes whenever a node is blacklisted (matches carry it as a stamp)."""
        return self._eg._blacklist_version

    @property
    def next_node(self) -> int:
        """The index the next new node gets (indices are issued in order, never reused)."""
        return len(self._eg._nodes)

    def note_origin(self, start: int, rule: str) -> None:
        """Record that ``rule``'s application added the nodes from index ``start`` on (up to
        :attr:`next_node`; see :mod:`tensor_eqsat.egraph.origins`)."""
        from tensor_eqsat.egraph.origins import record

        record(self._eg, start, len(self._eg._nodes), rule)

    def match_context(self) -> tuple[Any, ...]:
        """The containers e-matching reads: (nodes, class nodes, blacklist, the e-graph)."""
        return self._eg._match_context()

    def add_new_node(
        self, op: str, attrs: tuple[Any, ...], children: tuple[int, ...], value: Any, ceiling: float | None
    ) -> int:
        """Add a node with canonical children that is not in the hash-cons, with its analysis
        value computed beforehand; ``ceiling`` is the height of the class it will join."""
        return self._eg._add_new_node(op, attrs, children, value, ceiling)
