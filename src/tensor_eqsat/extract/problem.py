"""ExtractionProblem: an e-graph reduced to exactly what extraction needs.

Extraction picks one e-node per e-class. Every extractor in this package works on this plain,
engine-independent structure instead of on the e-graph itself, so that extractors, their checks
and their prices do not depend on the e-graph engine's internals, and so that an e-graph
serialized by egg, egglog or extraction-gym (``egraph-serialize`` JSON) can be extracted too.

Layout (all dense integers, parallel lists, built once, read many times):

- classes ``0..C-1`` in a fixed order (the e-graph's class order; greedy-ocf depends on it, as
  egg's Extractor depends on its class map's order); ``class_keys[c]`` is the external id;
- nodes ``0..N-1``; ``node_class[n]``, ``node_op[n]``, ``node_cost[n]`` (own cost, ms, finite and
  >= 0), ``node_children[n]`` (child *class* indices, ordered, repeats kept) and
  ``node_blacklisted[n]`` (never extract this node);
- ``class_nodes[c]``: the class's nodes in node-index order (its insertion order);
- ``roots``: the classes to extract.

Derived facts (distinct children, parents, strongly connected components of the class graph, a
children-first class order) are computed lazily, once, on first use.

Rejected alternatives: numpy arrays (per-element access from Python loops is several times
slower than list indexing, and the extractors are loop-bound); networkx / rustworkx graphs (an
extra dependency and a conversion per extraction for a Tarjan pass that costs about a
millisecond here).

Example:
    >>> b = ProblemBuilder()
    >>> _ = b.add_node("x", "input")
    >>> _ = b.add_node("y", "relu", ["x"], cost=1.0)
    >>> p = b.build(roots=["y"])
    >>> p.num_classes, p.num_nodes, p.class_key(p.roots[0])
    (2, 2, 'y')
"""

from __future__ import annotations

import enum
import math
from collections.abc import Hashable, Iterable, Sequence

from tensor_eqsat.errors import TensorEqsatError


class ExtractionError(TensorEqsatError):
    """An extraction problem is malformed, has no valid extraction, or a result is invalid."""


class ClassOrder(enum.Enum):
    """The order in which egg-style sweeping extractors visit classes.

    CHILDREN_FIRST: strongly connected components of the class graph, children before parents
    (within a cyclic component, the problem's order). A sweep then prices each class after its
    children, so an acyclic e-graph needs one pricing sweep plus one confirming sweep.
    PROBLEM: the problem's class order (the e-graph's own order, as egg iterates its class map).
    When classes created by rewrites come after their users, every sweep that lowers a cost
    re-prices everything above it, so sweeps multiply with the e-graph's depth.
    """

    CHILDREN_FIRST = "children-first"
    PROBLEM = "problem"

    def classes(self, p: ExtractionProblem) -> Sequence[int]:
        """The classes of ``p`` in this order."""
        if self is ClassOrder.PROBLEM:
            return range(p.num_classes)
        return p.scc.order


