"""Joint moves: switch a group of classes to nodes that share one sub-graph, when that is cheaper.

A greedy extractor prices one class at a time, so it never pays for a node that is only cheaper
*together*: in a transformer's attention, rule 128 gives each of the Q and K projection classes
a second node, ``(get index=i (split (matmul ?x (concat ?Wq ?Wk))))``, reading one merged product.
Alone, each class keeps its own matmul (ViT-Base under the A100 roofline: 0.02112 ms against
0.02325 ms for the merged product); together the two pay 0.02325 instead of 0.04224. The paper's
reward (greedy-ocf) therefore stays flat after every merge, and MCTS never sees one.

The pass starts from a greedy extraction's choices and tries one move per *hub*: a class ``h``
read by unchosen, non-blacklisted nodes of two or more classes that the extraction reaches
(the ``split`` class above, read by the ``get`` nodes of Q and K). The move switches every such
class to its cheapest node reading ``h``, then reverts any single switch whose revert lowers the
cost further, and is kept only if the exact DAG cost of the whole extraction falls (by more than
a relative 1e-9 plus 1e-12 ms). Hubs are tried parents first; rounds repeat until no move is kept (at most
``max_rounds``), so nested merges (Q/K merged, then that product merged with V) are found in a
later round. The DAG cost of a move is computed incrementally, by reference counts over the
chosen nodes: only the classes that become reachable or unreachable are visited, so a move costs
a walk over the sub-graphs it adds and frees, not over the whole extraction. A switch that would
close a cycle is refused (:mod:`tensor_eqsat.extract.guard`), so the choices stay acyclic.

Rejected alternatives: every single-class switch as a local search (most of the work, and it
cannot cross the hill a merged node costs alone); hubs found through longer chains than one
node (the multi-pattern rules' targets all read their shared node through ``get``); an ILP over
the touched classes (a solver call per reward).

Example (Q and K each read ``x`` through their own product, or share one merged product):
    >>> from tensor_eqsat.extract.problem import ProblemBuilder
    >>> b = ProblemBuilder()
    >>> _ = b.add_node("x", "input", cost=0.0)
    >>> _ = b.add_node("q", "matmul", ["x"], cost=2.0)
    >>> _ = b.add_node("k", "matmul", ["x"], cost=2.0)
    >>> _ = b.add_node("m", "matmul", ["x"], cost=3.0)
    >>> _ = b.add_node("q", "get", ["m"], cost=0.0)
    >>> _ = b.add_node("k", "get", ["m"], cost=0.0)
    >>> _ = b.add_node("out", "ewadd", ["q", "k"], cost=1.0)
    >>> p = b.build(roots=["out"])
    >>> moves = JointMoves(p, [0, 1, 2, 3, 6])
    >>> moves.cost, moves.run(), moves.cost
    (5.0, 1, 4.0)
"""

from __future__ import annotations

from collections.abc import Sequence

from tensor_eqsat.extract.guard import closes_cycle
from tensor_eqsat.extract.problem import ExtractionProblem

_REL_EPS = 1e-9
"""A move must lower the DAG cost by more than this fraction of it (float noise is no gain)..."""
_ABS_EPS = 1e-12
"""... and by more than this (a zero-cost extraction's rounding is no gain either)."""


