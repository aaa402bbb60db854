"""greedy-ocf: egg's greedy Extractor with the paper's cost function ("OCF", Algorithm 2).

The paper's cost function keeps, per class, a *history*: the classes below its best node with the
cost each contributed. Pricing node ``n`` of class ``c`` (``tensat/src/optimize.rs``, the authors'
code, which this mirrors rule for rule):

1. If ``c`` differs from the class of the previous call, the previous class's best history is
   stored as its history (only if non-empty), and the best cost so far is reset to +inf.
2. ``total = own cost``; the node history ``h`` starts empty. For each child class ``k`` in order:
   if ``h`` is empty, copy ``k``'s history into ``h`` and count ``k``'s full cost; else if ``k``
   is in ``h``, count 0 (already paid below a sibling); else if ``k`` has a history, add its
   entries missing from ``h`` and count ``max(cost(k) - m, 0)`` where ``m`` is the *largest single*
   value among its entries already in ``h``; else count ``k``'s full cost. A positive count is
   recorded as ``h[k]``; the count is added to ``total``.
3. If ``total`` is below the best cost so far of ``c``, ``h`` becomes ``c``'s best history.

The extractor around it is egg 0.9's ``Extractor::find_costs`` (see
:mod:`tensor_eqsat.extract.greedy_tree`): sweeps over the classes in class order until no class's
cost strictly decreases, pricing only nodes whose child classes all have a cost, first cheapest
node wins. Its quirks are reproduced on purpose, because the paper's numbers come from them:
the result depends on class and node order; a class's stored history is that of the best node of
its *latest* pricing even when the extractor keeps an older, cheaper choice; a history is stored
only when the next class starts; only the single largest overlap is subtracted, so the estimate
is exact on single-node-per-class e-graphs without nested sharing and over-counts nested sharing
(the paper's appendix case: true 7, estimate 8, tree 15).

Class order: egg iterates its class hash map (hashbrown + FxHash), an order that depends on the
map's whole insertion and removal history; this extractor follows the problem's class order
instead (the e-graph's class order), and the problem's node order inside a class (egg sorts a
class's nodes at rebuild). On e-graphs with one node per class, such as initial e-graphs, the
result does not depend on either order. Costs are float64 (egg's TensorCost used float32).

Exact speed-up: a class whose child classes' costs and histories have not changed since its last
pricing is not re-priced; the cost function's state is advanced exactly as pricing it would
(flush the previous class, then its cached best cost and history become current).

After the sweeps, the joint moves of :mod:`tensor_eqsat.extract.joint` switch groups of classes
to nodes sharing one sub-graph when the exact DAG cost falls (a merged Q/K projection that no
class takes alone); the reported cost is the paper's estimate lowered by exactly what they
saved. ``joint=False`` skips them: the authors' extractor alone (issue 13).

Deviations from the paper's code, invisible on acyclic e-graphs: blacklisted nodes are never
priced, a change that would close a cycle is refused (the authors' code printed
"Egraph has cycles!" and carried on), and several roots are combined as if by one extra zero-cost
node over them (TENSAT joins outputs with ``noop``).

Example (the paper's residual block, Figure 4: shared conv counted once, unlike greedy-tree):
    >>> from tensor_eqsat.extract.problem import ProblemBuilder
    >>> b = ProblemBuilder()
    >>> _ = b.add_node("x", "input", cost=0.0)
    >>> _ = b.add_node("c1", "conv", ["x"], cost=2.0)
    >>> _ = b.add_node("c2", "conv", ["c1"], cost=2.0)
    >>> _ = b.add_node("add", "ewadd", ["c1", "c2"], cost=1.0)
    >>> GreedyOcfExtractor().extract(b.build(roots=["add"])).reported_cost
    5.0
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from typing import Any

from tensor_eqsat.extract.guard import closes_cycle
from tensor_eqsat.extract.joint import JointMoves
from tensor_eqsat.extract.problem import ClassOrder, ExtractionProblem
from tensor_eqsat.extract.result import ExtractionResult, greedy_result

History = dict[int, float]


class GreedyOcfExtractor:
    """egg's greedy extractor with the paper's constituent-history cost function (OCF).

    Args:
        order: the class sweep order. Default CHILDREN_FIRST: one of the orders egg's hash map
            could produce, and the one needing fewest sweeps; PROBLEM follows the e-graph's
            class order. Results on e-graphs with one node per class do not depend on it.
        joint: after the greedy sweeps, run :mod:`tensor_eqsat.extract.joint`'s pass, which
            switches a group of classes to nodes sharing one sub-graph when that lowers the
            DAG cost (a merged matmul that only the Q and K projections together make
            cheaper). The reported cost is then the paper's estimate lowered by exactly what
            the pass saved. Default True; False is the authors' extractor alone.
    """

    name = "greedy-ocf"

    def __init__(self, *, order: ClassOrder = ClassOrder.CHILDREN_FIRST, joint: bool = True) -> None:
        self.order = order
        self.joint = joint

    def extract(self, problem: ExtractionProblem) -> ExtractionResult:
        """Extract; raises ExtractionError if a root class has no acyclic, non-blacklisted choice."""
        start = time.perf_counter()
        state = OcfState(problem)
        sweeps = state.run(self.order)
        return self._finish(problem, state, start, {"sweeps": sweeps, "pricings": state.pricings})

    def extract_incremental(
        self, problem: ExtractionProblem, enodes: Sequence[tuple[Any, ...]], memo: OcfMemo
    ) -> ExtractionResult:
        """:meth:`extract` for a problem built from an e-graph (``enodes[n]`` is node ``n``'s
        e-node, whose third field holds its children's e-class ids, the ids of
        ``problem.class_keys``), re-pricing only the classes whose inputs differ from those of
        the e-graph ``memo`` priced last (see :class:`OcfMemo`). The result is :meth:`extract`'s.
        Falls back to :meth:`extract`, leaving ``memo`` as it was, on an e-graph with cycles or
        with another class order."""
        if self.order is not ClassOrder.CHILDREN_FIRST or problem.has_cycles:
            return self.extract(problem)
        start = time.perf_counter()
        state = memo.price(problem, enodes)
        stats = {"sweeps": 1, "pricings": state.pricings, "reused": state.reused}
        return self._finish(problem, state, start, stats)

    def _finish(
        self, problem: ExtractionProblem, state: OcfState | MemoState, start: float, stats: dict[str, Any]
    ) -> ExtractionResult:
        """The joint moves over the greedy choices, then the result."""
        choices: list[int] = state.choices
        reported = state.root_cost
        if self.joint and all(choices[r] >= 0 for r in problem.roots):
            moves = JointMoves(problem, choices)
            before = moves.cost
            stats["joint_moves"] = moves.run()
            if moves.moves:
                choices = moves.choices
                saved = before - moves.cost
                reported = lambda: state.root_cost() - saved  # noqa: E731
        return greedy_result(problem, self.name, choices, reported, start, stats)


# A node's history as the authors' code builds it (a copy of its first contributing child's
# history plus additions) is kept as ``[base, extra, reuse, full]``: the shared stored history
# of that child (or None), the additions, whether the node may take the child's dict over, and
# the dict built once when the history is stored. Nodes that never become their class's best
# are therefore never copied. (A list, not a class: one is made per pricing.)
NodeHistory = list[Any]
_BASE, _EXTRA, _REUSE, _FULL = 0, 1, 2, 3


def _full(nh: NodeHistory) -> History:
    """The node history as one dict (built once)."""
    full = nh[_FULL]
    if full is None:
        base, extra = nh[_BASE], nh[_EXTRA]
        if base is None:
            full = extra
        elif nh[_REUSE]:
            # The child's history has no other reader left (see OcfState.run): extend it.
            base.update(extra)
            full = base
        else:
            full = base.copy()
            full.update(extra)
        nh[_FULL] = full
    return full


class OcfState:
    """The cost function's state and egg's extractor loop over one problem."""

    def __init__(self, p: ExtractionProblem) -> None:
        num_c = p.num_classes
        self.p = p
        self.costs: list[float | None] = [None] * num_c
        self.choices = [-1] * num_c
        # The cost function's state (tensat's TensorCost): stored histories, the class of the
        # previous call, its best cost so far, and the history of that best node.
        self.hist: dict[int, History] = {}
        self.cur = -1
        self.best_cur = math.inf
        self.hist_cur: NodeHistory = [None, {}, False, None]
        # Per class, the result of its latest pricing: (best cost, best history), for skipping.
        self.cached: list[tuple[float, NodeHistory] | None] = [None] * num_c
        # Classes whose child classes changed cost or history since their latest pricing.
        self.dirty = [True] * num_c
        self.pricings = 0
        self._parents = p.parent_nodes
        self._node_class = p.node_class

    def _switch(self, c: int) -> None:
        """A call for class ``c`` after one for another class: store the previous class's best
        history (if non-empty) and reset the best cost."""
        hc = self.hist_cur
        if hc[_BASE] or hc[_EXTRA]:
            prev = self.cur
            new = _full(hc)
            old = self.hist.get(prev)
            if old is not new:
                self.hist[prev] = new
                if old != new:
                    nc = self._node_class
                    dirty = self.dirty
                    for n in self._parents[prev]:
                        dirty[nc[n]] = True
        self.cur = c
        self.best_cur = math.inf

    def run(self, order_kind: ClassOrder = ClassOrder.CHILDREN_FIRST) -> int:
        """egg's find_costs; returns the number of sweeps."""
        p = self.p
        order = order_kind.classes(p)
        class_nodes = p.class_nodes
        children = p.node_children
        own = p.node_cost
        bl = p.node_blacklisted
        parents = p.parent_nodes
        node_class = p.node_class
        cyclic = p.scc.cyclic
        costs = self.costs
        choices = self.choices
        hist = self.hist
        cached = self.cached
        dirty = self.dirty
        # On an acyclic e-graph swept children first, every class is priced exactly once, in the
        # first sweep; a non-root class read by a single node then has a single reader of its
        # history, and the reader's stored history may take over the dict instead of copying it.
        sole_reader: list[bool] | None = None
        if order_kind is ClassOrder.CHILDREN_FIRST and not p.has_cycles:
            sole_reader = [len(ps) == 1 for ps in parents]
            for r in p.roots:
                sole_reader[r] = False
        pricings = 0
        sweeps = 0
        did_something = True
        while did_something:
            did_something = False
            sweeps += 1
            for c in order:
                if not dirty[c]:
                    entry = cached[c]
                    if entry is not None and self.cur != c:
                        # Advance the state exactly as re-pricing unchanged inputs would.
                        self._switch(c)
                        self.best_cur, self.hist_cur = entry
                    continue
                best: float | None = None
                best_n = -1
                best_h: NodeHistory | None = None
                cands: list[tuple[float, int]] = []
                for n in class_nodes[c]:
                    if bl[n]:
                        continue
                    ch = children[n]
                    for k in ch:
                        if costs[k] is None:
                            break
                    else:
                        if self.cur != c:
                            self._switch(c)
                        pricings += 1
                        h, total = combine(hist, costs, ch, own[n], sole_reader)  # type: ignore[arg-type]
                        if total < self.best_cur:
                            self.hist_cur = h
                            self.best_cur = total
                        if best is None or total < best:
                            best, best_n, best_h = total, n, h
                        cands.append((total, n))
                # Cleared only now: starting this class flushed the previous class's history,
                # which may be a child's, and marked this class dirty although it priced with it.
                dirty[c] = False
                if best is None:
                    continue
                # What pricing this class afresh gives; replayed while its inputs stay unchanged.
                cached[c] = (best, best_h)  # type: ignore[assignment]
                old = costs[c]
                if old is not None and not best < old:
                    continue
                if cyclic[c]:
                    best_n = -1
                    for total, n in sorted(cands, key=lambda t: t[0]):
                        if old is not None and not total < old:
                            break
                        if not closes_cycle(p, choices, c, n):
                            best, best_n = total, n
                            break
                    if best_n < 0:
                        continue
                costs[c] = best
                choices[c] = best_n
                did_something = True
                for q in parents[c]:
                    dirty[node_class[q]] = True
        self.pricings = pricings
        return sweeps

    def root_cost(self) -> float:
        """The estimate at the roots: the root's cost, or a zero-cost join over several roots."""
        roots = self.p.roots
        if len(roots) > 1:
            self._switch(-1)  # store the last class's history, as the join's own pricing would
        return roots_cost(self.hist, self.costs, roots)  # type: ignore[arg-type]