class ExtractionProblem:
    """Classes, nodes, costs and roots of an e-graph, as dense integer-indexed lists.

    Build it with :class:`ProblemBuilder` (keys of any hashable type) or directly from dense
    lists. Treat it as immutable: extractors cache derived facts on it.

    Args:
        class_keys: external id of each class, in class order.
        node_class: class index of each node.
        node_children: child class indices of each node (ordered; repeats allowed).
        node_cost: own cost of each node (finite, >= 0).
        roots: classes to extract (at least one; no repeats).
        node_op: operator label of each node. Default: ``"?"`` for every node.
        node_blacklisted: nodes that must never be extracted. Default: none.
        node_keys: external id of each node. Default: the node index as a string.
        validate: check every index and cost (O(N + edges)). Default True.

    Raises:
        ExtractionError: naming the node or class, when ``validate`` finds a bad index, a class
            without nodes, a NaN, infinite or negative cost, or a bad root.
    """

    __slots__ = (
        "_child_sets",
        "_class_nodes",
        "_parent_classes",
        "_parent_nodes",
        "_scc",
        "class_keys",
        "node_blacklisted",
        "node_children",
        "node_class",
        "node_cost",
        "node_keys",
        "node_op",
        "roots",
    )

    def __init__(
        self,
        *,
        class_keys: Sequence[Hashable],
        node_class: Sequence[int],
        node_children: Sequence[Sequence[int]],
        node_cost: Sequence[float],
        roots: Sequence[int],
        node_op: Sequence[str] | None = None,
        node_blacklisted: Sequence[bool] | None = None,
        node_keys: Sequence[Hashable] | None = None,
        validate: bool = True,
    ) -> None:
        n = len(node_class)
        self.class_keys: tuple[Hashable, ...] = tuple(class_keys)
        self.node_class: list[int] = list(node_class)
        self.node_children: list[tuple[int, ...]] = [tuple(ch) for ch in node_children]
        self.node_cost: list[float] = [float(c) for c in node_cost]
        self.node_op: list[str] = list(node_op) if node_op is not None else ["?"] * n
        self.node_blacklisted: list[bool] = (
            [bool(b) for b in node_blacklisted] if node_blacklisted is not None else [False] * n
        )
        self.node_keys: Sequence[Hashable] = (
            tuple(node_keys) if node_keys is not None else tuple(str(i) for i in range(n))
        )
        self.roots: tuple[int, ...] = tuple(roots)
        groups: list[list[int]] = [[] for _ in self.class_keys]
        for i, c in enumerate(self.node_class):
            if validate and not (isinstance(c, int) and 0 <= c < len(groups)):
                raise ExtractionError(f"node {self._node_name(i)}: class index {c!r} out of range")
            groups[c].append(i)
        self._class_nodes: tuple[tuple[int, ...], ...] = tuple(tuple(g) for g in groups)
        self._child_sets: list[tuple[int, ...]] | None = None
        self._parent_nodes: list[list[int]] | None = None
        self._parent_classes: list[list[int]] | None = None
        self._scc: _Scc | None = None
        if validate:
            self._validate()

    @classmethod
    def trusted(
        cls,
        *,
        class_keys: tuple[Hashable, ...],
        class_nodes: tuple[tuple[int, ...], ...],
        node_class: list[int],
        node_children: list[tuple[int, ...]],
        node_cost: list[float],
        node_op: list[str],
        node_blacklisted: list[bool],
        node_keys: Sequence[Hashable],
        roots: tuple[int, ...],
    ) -> ExtractionProblem:
        """Adopt lists that are valid by construction, without copying or checking them.

        For adapters on hot paths (a search rebuilds the problem after every step); the caller
        hands the lists over and guarantees every invariant the constructor would check.
        """
        self = cls.__new__(cls)
        self.class_keys = class_keys
        self._class_nodes = class_nodes
        self.node_class = node_class
        self.node_children = node_children
        self.node_cost = node_cost
        self.node_op = node_op
        self.node_blacklisted = node_blacklisted
        self.node_keys = node_keys
        self.roots = roots
        self._child_sets = None
        self._parent_nodes = None
        self._parent_classes = None
        self._scc = None
        return self

    # -- basic accessors -------------------------------------------------------------------------

    @property
    def num_classes(self) -> int:
        return len(self.class_keys)

    @property
    def num_nodes(self) -> int:
        return len(self.node_class)

    @property
    def class_nodes(self) -> tuple[tuple[int, ...], ...]:
        """Per class, its node indices in insertion order."""
        return self._class_nodes

    def class_key(self, c: int) -> Hashable:
        """The external id of class ``c``."""
        return self.class_keys[c]

    def class_index(self, key: Hashable) -> int:
        """The class index of an external class id (O(C); build a dict for repeated lookups)."""
        try:
            return self.class_keys.index(key)
        except ValueError:
            raise ExtractionError(f"no class {key!r}") from None

    def describe_node(self, n: int) -> str:
        """``'<key> (<op>) in class <key>'``, for error messages."""
        return f"{self._node_name(n)} ({self.node_op[n]}) in class {self.class_keys[self.node_class[n]]!r}"

    def _node_name(self, n: int) -> str:
        return repr(self.node_keys[n]) if n < len(self.node_keys) else str(n)

    # -- derived facts ----------------------------------------------------------------------------

    @property
    def child_sets(self) -> list[tuple[int, ...]]:
        """Per node, its distinct child classes in first-occurrence order."""
        if self._child_sets is None:
            self._child_sets = [
                ch
                if len(ch) < 2 or (ch[0] != ch[1] if len(ch) == 2 else len(set(ch)) == len(ch))
                else tuple(dict.fromkeys(ch))
                for ch in self.node_children
            ]
        return self._child_sets

    @property
    def parent_nodes(self) -> list[list[int]]:
        """Per class, the nodes having it as a child (each once, in node order)."""
        if self._parent_nodes is None:
            parents: list[list[int]] = [[] for _ in self.class_keys]
            for n, ch in enumerate(self.child_sets):
                for k in ch:
                    parents[k].append(n)
            self._parent_nodes = parents
        return self._parent_nodes

    @property
    def parent_classes(self) -> list[list[int]]:
        """Per class, the distinct classes owning a node that has it as a child."""
        if self._parent_classes is None:
            nc = self.node_class
            self._parent_classes = [list(dict.fromkeys(nc[n] for n in ps)) for ps in self.parent_nodes]
        return self._parent_classes

    @property
    def scc(self) -> _Scc:
        """Strongly connected components of the class graph over non-blacklisted nodes."""
        if self._scc is None:
            self._scc = _components(self)
        return self._scc

    @property
    def has_cycles(self) -> bool:
        """Whether some class can reach itself through non-blacklisted nodes."""
        return any(self.scc.cyclic)

    def reachable_classes(self) -> list[int]:
        """Classes reachable from the roots through any non-blacklisted node (roots first)."""
        seen = [False] * self.num_classes
        order: list[int] = []
        stack = list(reversed(self.roots))
        bl = self.node_blacklisted
        cs = self.child_sets
        while stack:
            c = stack.pop()
            if seen[c]:
                continue
            seen[c] = True
            order.append(c)
            for n in self._class_nodes[c]:
                if not bl[n]:
                    stack.extend(k for k in cs[n] if not seen[k])
        return order

    def __repr__(self) -> str:
        return (
            f"ExtractionProblem({self.num_classes} classes, {self.num_nodes} nodes, "
            f"roots={[self.class_keys[r] for r in self.roots]!r})"
        )

    # -- validation -------------------------------------------------------------------------------

    def _validate(self) -> None:
        n = len(self.node_class)
        for name, seq in (
            ("node_children", self.node_children),
            ("node_cost", self.node_cost),
            ("node_op", self.node_op),
            ("node_blacklisted", self.node_blacklisted),
            ("node_keys", self.node_keys),
        ):
            if len(seq) != n:
                raise ExtractionError(f"{name} has {len(seq)} entries for {n} nodes")
        num_c = len(self.class_keys)
        if len(set(self.class_keys)) != num_c:
            raise ExtractionError("class keys are not unique")
        # Every extraction costs at most the sum of all costs: when that sum is finite, no
        # extractor can overflow to inf (where they would disagree on what is cheapest).
        if n and not math.isfinite(sum(self.node_cost)) and all(map(math.isfinite, self.node_cost)):
            raise ExtractionError(
                f"costs too large: their sum overflows to infinity (largest {max(self.node_cost):g}); "
                "scale them down"
            )
        for i, (cost, ch) in enumerate(zip(self.node_cost, self.node_children, strict=True)):
            if not math.isfinite(cost) or cost < 0.0:
                raise ExtractionError(
                    f"node {self.describe_node(i)}: cost must be finite and >= 0, got {cost!r}"
                )
            for k in ch:
                if not (isinstance(k, int) and 0 <= k < num_c):
                    raise ExtractionError(
                        f"node {self.describe_node(i)}: child class index {k!r} out of range"
                    )
        for c, nodes in enumerate(self._class_nodes):
            if not nodes:
                raise ExtractionError(f"class {self.class_keys[c]!r} has no e-nodes")
        if not self.roots:
            raise ExtractionError("no root classes")
        if len(set(self.roots)) != len(self.roots):
            raise ExtractionError("root classes repeat")
        for r in self.roots:
            if not (isinstance(r, int) and 0 <= r < num_c):
                raise ExtractionError(f"root class index {r!r} out of range")


