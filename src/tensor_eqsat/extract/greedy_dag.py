"""greedy-dag: greedy extraction priced by exact DAG cost (extraction-gym's faster-greedy-dag).

Each class with a choice keeps its *cost set*: the set of classes below its chosen node (itself
included) and its total, the sum of the own costs of those classes' chosen nodes, i.e. the exact
DAG cost of extracting that class alone. A node is priced by merging its children's sets, largest
first, adding only the costs of classes not yet present; a node whose merged set already contains
its own class would close a cycle and is rejected. A class keeps its cheapest node (first wins on
ties). Unlike greedy-tree, a sub-graph shared by two children is paid once; unlike the paper's
greedy-ocf, overlaps are exact set unions, so the estimate equals the true DAG cost. It remains
greedy: each class keeps only its own cheapest sub-DAG, not the one that shares best with its
siblings, so the ILP can still beat it.

Schedule: classes are processed by strongly connected components of the class graph, children
first. A class outside every cycle is priced once, after all its child classes are final, so its
set is exact (no stale sets, unlike the gym's worklist). Inside a cyclic component the gym's
worklist runs (FIFO, nodes re-queued when a child class's set improves, strict improvement,
cycle-closing changes refused by :mod:`tensor_eqsat.extract.guard`), then the component's sets are
recomputed from its final choices and the worklist resumes from any class whose set changed,
for at most ``max_rounds`` rounds, after which the sets are recomputed once more. So every
reported total is the exact DAG cost of the final choices, and the result is acyclic.

Sets are Python ints used as bitsets (class ``k`` is bit ``k``): union is one machine-level OR
over C/64 words and a set costs C bits, where dict-based sets copy O(C) entries per node and use
O(C^2) memory on long chains (extraction-gym's ``constructed.json``).

Example (the paper's appendix case, unit costs: the true cost 7, which greedy-dag reports):
    >>> from tensor_eqsat.extract.problem import ProblemBuilder
    >>> b = ProblemBuilder()
    >>> for cls, op, ch in [("1", "input", []), ("2", "a", ["1"]), ("3", "b", ["2"]),
    ...                     ("4", "c", ["2"]), ("5", "d", ["3", "4"]), ("6", "e", ["3", "4"]),
    ...                     ("7", "concat", ["5", "6"])]:
    ...     _ = b.add_node(cls, op, ch)
    >>> GreedyDagExtractor().extract(b.build(roots=["7"])).reported_cost
    7.0
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Sequence

import numpy as np

from tensor_eqsat.extract.guard import closes_cycle
from tensor_eqsat.extract.problem import ExtractionError, ExtractionProblem
from tensor_eqsat.extract.result import ExtractionResult, greedy_result

_LOOP_BITS = 24
"""Sum up to this many new classes bit by bit; above, one numpy dot product is faster."""


class GreedyDagExtractor:
    """Greedy extraction with exact DAG cost sets; acyclic results on any e-graph.

    Args:
        max_rounds: worklist rounds per cyclic component before its sets are finalized.
            Default 10. Irrelevant on acyclic e-graphs.
    """

    name = "greedy-dag"

    def __init__(self, *, max_rounds: int = 10) -> None:
        if max_rounds < 1:
            raise ValueError("max_rounds must be >= 1")
        self.max_rounds = max_rounds

    def extract(self, problem: ExtractionProblem) -> ExtractionResult:
        """Extract; raises ExtractionError if a root class has no acyclic, non-blacklisted choice."""
        start = time.perf_counter()
        state = _DagState(problem)
        rounds = state.run(self.max_rounds)
        stats = {"pricings": state.pricings, "cyclic_rounds": rounds}
        return greedy_result(problem, self.name, state.choices, state.roots_total, start, stats)


class _DagState:
    def __init__(self, p: ExtractionProblem) -> None:
        num_c = p.num_classes
        self.p = p
        self.choices = [-1] * num_c
        self.sets = [0] * num_c
        self.totals = [math.inf] * num_c
        self.unit = [0.0] * num_c  # own cost of each class's chosen node
        self.unit_arr = np.zeros(num_c)
        self.nbytes = (num_c + 7) // 8
        self.pricings = 0

    def _sum_bits(self, x: int) -> float:
        if x.bit_count() <= _LOOP_BITS:
            unit = self.unit
            s = 0.0
            while x:
                k = x.bit_length() - 1
                s += unit[k]
                x ^= 1 << k
            return s
        bits = np.unpackbits(np.frombuffer(x.to_bytes(self.nbytes, "little"), np.uint8), bitorder="little")
        return float(self.unit_arr @ bits[: len(self.unit)])

    def price(self, c: int, ch: Sequence[int], own: float, bound: float) -> tuple[int, float] | None:
        """(set, total) of a node of class ``c`` with distinct children ``ch``, or None if it
        closes a cycle, a child has no set, or its total reaches ``bound``."""
        self.pricings += 1
        sets = self.sets
        if not ch:
            return (1 << c, own) if own < bound else None
        if len(ch) == 1:
            k = ch[0]
            acc = sets[k]
            if not acc or (acc >> c) & 1:
                return None
            total = self.totals[k] + own
            return (acc | (1 << c), total) if total < bound else None
        big = ch[0]
        size = -1
        for k in ch:
            s = sets[k]
            if not s:
                return None
            bc = s.bit_count()
            if bc > size:
                big, size = k, bc
        acc = sets[big]
        total = self.totals[big] + own
        if total >= bound:
            return None
        for k in ch:
            if k == big:
                continue
            new = sets[k] & ~acc
            if new:
                total += self._sum_bits(new)
                if total >= bound:
                    return None
                acc |= new
        if (acc >> c) & 1:
            return None
        return acc | (1 << c), total

    def _choose(self, c: int, n: int, bits: int, total: float) -> None:
        self.choices[c] = n
        self.sets[c] = bits
        self.totals[c] = total
        own = self.p.node_cost[n]
        self.unit[c] = own
        self.unit_arr[c] = own

    def run(self, max_rounds: int) -> int:
        p = self.p
        scc = p.scc
        class_nodes = p.class_nodes
        child_sets = p.child_sets
        own = p.node_cost
        bl = p.node_blacklisted
        rounds = 0
        for members in scc.components:
            c = members[0]
            if len(members) > 1 or scc.cyclic[c]:
                rounds += self._component(members, max_rounds)
                continue
            best = math.inf
            best_n = -1
            best_bits = 0
            for n in class_nodes[c]:
                if bl[n]:
                    continue
                got = self.price(c, child_sets[n], own[n], best)
                if got is not None:
                    best_bits, best = got
                    best_n = n
            if best_n >= 0:
                self._choose(c, best_n, best_bits, best)
        return rounds

    def _component(self, members: list[int], max_rounds: int) -> int:
        """The gym's worklist inside one cyclic component, with exact refreshes between rounds."""
        p = self.p
        comp = p.scc.comp
        mine = comp[members[0]]
        class_nodes = p.class_nodes
        child_sets = p.child_sets
        node_class = p.node_class
        own = p.node_cost
        bl = p.node_blacklisted
        parents = p.parent_nodes
        queue: deque[int] = deque(n for c in members for n in class_nodes[c] if not bl[n])
        queued = set(queue)
        rounds = 0
        while True:
            rounds += 1
            while queue:
                n = queue.popleft()
                queued.discard(n)
                c = node_class[n]
                ch = child_sets[n]
                if c in ch:
                    continue
                got = self.price(c, ch, own[n], self.totals[c])
                if got is None or closes_cycle(p, self.choices, c, n):
                    continue
                self._choose(c, n, got[0], got[1])
                for q in parents[c]:
                    if q not in queued and not bl[q] and comp[node_class[q]] == mine:
                        queued.add(q)
                        queue.append(q)
            changed = self._refresh(members)
            if not changed or rounds >= max_rounds:
                if changed:
                    self._refresh(members)
                return rounds
            for c in changed:
                for q in (*class_nodes[c], *parents[c]):
                    if q not in queued and not bl[q] and comp[node_class[q]] == mine:
                        queued.add(q)
                        queue.append(q)

    def _refresh(self, members: list[int]) -> list[int]:
        """Recompute the component's sets from its current (acyclic) choices; the changed classes."""
        p = self.p
        comp = p.scc.comp
        mine = comp[members[0]]
        child_sets = p.child_sets
        choices = self.choices
        done: set[int] = set()
        changed: list[int] = []
        for root in members:
            if root in done or choices[root] < 0:
                continue
            stack = [(root, False)]
            while stack:
                c, expanded = stack.pop()
                if c in done:
                    continue
                ch = child_sets[choices[c]]
                if not expanded:
                    stack.append((c, True))
                    stack.extend((k, False) for k in ch if comp[k] == mine and k not in done)
                    continue
                done.add(c)
                got = self.price(c, ch, p.node_cost[choices[c]], math.inf)
                if got is None:  # cannot happen: choices are acyclic and closed
                    raise ExtractionError(f"greedy-dag: inconsistent choice for class {p.class_keys[c]!r}")
                if got[0] != self.sets[c] or got[1] != self.totals[c]:
                    self.sets[c], self.totals[c] = got
                    changed.append(c)
        return changed

    def roots_total(self) -> float:
        """Exact DAG cost of extracting all roots together (shared classes paid once)."""
        roots = self.p.roots
        acc = self.sets[roots[0]]
        total = self.totals[roots[0]]
        for r in roots[1:]:
            new = self.sets[r] & ~acc
            if new:
                total += self._sum_bits(new)
                acc |= new
        return total