def roots_cost(hist: dict[int, History], costs: Sequence[float], roots: Sequence[int]) -> float:
    """The root's cost, or the cost of a zero-cost node joining several roots (with every
    class's history stored in ``hist``)."""
    if len(roots) == 1:
        return costs[roots[0]]
    _, total = combine(hist, costs, roots, 0.0)
    return total


def combine(
    hist: dict[int, History],
    costs: Sequence[float],
    ch: Sequence[int],
    own_cost: float,
    sole_reader: Sequence[bool] | None = None,
) -> tuple[NodeHistory, float]:
    """The paper's cost of a node with children ``ch``: (its history, its total).

    ``hist`` holds the stored histories. The node's history ``h`` is ``base`` (the first
    contributing child's stored history, shared) plus ``extra`` (everything added after it).
    ``sole_reader[k]`` says this node is the last reader of class ``k``'s history, which may
    then become the node's own when it is stored.
    """
    total = own_cost
    base: History | None = None
    base_class = -1
    extra: History = {}
    for k in ch:
        if base is None and not extra:  # h is empty
            hk = hist.get(k)
            if hk:
                base = hk
                base_class = k
            x = costs[k]
        elif k in extra or (base is not None and k in base):
            x = 0.0
        else:
            hk = hist.get(k)
            if hk is None:
                x = costs[k]
            else:
                # The authors' loop, literally: the largest value among entries already in h
                # (starting at 0), and every other entry added. A plain loop beats set
                # operations here, which hash every key of both histories.
                m = 0.0
                if base is None:
                    for key, value in hk.items():
                        if key in extra:
                            if value > m:
                                m = value
                        else:
                            extra[key] = value
                else:
                    for key, value in hk.items():
                        if key in base or key in extra:
                            if value > m:
                                m = value
                        else:
                            extra[key] = value
                x = costs[k] - m
                if x < 0.0:
                    x = 0.0
        if x > 0.0:
            extra[k] = x
        total += x
    reuse = sole_reader is not None and base_class >= 0 and sole_reader[base_class]
    return [base, extra, reuse, None], total