class _Scc:
    """Strongly connected components: ``comp[c]``, members per component in children-first
    (reverse topological) order, and ``cyclic[c]`` (the class lies on a cycle: a component of
    two or more classes, or a non-blacklisted node with its own class as a child)."""

    __slots__ = ("_components", "comp", "cyclic", "order")

    def __init__(
        self, comp: list[int], components: list[list[int]] | None, cyclic: list[bool], order: list[int]
    ) -> None:
        self.comp = comp
        self._components = components
        self.cyclic = cyclic
        self.order = order
        """Every class, children before parents except within a cyclic component."""

    @property
    def components(self) -> list[list[int]]:
        """Members per component, children-first (built on first use: an acyclic problem's are
        all singletons, and most extractors need only ``order``)."""
        if self._components is None:
            self._components = [[c] for c in self.order]
        return self._components


def _components(p: ExtractionProblem) -> _Scc:
    """SCCs of the class graph over non-blacklisted nodes, children first.

    Kahn's algorithm peels off every class not on or above a cycle (all of them, on an acyclic
    e-graph) as a singleton component, cheaply; Tarjan then runs on what is left. Members of a
    cyclic component are listed in class order.
    """
    num_c = p.num_classes
    bl = p.node_blacklisted
    cs = p.child_sets
    node_class = p.node_class
    pending = [0] * num_c
    for c, ch, b in zip(node_class, cs, bl, strict=True):
        if not b and ch:
            pending[c] += len(ch)
    ready = [c for c in range(num_c) if pending[c] == 0]
    parents = p.parent_nodes
    for c in ready:  # the list grows while it is read: Kahn's queue
        for n in parents[c]:
            if not bl[n]:
                k = node_class[n]
                pending[k] -= 1
                if pending[k] == 0:
                    ready.append(k)
    comp = [-1] * num_c
    for idx, c in enumerate(ready):
        comp[c] = idx
    cyclic = [False] * num_c
    if len(ready) == num_c:
        return _Scc(comp, None, cyclic, ready)
    components = [[c] for c in ready]
    rest = [c for c in range(num_c) if comp[c] < 0]
    local = {c: j for j, c in enumerate(rest)}
    succ: list[list[int]] = []
    for c in rest:
        out: dict[int, None] = {}
        for n in p.class_nodes[c]:
            if bl[n]:
                continue
            for k in cs[n]:
                if k == c:
                    cyclic[c] = True
                j = local.get(k)
                if j is not None:
                    out[j] = None
        succ.append(list(out))
    for members in strongly_connected_components(succ)[1]:
        classes = sorted(rest[j] for j in members)
        for c in classes:
            comp[c] = len(components)
            if len(classes) > 1:
                cyclic[c] = True
        components.append(classes)
    return _Scc(comp, components, cyclic, [c for members in components for c in members])


