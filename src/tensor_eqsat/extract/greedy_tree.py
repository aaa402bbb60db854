"""greedy-tree: egg's bottom-up greedy Extractor with its default tree cost (the paper's "DCF").

Algorithm (egg 0.9 ``Extractor::find_costs``): sweep over all classes in class order, again and
again until a sweep changes nothing. In a class, every node whose child classes all have a cost
is priced ``own cost + sum of the children's costs`` (children in order, repeats counted); the
first cheapest node wins, and it replaces the class's choice only if strictly cheaper. The fixpoint
is the optimal *tree* cost (Bellman-Ford over the class graph): a sub-graph used twice is paid
twice, which is why the paper shows it overestimating tensor programs by orders of magnitude.

Exact speed-up: a class is re-priced only when one of its child classes changed cost since its
last pricing (the cost function is stateless, so skipping it cannot change anything).

Deviations from egg, both invisible on valid inputs: blacklisted nodes are never priced, and a
change that would close a cycle is refused (:mod:`tensor_eqsat.extract.guard`; with costs >= 0
the tree fixpoint never closes one, but the guard keeps the result valid by construction).

Example:
    >>> from tensor_eqsat.extract.problem import ProblemBuilder
    >>> b = ProblemBuilder()
    >>> _ = b.add_node("x", "input", cost=0.0)
    >>> _ = b.add_node("c1", "conv", ["x"], cost=2.0)
    >>> _ = b.add_node("c2", "conv", ["c1"], cost=2.0)
    >>> _ = b.add_node("add", "ewadd", ["c1", "c2"], cost=1.0)
    >>> r = GreedyTreeExtractor().extract(b.build(roots=["add"]))
    >>> r.reported_cost, r.dag_cost()
    (7.0, 5.0)
"""

from __future__ import annotations

import time

from tensor_eqsat.extract.guard import closes_cycle
from tensor_eqsat.extract.problem import ClassOrder, ExtractionProblem
from tensor_eqsat.extract.result import ExtractionResult, greedy_result


class GreedyTreeExtractor:
    """egg's greedy extractor with tree cost (DCF). Optimal for tree cost.

    Args:
        order: the class sweep order. Default CHILDREN_FIRST (fewest sweeps; the tree costs
            reached do not depend on the order, only ties between equal-cost nodes may).
    """

    name = "greedy-tree"

    def __init__(self, *, order: ClassOrder = ClassOrder.CHILDREN_FIRST) -> None:
        self.order = order

    def extract(self, problem: ExtractionProblem) -> ExtractionResult:
        """Extract; raises ExtractionError if a root class has no acyclic, non-blacklisted choice."""
        start = time.perf_counter()
        costs, choices, sweeps = tree_fixpoint(problem, self.order)

        def reported() -> float:
            total = 0.0
            for r in problem.roots:
                total += costs[r]  # type: ignore[operator]
            return total

        return greedy_result(problem, self.name, choices, reported, start, {"sweeps": sweeps})


def tree_fixpoint(
    p: ExtractionProblem, order_kind: ClassOrder = ClassOrder.CHILDREN_FIRST
) -> tuple[list[float | None], list[int], int]:
    """egg's find_costs with tree cost: per class (cost or None, chosen node or -1), sweeps."""
    num_c = p.num_classes
    order = order_kind.classes(p)
    class_nodes = p.class_nodes
    children = p.node_children
    own = p.node_cost
    bl = p.node_blacklisted
    parents = p.parent_nodes
    node_class = p.node_class
    cyclic = p.scc.cyclic
    costs: list[float | None] = [None] * num_c
    choices = [-1] * num_c
    dirty = [True] * num_c
    sweeps = 0
    did_something = True
    while did_something:
        did_something = False
        sweeps += 1
        for c in order:
            if not dirty[c]:
                continue
            dirty[c] = False
            best: float | None = None
            best_n = -1
            cands: list[tuple[float, int]] = []
            for n in class_nodes[c]:
                if bl[n]:
                    continue
                total = own[n]
                for k in children[n]:
                    ck = costs[k]
                    if ck is None:
                        break
                    total += ck
                else:
                    if best is None or total < best:
                        best, best_n = total, n
                    cands.append((total, n))
            if best is None:
                continue
            old = costs[c]
            if old is not None and not best < old:
                continue
            if cyclic[c]:
                best_n = -1
                # Stable sort keeps egg's "first cheapest" order among equal costs.
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
    return costs, choices, sweeps