class JointMoves:
    """The joint-move pass over one extraction's choices (see the module docstring).

    Args:
        p: the problem.
        choices: per class, the chosen node or -1; copied, :attr:`choices` holds the result.
        max_rounds: sweeps over the hubs at most. Default 8.

    Attributes:
        choices: the current choices (a list, changed by :meth:`run`).
        cost: the exact DAG cost of the current choices.
        moves: moves kept so far.
    """

    def __init__(self, p: ExtractionProblem, choices: Sequence[int], *, max_rounds: int = 8) -> None:
        self.p = p
        self.choices = list(choices)
        self.max_rounds = max_rounds
        self.moves = 0
        num_c = p.num_classes
        self.ref = [0] * num_c
        own = p.node_cost
        cs = p.child_sets
        ch = self.choices
        ref = self.ref
        cost = 0.0
        stack = list(p.roots)
        for r in p.roots:
            ref[r] += 1
        seen = [False] * num_c
        while stack:
            c = stack.pop()
            if seen[c]:
                continue
            seen[c] = True
            n = ch[c]
            cost += own[n]
            for k in cs[n]:
                ref[k] += 1
                if not seen[k]:
                    stack.append(k)
        self.cost = cost
        self._log: list[tuple[int, int]] = []

    # -- reference counting with an undo log -----------------------------------------------------
    # Log entries: (class, +1 / -1) for reference changes, (class, -2 - old node) for a switch.

    def _inc(self, k: int) -> bool:
        """One more reference to ``k``; False if ``k`` becomes reachable without a choice."""
        ref = self.ref
        ch = self.choices
        cs = self.p.child_sets
        own = self.p.node_cost
        log = self._log
        stack = [k]
        while stack:
            c = stack.pop()
            ref[c] += 1
            log.append((c, 1))
            if ref[c] == 1:
                n = ch[c]
                if n < 0:
                    return False
                self.cost += own[n]
                stack.extend(cs[n])
        return True

    def _dec(self, k: int) -> None:
        """One reference fewer to ``k``; a class left with none is freed with its sub-graph."""
        ref = self.ref
        ch = self.choices
        cs = self.p.child_sets
        own = self.p.node_cost
        log = self._log
        stack = [k]
        while stack:
            c = stack.pop()
            ref[c] -= 1
            log.append((c, -1))
            if ref[c] == 0:
                n = ch[c]
                self.cost -= own[n]
                stack.extend(cs[n])

    def _switch(self, c: int, node: int) -> bool:
        """Choose ``node`` for the reachable class ``c``; False (half done: undo) if a class it
        needs has no choice."""
        p = self.p
        old = self.choices[c]
        self._log.append((c, -2 - old))
        self.choices[c] = node
        self.cost += p.node_cost[node] - p.node_cost[old]
        for k in p.child_sets[node]:
            if not self._inc(k):
                return False
        for k in p.child_sets[old]:
            self._dec(k)
        return True

    def _undo(self, mark: int, cost: float) -> None:
        log = self._log
        ref = self.ref
        while len(log) > mark:
            c, d = log.pop()
            if d >= -1:
                ref[c] -= d
            else:
                self.choices[c] = -2 - d
        self.cost = cost

    # -- the pass ---------------------------------------------------------------------------------

    def hubs(self) -> list[int]:
        """Classes read by two or more nodes, parents first (the candidates)."""
        p = self.p
        parents = p.parent_nodes
        return [h for h in reversed(p.scc.order) if len(parents[h]) >= 2]

    def run(self) -> int:
        """Keep every improving move, round after round; returns the number of moves kept.

        The first round tries every hub; a later round only the hubs read by a node of a class
        that a kept move switched, freed or made reachable (nothing else changed for them).
        """
        p = self.p
        hubs = self.hubs()
        order = {h: i for i, h in enumerate(hubs)}
        class_nodes = p.class_nodes
        cs = p.child_sets
        kept = 0
        todo = hubs
        for _ in range(self.max_rounds):
            touched: set[int] = set()
            for h in todo:
                if self.try_hub(h):
                    kept += 1
                    touched.update(c for c, _ in self._log)
                    self._log.clear()
            if not touched:
                break
            again = {k for c in touched for n in class_nodes[c] for k in cs[n] if k in order}
            todo = sorted(again, key=order.__getitem__)
        self.moves += kept
        return kept

    def try_hub(self, h: int) -> int:
        """Try the move of hub ``h``; 1 if it was kept, else 0 (choices unchanged)."""
        p = self.p
        ref = self.ref
        ch = self.choices
        node_class = p.node_class
        own = p.node_cost
        bl = p.node_blacklisted
        best: dict[int, int] = {}
        for m in p.parent_nodes[h]:
            c = node_class[m]
            if not ref[c] or ch[c] == m or bl[m]:
                continue
            b = best.get(c)
            if b is None or own[m] < own[b]:
                best[c] = m
        if len(best) < 2:
            return 0
        start = self.cost
        self._log.clear()
        cyclic = p.scc.cyclic
        switched: list[tuple[int, int, int]] = []  # (class, old node, log mark)
        for c, m in best.items():
            if not ref[c]:  # freed by an earlier switch of this move
                continue
            if cyclic[c] and closes_cycle(p, ch, c, m):
                continue
            mark, before = len(self._log), self.cost
            old = ch[c]
            if not self._switch(c, m):
                self._undo(mark, before)
                continue
            switched.append((c, old, mark))
        # Revert any single switch whose revert lowers the cost further.
        for c, old, _ in switched:
            if not ref[c] or ch[c] == old or (cyclic[c] and closes_cycle(p, ch, c, old)):
                continue
            mark, before = len(self._log), self.cost
            if not self._switch(c, old) or self.cost >= before:
                self._undo(mark, before)
        if start - self.cost > _REL_EPS * start + _ABS_EPS:
            return 1  # the log now lists the classes this move touched
        self._undo(0, start)
        return 0