def strongly_connected_components(succ: Sequence[Sequence[int]]) -> tuple[list[int], list[list[int]]]:
    """Iterative Tarjan: (component id per vertex, members per component).

    Components come in reverse topological order: each after every component it points to.

    >>> strongly_connected_components([[1], [0], [1]])
    ([0, 0, 1], [[0, 1], [2]])
    """
    num_v = len(succ)
    index = [-1] * num_v
    low = [0] * num_v
    on_stack = [False] * num_v
    comp = [-1] * num_v
    stack: list[int] = []
    components: list[list[int]] = []
    counter = 0
    for start in range(num_v):
        if index[start] >= 0:
            continue
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack[start] = True
        work = [(start, 0)]
        while work:
            v, i = work[-1]
            sv = succ[v]
            if i < len(sv):
                work[-1] = (v, i + 1)
                w = sv[i]
                if index[w] < 0:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on_stack[w] = True
                    work.append((w, 0))
                elif on_stack[w] and index[w] < low[v]:
                    low[v] = index[w]
                continue
            work.pop()
            if work:
                u = work[-1][0]
                if low[v] < low[u]:
                    low[u] = low[v]
            if low[v] == index[v]:
                members: list[int] = []
                while True:
                    w = stack.pop()
                    on_stack[w] = False
                    comp[w] = len(components)
                    members.append(w)
                    if w == v:
                        break
                members.reverse()
                components.append(members)
    return comp, components