class OcfMemo:
    """Greedy-OCF's result for every e-class of the e-graph it priced last, by e-class id, so
    that pricing the next e-graph of a search (mostly the last one plus one rule application)
    re-prices only the classes whose inputs changed.

    On an acyclic e-graph swept children first, :class:`OcfState` prices every class once, in
    the first sweep, and the second sweep changes nothing. A class's result (cost, chosen node,
    stored history) is then a function of its nodes in order (each one's own cost, blacklisting
    and child classes) and of its child classes' costs and histories: the cost function's
    state carries nothing else from one class to the next, and any children-first order gives
    the same results. Histories here are keyed by e-class id rather than by problem index, so
    they mean the same in every problem built from the e-graphs of one search. A class is
    re-priced only if its nodes, their costs or blacklisting differ from the memo's entry for
    its id, or if a child class's cost or history differs from the memo's; a re-priced class
    whose cost and history come out as before does not make its parents re-price. Everything
    is compared by value, so an entry is safe to use for any e-graph, related or not.

    Unlike :class:`OcfState`, a stored history is never taken over by a parent (it may be
    read again by the next e-graph's pricing): a parent copies it.
    """

    __slots__ = ("entries",)

    def __init__(self) -> None:
        self.entries: dict[int, _Entry] = {}

    def price(self, p: ExtractionProblem, enodes: Sequence[tuple[Any, ...]]) -> MemoState:
        """Price every class of ``p`` (acyclic, built from an e-graph; see
        :meth:`GreedyOcfExtractor.extract_incremental`) and remember the results."""
        keys: Sequence[int] = p.class_keys  # type: ignore[assignment]
        class_nodes = p.class_nodes
        own = p.node_cost
        bl = p.node_blacklisted
        parents = p.parent_nodes
        node_class = p.node_class
        old = self.entries
        new: dict[int, _Entry] = {}
        costs: list[float | None] = [None] * (max(keys) + 1)
        hist: dict[int, History] = {}
        choices = [-1] * p.num_classes
        # Classes a child of which has a cost or history unlike the memo's (by problem index).
        dirty = [False] * p.num_classes
        pricings = reused = 0
        for c in p.scc.order:
            key = keys[c]
            ns = class_nodes[c]
            s = ns[0]
            # The class's own inputs: its e-node, cost and blacklisting, or lists of them.
            sig: tuple[Any, Any, Any]
            if len(ns) == 1:
                sig = (enodes[s], own[s], bl[s])
            else:
                e = ns[-1] + 1
                sig = (enodes[s:e], own[s:e], bl[s:e])
            entry = old.get(key)
            if not dirty[c] and entry is not None and entry[0] == sig:
                reused += 1
                new[key] = entry
                best = entry[1]
                if best is not None:
                    costs[key] = best
                    choices[c] = s + entry[2]
                    if entry[3] is not None:
                        hist[key] = entry[3]
                continue
            best = None
            pos = -1
            best_h: NodeHistory | None = None
            for i, n in enumerate(ns):
                if bl[n]:
                    continue
                ch = enodes[n][2]
                for k in ch:
                    if costs[k] is None:
                        break
                else:
                    pricings += 1
                    h, total = combine(hist, costs, ch, own[n])  # type: ignore[arg-type]
                    if best is None or total < best:
                        best, pos, best_h = total, i, h
            full: History | None = None
            if best is not None:
                costs[key] = best
                choices[c] = s + pos
                if best_h is not None and (best_h[_BASE] or best_h[_EXTRA]):
                    full = hist[key] = _full(best_h)
            new[key] = (sig, best, pos, full)
            if entry is None or entry[1] != best or entry[3] != full:
                for n in parents[c]:
                    dirty[node_class[n]] = True
        self.entries = new
        roots = [keys[r] for r in p.roots]
        return MemoState(costs, choices, hist, roots, pricings, reused)


_Entry = tuple[tuple[Any, Any, Any], "float | None", int, "History | None"]
"""One class in :class:`OcfMemo`: its inputs besides its children's results (its e-nodes, their
costs and blacklisting: for a class of one node the three values, else three lists), its cost
(None: no node could be priced), the chosen node's position in the class, and its stored
history (None when empty)."""


class MemoState:
    """:class:`OcfMemo`'s pricing of one problem: what :class:`OcfState` would hold after its
    sweeps (costs and histories by e-class id, choices by problem index)."""

    __slots__ = ("choices", "costs", "hist", "pricings", "reused", "roots")

    def __init__(
        self,
        costs: list[float | None],
        choices: list[int],
        hist: dict[int, History],
        roots: list[int],
        pricings: int,
        reused: int,
    ) -> None:
        self.costs = costs
        self.choices = choices
        self.hist = hist
        self.roots = roots
        self.pricings = pricings
        self.reused = reused

    def root_cost(self) -> float:
        """:meth:`OcfState.root_cost`: the root's cost, or a zero-cost join over several roots."""
        return roots_cost(self.hist, self.costs, self.roots)  # type: ignore[arg-type]
