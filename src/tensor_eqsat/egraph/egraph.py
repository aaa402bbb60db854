"""EGraph: hash-consed e-nodes, union-find e-classes, egg-style deferred rebuild, acyclicity.

Representation (chosen so that :meth:`EGraph.copy` is a handful of flat container copies):

* every e-node ever added gets a dense *node id* (its insertion order); ``_nodes[nid]`` is its
  current :class:`ENode` and ``_node_class[nid]`` its (possibly stale) class id, ``-1`` once the
  node died by being congruent to an older one;
* ``_memo`` (the hash-cons) maps each canonical ENode to its node id;
* per canonical class: ``_class_nodes`` (node ids, ascending = insertion order), ``_parents``
  (node ids of nodes using the class), ``_data`` (analysis value) and ``_height``. The per-class
  sequences are tuples, replaced rather than mutated, so a copy can share them;
* ``_op_index`` maps an op to the classes holding a node with that op (e-matching starts there).

Rebuild is egg's: :meth:`union` only merges the two classes and queues the absorbed class's
parents; :meth:`rebuild` re-canonicalizes them, merging classes that became congruent, then
re-runs the analysis on parents whose children's values changed. Queries that need canonical
nodes (:meth:`classes`, e-matching) rebuild first.

Acyclicity (``cycle_filter=True``, the default): the e-graph restricted to non-blacklisted nodes is
kept acyclic at all times, for single and multi-pattern rules alike. Each class has a *height*
with ``height(child) < height(parent)`` along every non-blacklisted edge, so "can class u reach
class v?" is a depth-first search that never enters a class not higher than v (:meth:`reaches`).
A union of ``a`` and ``b`` where ``a`` reaches ``b`` (the only way a union closes a cycle, given
an acyclic e-graph) blacklists nodes on the paths from ``a`` down to ``b``, newest first, keeping
in every class a node that does not reach ``b`` (``a``'s class gets ``b``'s nodes), so every
class stays extractable and no cycle remains (:meth:`_cut`). Rewrites go further and
skip, before adding anything, a match whose new nodes would reach the class they join (see
``egraph/cycles.py``). This replaces TENSAT's descendant-map pre-filter plus "blacklist the newest
node on every cycle" post-pass, which re-traversed the whole e-graph after every pass, could pick
a node whose removal left a class without any usable node, and was skipped for single rules in the
paper's artifact. Heights are floats so that new classes fit between a child and a parent without
renumbering; a union that would violate the order raises the heights of the affected ancestors.

With ``cycle_filter=False`` unions never blacklist (egg's semantics; extraction must then cope
with cycles).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from tensor_eqsat.egraph.analysis import Analysis, TensorAnalysis
from tensor_eqsat.egraph.enode import EClass, ENode
from tensor_eqsat.egraph.internals import EGraphInternals
from tensor_eqsat.egraph.origins import copy_spans
from tensor_eqsat.egraph.unionfind import UnionFind

if TYPE_CHECKING:
    import numpy as np

    from tensor_eqsat.ir.graph import Graph

_new_enode = tuple.__new__
_EPS = 1e-6


def _enode(op: str, attrs: tuple[Any, ...], children: tuple[int, ...]) -> ENode:
    # Skips NamedTuple.__new__'s Python-level argument handling; this is the hot path of add().
    return _new_enode(ENode, (op, attrs, children))


class EGraph:
    """An e-graph with a pluggable analysis (default :class:`TensorAnalysis`).

    analysis: the e-class analysis. Default ``TensorAnalysis()`` (shapes, all-weights flag).
    cycle_filter: keep the non-blacklisted e-graph acyclic (see the module docstring).
        Default True.

    >>> from tensor_eqsat.egraph.analysis import NoAnalysis
    >>> eg = EGraph(NoAnalysis())
    >>> a = eg.add(ENode("a", (), ()))
    >>> b = eg.add(ENode("b", (), ()))
    >>> fa, fb = eg.add(ENode("f", (), (a,))), eg.add(ENode("f", (), (b,)))
    >>> eg.union(a, b)
    True
    >>> eg.rebuild()                      # congruence: f(a) and f(b) are now the same node
    >>> eg.find(fa) == eg.find(fb), eg.num_enodes, eg.num_classes
    (True, 3, 2)
    """

    def __init__(self, analysis: Analysis | None = None, *, cycle_filter: bool = True) -> None:
        self.analysis: Analysis = TensorAnalysis() if analysis is None else analysis
        self.cycle_filter = cycle_filter
        self.weight_data: dict[str, np.ndarray] = {}
        """Weight arrays by weight name (from the source graph); shared, never mutated."""
        self._uf = UnionFind()
        self._nodes: list[ENode] = []
        self._node_class: list[int] = []
        self._memo: dict[ENode, int] = {}
        self._class_nodes: dict[int, tuple[int, ...]] = {}
        self._parents: dict[int, tuple[int, ...]] = {}
        self._data: dict[int, Any] = {}
        self._height: dict[int, float] = {}
        self._op_index: dict[str, dict[int, None]] = {}
        self._blacklist: set[int] = set()
        self._blacklist_version = 0
        self._roots: list[int] = []
        self._pending: list[int] = []
        self._analysis_pending: list[int] = []
        self._dirty: set[int] = set()
        self._num_enodes = 0
        self._version = 0
        self._cache: dict[str, Any] = {}
        self._cache_version = -1

    # ------------------------------------------------------------------------------------------
    # Construction from / to graphs (implemented in convert.py; here for discoverability)
    # ------------------------------------------------------------------------------------------
    @classmethod
    def from_graph(cls, graph: Graph, *, cycle_filter: bool = True) -> EGraph:
        """The e-graph of a tensor graph, with :attr:`roots` = the graph's outputs in order.

        See :func:`tensor_eqsat.egraph.convert.from_graph`.
        """
        from tensor_eqsat.egraph.convert import from_graph

        return from_graph(graph, cycle_filter=cycle_filter)

    @classmethod
    def from_classes(
        cls,
        classes: Sequence[Sequence[tuple[str, tuple[Any, ...], Sequence[int]]]],
        *,
        roots: Sequence[int] = (),
        analysis: Analysis | None = None,
    ) -> EGraph:
        """An e-graph from a list of classes of ``(op, attrs, children)`` nodes, children being
        indices into ``classes``; cycles are allowed (``cycle_filter=False``). For importers of
        e-graphs written by other tools (egraph-serialize JSON).

        See :func:`tensor_eqsat.egraph.convert.from_classes`.

        >>> eg = EGraph.from_classes([[("x", (), [])], [("f", (), [0]), ("g", (), [1])]], roots=[1])
        >>> [str(n) for n in eg.nodes(1)], eg.roots
        (['(f #0)', '(g #1)'], [1])
        """
        from tensor_eqsat.egraph.convert import from_classes

        return from_classes(classes, roots=roots, analysis=analysis, egraph_type=cls)

    def to_graph(self, choice: Mapping[int, ENode]) -> Graph:
        """The graph chosen by ``choice`` (class id -> e-node) for the roots.

        See :func:`tensor_eqsat.egraph.convert.to_graph`.
        """
        from tensor_eqsat.egraph.convert import to_graph

        return to_graph(self, choice)

    # ------------------------------------------------------------------------------------------
    # Basic operations
    # ------------------------------------------------------------------------------------------
    def find(self, cid: int) -> int:
        """The canonical id of class ``cid``."""
        return self._uf.find(cid)

    def canonicalize(self, node: ENode) -> ENode:
        """``node`` with every child replaced by its canonical class id."""
        find = self._uf.find
        return _enode(node[0], node[1], tuple([find(c) for c in node[2]]))

    def lookup(self, node: ENode) -> int | None:
        """The canonical class holding ``node`` (children canonicalized first), or None."""
        nid = self._memo.get(self.canonicalize(node))
        return None if nid is None else self._uf.find(self._node_class[nid])

    def lookup_canonical(self, op: str, attrs: tuple[Any, ...], children: tuple[int, ...]) -> int | None:
        """The canonical class of the node ``(op, attrs, children)`` whose children are already
        canonical class ids, or None (the fast path of :meth:`lookup`)."""
        nid = self._memo.get(_enode(op, attrs, children))
        return None if nid is None else self._uf.find(self._node_class[nid])

    def add(self, node: ENode) -> int:
        """Add ``node`` (or find it) and return its canonical class id.

        Raises whatever the analysis raises for an ill-typed node (ShapeError for tensors), before
        changing anything. A child id that is not a class id raises IndexError.
        """
        return self._add_canonical(self.canonicalize(node))

    def _add_canonical(self, node: ENode) -> int:
        """:meth:`add` for a node whose children are known to be canonical."""
        nid = self._memo.get(node)
        if nid is not None:
            return self._uf.find(self._node_class[nid])
        data = self._data
        value = self.analysis.make(node[0], node[1], [data[c] for c in node[2]])
        return self._add_new(node, value, None)

    def _add_new_node(
        self, op: str, attrs: tuple[Any, ...], children: tuple[int, ...], value: Any, ceiling: float | None
    ) -> int:
        """For the rewrite engine: add a node with canonical children that is not in the
        hash-cons, with its analysis value computed beforehand."""
        return self._add_new(_enode(op, attrs, children), value, ceiling)

    @property
    def internals(self) -> EGraphInternals:
        """The tables the rewrite engine reads (:mod:`tensor_eqsat.egraph.internals`); not for
        other callers."""
        return EGraphInternals(self)

    def _match_context(self) -> tuple[Any, ...]:
        """For the rewrite engine: the containers e-matching reads."""
        return (self._nodes, self._class_nodes, self._blacklist, self)

    def _add_new(self, node: ENode, value: Any, ceiling: float | None) -> int:
        """Add a canonical node known not to be in the hash-cons, in a new class.

        ceiling: the height of the class this node is about to be unioned into, if known; the new
        class is placed below it so the union needs no re-ordering.
        """
        cid = self._uf.make_set()
        nid = len(self._nodes)
        self._nodes.append(node)
        self._node_class.append(cid)
        self._memo[node] = nid
        self._class_nodes[cid] = (nid,)
        self._parents[cid] = ()
        self._data[cid] = value
        children = node[2]
        if children:
            parents = self._parents
            for c in set(children) if len(children) > 1 else children:
                parents[c] = (*parents[c], nid)
        if self.cycle_filter:
            height = self._height
            lo = max([height[c] for c in children]) if children else -1.0
            if ceiling is not None and ceiling - lo > _EPS:
                self._height[cid] = (lo + ceiling) * 0.5
            else:
                self._height[cid] = lo + 1.0
        index = self._op_index.get(node[0])
        if index is None:
            self._op_index[node[0]] = {cid: None}
        else:
            index[cid] = None
        self._num_enodes += 1
        self._version += 1
        return cid

    def union(self, a: int, b: int) -> bool:
        """Merge the classes of ``a`` and ``b``; True if they were different.

        Congruence is restored by the next :meth:`rebuild`. Raises
        :class:`~tensor_eqsat.egraph.analysis.MergeConflict` (e.g. different shapes) before
        changing anything. With ``cycle_filter``, a union that would close a cycle blacklists the
        nodes of the higher class that reach the lower one.
        """
        find = self._uf.find
        a = find(a)
        b = find(b)
        if a == b:
            return False
        data = self._data
        da = data[a]
        db = data[b]
        merged = self.analysis.merge(da, db)
        if self.cycle_filter:
            ha = self._height[a]
            hb = self._height[b]
            if ha > hb:
                self._cut(a, b)
            elif hb > ha:
                self._cut(b, a)
        parents = self._parents
        pa = parents[a]
        pb = parents[b]
        # The survivor is the class with more parents (fewer nodes to re-canonicalize), the older
        # one on a tie so that root and original class ids tend to stay put.
        if len(pa) < len(pb) or (len(pa) == len(pb) and b < a):
            a, b, pa, pb, da, db = b, a, pb, pa, db, da
        self._uf.link(a, b)
        class_nodes = self._class_nodes
        nodes_b = class_nodes.pop(b)
        nodes_a = class_nodes[a]
        class_nodes[a] = nodes_a + nodes_b if nodes_a[-1] < nodes_b[0] else tuple(sorted(nodes_a + nodes_b))
        del parents[b]
        node_class = self._node_class
        if pb:
            live_b = tuple([p for p in pb if node_class[p] >= 0])
            parents[a] = pa + live_b
            self._pending.extend(live_b)
        else:
            live_b = ()
        nodes = self._nodes
        op_index = self._op_index
        for nid in nodes_b:
            index = op_index[nodes[nid][0]]
            index.pop(b, None)
            index[a] = None
        del data[b]
        data[a] = merged
        if merged is not da and merged != da:
            self._analysis_pending.extend(pa)
        if merged is not db and merged != db:
            self._analysis_pending.extend(live_b)
        if self.cycle_filter:
            height = self._height
            ha = height[a]
            hb = height.pop(b)
            if hb > ha:
                height[a] = hb
                self._raise_parents(a)
            elif ha > hb and live_b:
                self._raise_parents(a)
        self._version += 1
        return True

    def rebuild(self) -> None:
        """Restore the hash-cons and congruence invariants and re-run the analysis where needed
        (egg's rebuild). Cheap when nothing is pending."""
        if not (self._pending or self._analysis_pending or self._dirty):
            return
        while self._pending or self._analysis_pending:
            self._process_pending()
            self._process_analysis()
        if self._dirty:
            find = self._uf.find
            node_class = self._node_class
            class_nodes = self._class_nodes
            for c in {find(c) for c in self._dirty}:
                class_nodes[c] = tuple([n for n in class_nodes[c] if node_class[n] >= 0])
            self._dirty.clear()
        self._version += 1

    def _process_pending(self) -> None:
        find = self._uf.find
        nodes = self._nodes
        node_class = self._node_class
        memo = self._memo
        pending = self._pending
        while pending:
            nid = pending.pop()
            if node_class[nid] < 0:
                continue
            old = nodes[nid]
            ch = old[2]
            new_ch = tuple([find(c) for c in ch])
            if new_ch == ch:
                continue
            new = _enode(old[0], old[1], new_ch)
            if memo.get(old) == nid:
                del memo[old]
            nodes[nid] = new
            other = memo.get(new)
            if other is None:
                memo[new] = nid
                continue
            # Congruent to an existing node: keep the older id, drop the other, merge classes.
            keep, drop = (other, nid) if other < nid else (nid, other)
            memo[new] = keep
            c_keep = node_class[keep]
            c_drop = node_class[drop]
            node_class[drop] = -1
            self._num_enodes -= 1
            if drop in self._blacklist:
                self._blacklist.discard(drop)
                self._blacklist.add(keep)
                self._blacklist_version += 1
            self._dirty.add(c_drop)
            self.union(c_keep, c_drop)

    def _process_analysis(self) -> None:
        find = self._uf.find
        nodes = self._nodes
        node_class = self._node_class
        data = self._data
        make = self.analysis.make
        merge = self.analysis.merge
        todo = self._analysis_pending
        while todo:
            nid = todo.pop()
            if node_class[nid] < 0:
                continue
            node = nodes[nid]
            c = find(node_class[nid])
            old = data[c]
            new = merge(old, make(node[0], node[1], [data[find(ch)] for ch in node[2]]))
            if new is not old and new != old:
                data[c] = new
                todo.extend(self._parents[c])
                self._version += 1

    # ------------------------------------------------------------------------------------------
    # Acyclicity
    # ------------------------------------------------------------------------------------------
    def reaches(self, src: int, dst: int) -> bool:
        """True if class ``src`` reaches class ``dst`` through one or more non-blacklisted edges.

        Needs ``cycle_filter``. Every class on such a path lies strictly between the two in
        height, so the search runs from both ends inside that band, down from ``src`` through
        children and up from ``dst`` through parents, always expanding the smaller frontier; it
        stops when the two meet or either side is exhausted.
        """
        if not self.cycle_filter:
            raise ValueError("reaches() needs an e-graph built with cycle_filter=True")
        find = self._uf.find
        src = find(src)
        dst = find(dst)
        height = self._height
        hs = height[src]
        hd = height[dst]
        parents = self._parents
        if hs <= hd or not parents[dst]:
            return False  # a class nothing reads (a rewrite's new root, mostly) is reached by none
        nodes = self._nodes
        class_nodes = self._class_nodes
        node_class = self._node_class
        blacklist = self._blacklist
        # With no rebuild pending, every live node's children are canonical already.
        canonical = not self._pending
        down_seen = {src}
        down = [src]
        up_seen = {dst}
        up = [dst]
        while down and up:
            if len(down) <= len(up):
                c = down.pop()
                for nid in class_nodes[c]:
                    if nid in blacklist:
                        continue
                    for ch in nodes[nid][2]:
                        if not canonical:
                            ch = find(ch)
                        if ch in up_seen:
                            return True
                        if ch not in down_seen and height[ch] > hd:
                            down_seen.add(ch)
                            down.append(ch)
            else:
                c = up.pop()
                for nid in parents[c]:
                    if nid in blacklist:
                        continue
                    p = node_class[nid]
                    if p < 0:
                        continue
                    p = find(p)
                    if p in down_seen:
                        return True
                    if p not in up_seen and height[p] < hs:
                        up_seen.add(p)
                        up.append(p)
        return False

    def _cut(self, top: int, bottom: int) -> None:
        """Before merging ``top`` into ``bottom``: blacklist nodes so that ``top`` no longer
        reaches ``bottom`` (each path would become a cycle through the merged class), newest
        nodes first.

        The nodes that can be cut are those of the classes between the two (``top`` included)
        that reach ``bottom``. They are tried newest first; a node of a class other than ``top``
        is cut only if its class keeps a node that does not reach ``bottom``, so every class
        stays extractable (``top`` always does: it gets ``bottom``'s nodes). Cut nodes that turn
        out unnecessary are then restored, oldest first. Cutting ``top``'s nodes, as this did
        before, dropped the older side of the union even when the cycle ran through a node a
        rewrite had just added: on SqueezeNet, after rules 62, 131 and 64, the original fused
        ``concat`` of each fire module was blacklisted in favour of the new unfused ``relu``
        over a ``concat`` of convs, and every extractor's best cost rose from 0.0878 to 0.1634 ms;
        cutting the two new ``get`` nodes instead keeps 0.0878 ms.
        """
        if not self.reaches(top, bottom):
            return
        find = self._uf.find
        height = self._height
        hb = height[bottom]
        nodes = self._nodes
        class_nodes = self._class_nodes
        blacklist = self._blacklist
        node_class = self._node_class
        # The region above ``bottom`` below ``top``, visited by increasing height (a topological
        # order) to decide for every class and node whether it reaches ``bottom``.
        region = {top}
        stack = [top]
        while stack:
            c = stack.pop()
            for nid in class_nodes[c]:
                if nid in blacklist:
                    continue
                for ch in nodes[nid][2]:
                    ch = find(ch)
                    if ch not in region and height[ch] > hb:
                        region.add(ch)
                        stack.append(ch)
        order = sorted(region, key=height.__getitem__)
        live = {c: [n for n in class_nodes[c] if node_class[n] >= 0] for c in order}

        def reach_map() -> dict[int, bool]:
            reach = {bottom: True}
            for c in order:
                reach[c] = any(
                    reach.get(find(ch), False)
                    for nid in live[c]
                    if nid not in blacklist
                    for ch in nodes[nid][2]
                )
            return reach

        def reaching(nid: int, reach: dict[int, bool]) -> bool:
            return any(reach.get(find(ch), False) for ch in nodes[nid][2])

        reach = reach_map()
        candidates = sorted(
            (
                nid
                for c in order
                if reach[c]
                for nid in live[c]
                if nid not in blacklist and reaching(nid, reach)
            ),
            reverse=True,
        )
        cut: list[int] = []
        for nid in candidates:
            if not reach[top]:
                break
            if not reaching(nid, reach):
                continue
            c = find(node_class[nid])
            if c != top and not any(
                n != nid and n not in blacklist and not reaching(n, reach) for n in live[c]
            ):
                continue  # its class's only way out goes through ``bottom``: cut further up
            blacklist.add(nid)
            cut.append(nid)
            reach = reach_map()
        for nid in sorted(cut):
            blacklist.discard(nid)
            if reach_map()[top]:
                blacklist.add(nid)
        self._blacklist_version += 1
        self._version += 1

    def _raise_parents(self, cid: int) -> None:
        """Restore ``height(parent) > height(child)`` above ``cid`` after its height grew."""
        find = self._uf.find
        height = self._height
        node_class = self._node_class
        parents = self._parents
        blacklist = self._blacklist
        stack = [cid]
        while stack:
            c = stack.pop()
            hc = height[c]
            for nid in parents[c]:
                if nid in blacklist or node_class[nid] < 0:
                    continue
                p = find(node_class[nid])
                if p != c and height[p] <= hc:
                    height[p] = hc + 1.0
                    stack.append(p)

    # ------------------------------------------------------------------------------------------
    # Blacklist
    # ------------------------------------------------------------------------------------------
    @property
    def blacklist(self) -> frozenset[ENode]:
        """Canonical e-nodes never used as rule sources nor extracted (they lie on a cycle)."""
        self.rebuild()
        return self._cached(
            "blacklist",
            lambda: frozenset(self._nodes[n] for n in self._blacklist if self._node_class[n] >= 0),
        )

    def is_blacklisted(self, node: ENode) -> bool:
        """Whether ``node`` (children canonicalized first) is blacklisted."""
        nid = self._memo.get(self.canonicalize(node))
        return nid is not None and nid in self._blacklist

    def blacklist_node(self, node: ENode) -> None:
        """Blacklist ``node``; raises KeyError if it is not in the e-graph."""
        nid = self._memo.get(self.canonicalize(node))
        if nid is None:
            raise KeyError(f"{node} is not in the e-graph")
        if nid not in self._blacklist:
            self._blacklist.add(nid)
            self._blacklist_version += 1
            self._version += 1

    # ------------------------------------------------------------------------------------------
    # Queries
    # ------------------------------------------------------------------------------------------
    @property
    def roots(self) -> list[int]:
        """Canonical ids of the root classes (a graph's outputs, in order)."""
        find = self._uf.find
        return [find(r) for r in self._roots]

    @roots.setter
    def roots(self, ids: Iterable[int]) -> None:
        ids = list(ids)
        for r in ids:
            if not 0 <= r < len(self._uf):
                raise ValueError(f"root {r} is not an e-class id")
        self._roots = ids
        self._version += 1

    @property
    def num_enodes(self) -> int:
        """Number of e-nodes (blacklisted ones included), as egg's ``total_size``."""
        return self._num_enodes

    total_size = num_enodes

    @property
    def num_classes(self) -> int:
        """Number of e-classes."""
        return len(self._class_nodes)

    def __len__(self) -> int:
        return len(self._class_nodes)

    @property
    def version(self) -> int:
        """A counter that changes whenever the e-graph changes (for caches keyed on one e-graph)."""
        return self._version

    def data(self, cid: int) -> Any:
        """The analysis value of class ``cid`` (:class:`TensorData` for tensor e-graphs)."""
        return self._data[self._uf.find(cid)]

    def nodes(self, cid: int) -> tuple[ENode, ...]:
        """The e-nodes of class ``cid`` in insertion order (rebuilds first)."""
        self.rebuild()
        nodes = self._nodes
        return tuple([nodes[n] for n in self._class_nodes[self._uf.find(cid)]])

    def __getitem__(self, cid: int) -> EClass:
        c = self.find(cid)
        return EClass(c, self.nodes(c), self._data[c])

    def __contains__(self, cid: object) -> bool:
        return isinstance(cid, int) and cid in self._class_nodes

    def class_ids(self) -> list[int]:
        """Canonical class ids in a deterministic order (creation order of the survivors)."""
        self.rebuild()
        return list(self._class_nodes)

    def classes(self) -> list[EClass]:
        """Every e-class, in a deterministic order (rebuilds first; cached until a change)."""
        self.rebuild()

        def build() -> list[EClass]:
            get, data, new = self._nodes.__getitem__, self._data, _new_enode
            return [new(EClass, (c, tuple(map(get, ns)), data[c])) for c, ns in self._class_nodes.items()]

        result: list[EClass] = self._cached("classes", build)
        return result

    def class_table(self) -> tuple[list[int], list[int], list[ENode], list[Any]]:
        """What :meth:`classes` holds, flattened: (class ids, each class's node count, every
        class's e-nodes one class after the other, analysis values), in the same orders. For
        building an extraction problem after every search step without a tuple per class."""
        self.rebuild()
        class_nodes = self._class_nodes
        return (
            list(class_nodes),
            list(map(len, class_nodes.values())),
            list(map(self._nodes.__getitem__, itertools.chain.from_iterable(class_nodes.values()))),
            list(map(self._data.__getitem__, class_nodes)),
        )

    def enodes(self) -> Iterator[tuple[int, ENode]]:
        """Every (canonical class id, e-node) pair (rebuilds first)."""
        self.rebuild()
        nodes = self._nodes
        for c, ns in self._class_nodes.items():
            for n in ns:
                yield c, nodes[n]

    def classes_with_op(self, op: str) -> list[int]:
        """Canonical ids of the classes holding at least one node with ``op``."""
        self.rebuild()
        return list(self._op_index.get(op, ()))

    def _cached(self, key: str, build: Any) -> Any:
        if self._cache_version != self._version:
            self._cache = {}
            self._cache_version = self._version
        value = self._cache.get(key)
        if value is None:
            value = self._cache[key] = build()
        return value

    # ------------------------------------------------------------------------------------------
    # Copy, hash, rendering
    # ------------------------------------------------------------------------------------------
    def copy(self) -> EGraph:
        """An independent copy (rebuilds first). O(size) flat copies; node tuples are shared.

        The analysis object is shared (analyses are stateless apart from caches).
        """
        new = object.__new__(EGraph)
        new.assign(self)
        return new

    def assign(self, other: EGraph) -> None:
        """Make this e-graph, in place, what ``other.copy()`` would return (a search
        environment taking a state it computed before, seen by whoever holds this object)."""
        other.rebuild()
        dst, src = self, other
        dst.analysis = src.analysis
        dst.cycle_filter = src.cycle_filter
        dst.weight_data = src.weight_data
        dst._uf = src._uf.copy()
        dst._nodes = src._nodes.copy()
        dst._node_class = src._node_class.copy()
        dst._memo = src._memo.copy()
        dst._class_nodes = src._class_nodes.copy()
        dst._parents = src._parents.copy()
        dst._data = src._data.copy()
        dst._height = src._height.copy()
        dst._op_index = {op: idx.copy() for op, idx in src._op_index.items()}
        dst._blacklist = src._blacklist.copy()
        dst._blacklist_version = src._blacklist_version
        dst._roots = src._roots.copy()
        dst._pending = []
        dst._analysis_pending = []
        dst._dirty = set()
        dst._num_enodes = src._num_enodes
        dst._version = src._version
        dst._cache = src._cache
        dst._cache_version = src._cache_version
        if "_sids" in src.__dict__:  # hashing.py's per-node ids, which never change for a node id
            dst._sids = src._sids.copy()  # type: ignore[attr-defined]
        elif "_sids" in dst.__dict__:
            del dst._sids  # type: ignore[attr-defined]
        copy_spans(dst, src)  # which rule application made each node (origins.py)

    def same_as(self, other: EGraph) -> bool:
        """Whether ``other`` is this e-graph with the same ids: the same nodes in the same order,
        in the same classes, with the same blacklist and roots (what two copies that went through
        the same operations hold). Stricter than equal :meth:`content_hash` values."""
        self.rebuild()
        other.rebuild()
        return (
            self._num_enodes == other._num_enodes
            and self._nodes == other._nodes
            and self._node_class == other._node_class
            and self._class_nodes == other._class_nodes
            and self._blacklist == other._blacklist
            and self._roots == other._roots
        )

    def content_hash(self) -> int:
        """A hash of the e-graph's content that ignores class ids and insertion order.

        See :func:`tensor_eqsat.egraph.hashing.content_hash`.
        """
        from tensor_eqsat.egraph.hashing import content_hash

        result: int = self._cached("content_hash", lambda: content_hash(self))
        return result

    def to_dot(self, *, max_classes: int = 500) -> str:
        """Graphviz DOT text with one cluster per class. See :func:`tensor_eqsat.egraph.dot.to_dot`."""
        from tensor_eqsat.egraph.dot import to_dot

        return to_dot(self, max_classes=max_classes)

    def __getstate__(self) -> dict[str, Any]:
        self.rebuild()
        state = self.__dict__.copy()
        state["_cache"] = {}
        state["_cache_version"] = -1
        return state

    def __repr__(self) -> str:
        return (
            f"EGraph(enodes={self._num_enodes}, classes={len(self._class_nodes)}, "
            f"roots={self.roots}, blacklisted={len(self._blacklist)})"
        )

    # ------------------------------------------------------------------------------------------
    # Checks (tests and debugging)
    # ------------------------------------------------------------------------------------------
    def check(self) -> None:
        """Verify every invariant of a rebuilt e-graph; raises AssertionError naming the first
        violation. O(size); meant for tests. See :mod:`tensor_eqsat.egraph.checks`."""
        from tensor_eqsat.egraph.checks import check

        check(self)