class ProblemBuilder:
    """Builds an :class:`ExtractionProblem` from nodes named by external keys.

    Classes are numbered in order of first appearance as a node's class; children name classes,
    which may be added later (cycles and forward references are allowed).

    Example:
        >>> b = ProblemBuilder()
        >>> b.add_node("a", "x", cost=0.0)
        0
        >>> b.add_node("b", "f", ["a", "a"], cost=2.0)
        1
        >>> b.build(roots=["b"]).node_children
        [(), (0, 0)]
    """

    def __init__(self) -> None:
        self._class_index: dict[Hashable, int] = {}
        self._node_class_keys: list[Hashable] = []
        self._children_keys: list[tuple[Hashable, ...]] = []
        self._costs: list[float] = []
        self._ops: list[str] = []
        self._blacklisted: list[bool] = []
        self._node_keys: list[Hashable] = []

    @property
    def num_nodes(self) -> int:
        """Nodes added so far."""
        return len(self._node_class_keys)

    def add_node(
        self,
        eclass: Hashable,
        op: str,
        children: Iterable[Hashable] = (),
        *,
        cost: float = 1.0,
        blacklisted: bool = False,
        key: Hashable | None = None,
    ) -> int:
        """Add one node to class ``eclass``; returns its node index.

        Args:
            eclass: the class key.
            op: operator label (free-form; used for display and Graph conversion).
            children: child class keys, in order.
            cost: own cost (finite, >= 0). Default 1.0 (egraph-serialize's default).
            blacklisted: never extract this node. Default False.
            key: external node id. Default: the node index as a string.
        """
        if eclass not in self._class_index:
            self._class_index[eclass] = len(self._class_index)
        idx = len(self._node_class_keys)
        self._node_class_keys.append(eclass)
        self._children_keys.append(tuple(children))
        self._costs.append(cost)
        self._ops.append(op)
        self._blacklisted.append(blacklisted)
        self._node_keys.append(str(idx) if key is None else key)
        return idx

    def build(self, roots: Iterable[Hashable]) -> ExtractionProblem:
        """The validated problem. Raises ExtractionError naming a child or root without nodes."""
        ci = self._class_index
        children: list[tuple[int, ...]] = []
        for i, ch in enumerate(self._children_keys):
            try:
                children.append(tuple(ci[k] for k in ch))
            except KeyError as exc:
                node = f"node {self._node_keys[i]!r} ({self._ops[i]})"
                raise ExtractionError(f"{node}: child class {exc.args[0]!r} has no e-nodes") from None
        root_idx = []
        for r in roots:
            if r not in ci:
                raise ExtractionError(f"root class {r!r} has no e-nodes")
            root_idx.append(ci[r])
        return ExtractionProblem(
            class_keys=list(ci),
            node_class=[ci[k] for k in self._node_class_keys],
            node_children=children,
            node_cost=self._costs,
            roots=root_idx,
            node_op=self._ops,
            node_blacklisted=self._blacklisted,
            node_keys=self._node_keys,
        )
