"""ExtractionResult: one chosen e-node per e-class, validated and priced by shared code.

Every extractor returns this same object, so that extractors are comparable (extraction-gym's
separation of choosing, costing and checking): :meth:`ExtractionResult.check` validates it (every
root chosen, closed over children, acyclic, no blacklisted node, each node in its own class),
:meth:`ExtractionResult.dag_cost` prices it the way a tensor program runs (a shared sub-graph is
paid once), :meth:`ExtractionResult.tree_cost` the way egg's default cost function does (once per
use). ``reported_cost`` is what the extractor itself believed the roots cost: the tree cost for
greedy-tree, the paper's estimate for greedy-ocf, the merged cost sets for greedy-dag, the DAG
cost for ilp. The paper's accuracy table compares exactly these.

Only classes reachable from the roots through chosen nodes matter; choices elsewhere are kept
(they cost nothing and are never checked).
"""

from __future__ import annotations

import enum
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tensor_eqsat.extract.problem import ExtractionError, ExtractionProblem


class SolveStatus(enum.Enum):
    """How an extraction ended.

    HEURISTIC: a greedy extractor (no optimality claim). OPTIMAL: proven optimal in DAG cost.
    TIME_LIMIT: the solver stopped at its time limit; the result is the best valid one found
    (solver incumbent or greedy warm start). NODE_LIMIT: the solver stopped at its
    branch-and-bound node limit (a limit that does not depend on the machine); the result is the
    best valid one found, as for TIME_LIMIT. STALL_LIMIT: the solver stopped after its stall limit
    of LP iterations without a better answer (also machine-independent); the result is the best
    valid one found. INFEASIBLE: no acyclic extraction exists.
    """

    HEURISTIC = "heuristic"
    OPTIMAL = "optimal"
    TIME_LIMIT = "time_limit"
    NODE_LIMIT = "node_limit"
    STALL_LIMIT = "stall_limit"
    INFEASIBLE = "infeasible"


@dataclass(frozen=True, eq=False)
class ExtractionResult:
    """The choice of one e-node per e-class, plus how it was found.

    Attributes:
        problem: the problem it answers.
        choices: per class, the chosen node index, or -1 for "no choice".
        extractor: the extractor's registered name.
        reported_cost: the extractor's own estimate of the roots' cost (see module docstring).
        time_s: wall time of the extraction itself (not of building the problem), seconds.
        status: how the extraction ended. Default HEURISTIC.
        gap: relative optimality gap (best - bound) / best for ILP, else None.
        lower_bound: the solver's proven lower bound on the DAG cost, or None.
        stats: extractor-specific counters (sweeps, pruned nodes, solver status string, ...).
    """

    problem: ExtractionProblem
    choices: tuple[int, ...]
    extractor: str
    reported_cost: float
    time_s: float
    status: SolveStatus = SolveStatus.HEURISTIC
    gap: float | None = None
    lower_bound: float | None = None
    stats: Mapping[str, Any] = field(default_factory=dict)

    def chosen(self, c: int) -> int:
        """The node chosen for class ``c`` (-1 if none)."""
        return self.choices[c]

    def topo_classes(self) -> list[int]:
        """Classes reachable from the roots through chosen nodes, children before parents.

        Raises:
            ExtractionError: a reachable class has no choice, or the choices form a cycle.
        """
        p = self.problem
        ch = self.choices
        children = p.node_children
        state = [0] * p.num_classes  # 0 new, 1 on the DFS path, 2 done
        order: list[int] = []
        for root in p.roots:
            if state[root]:
                continue
            if ch[root] < 0:
                raise ExtractionError(f"root class {p.class_keys[root]!r} has no chosen node")
            state[root] = 1
            stack = [(root, iter(children[ch[root]]))]
            while stack:
                c, it = stack[-1]
                for k in it:
                    sk = state[k]
                    if sk == 2:
                        continue
                    if sk == 1:
                        path = [p.class_keys[s[0]] for s in stack]
                        start = path.index(p.class_keys[k])
                        cycle = " -> ".join(repr(x) for x in [*path[start:], p.class_keys[k]])
                        raise ExtractionError(f"chosen nodes form a cycle: {cycle}")
                    nk = ch[k]
                    if nk < 0:
                        parent = p.describe_node(ch[c])
                        raise ExtractionError(
                            f"class {p.class_keys[k]!r} (child of {parent}) has no chosen node"
                        )
                    state[k] = 1
                    stack.append((k, iter(children[nk])))
                    break
                else:
                    stack.pop()
                    state[c] = 2
                    order.append(c)
        return order

    def check(self) -> None:
        """Validate: every root chosen, closed over children, acyclic, blacklist respected.

        Raises:
            ExtractionError: naming the first class or node that violates a rule.
        """
        p = self.problem
        if len(self.choices) != p.num_classes:
            raise ExtractionError(f"{len(self.choices)} choices for {p.num_classes} classes")
        for c in self.topo_classes():
            n = self.choices[c]
            if not 0 <= n < p.num_nodes or p.node_class[n] != c:
                raise ExtractionError(f"class {p.class_keys[c]!r}: chosen node {n} is not one of its nodes")
            if p.node_blacklisted[n]:
                raise ExtractionError(f"chosen node {p.describe_node(n)} is blacklisted")

    def is_valid(self) -> bool:
        """Whether :meth:`check` passes."""
        try:
            self.check()
        except ExtractionError:
            return False
        return True

    def dag_cost(self) -> float:
        """Sum of own costs of the chosen nodes of the classes reachable from the roots.

        This is what the extracted program costs under a per-operator additive cost model: a
        shared sub-graph is paid once. Raises ExtractionError on an invalid result.
        """
        cost = self.problem.node_cost
        ch = self.choices
        return sum(cost[ch[c]] for c in self.topo_classes())

    def tree_cost(self) -> float:
        """Own cost of each root's node plus the tree costs of its children, counting every use.

        egg's default cost function; on tensor graphs with shared sub-graphs it grows
        exponentially with depth. Raises ExtractionError on an invalid result.
        """
        p = self.problem
        ch = self.choices
        cost = p.node_cost
        children = p.node_children
        tree: dict[int, float] = {}
        for c in self.topo_classes():
            n = ch[c]
            total = cost[n]
            for k in children[n]:
                total += tree[k]
            tree[c] = total
        return sum(tree[r] for r in self.problem.roots)

    def chosen_nodes(self) -> list[int]:
        """The chosen nodes of the classes reachable from the roots, children first."""
        return [self.choices[c] for c in self.topo_classes()]

    def to_dict(self, *, include_choices: bool = True) -> dict[str, Any]:
        """A JSON-ready summary: costs, timing, status, and the reachable choices by external id."""
        out: dict[str, Any] = {
            "extractor": self.extractor,
            "status": self.status.value,
            "reported_cost": self.reported_cost,
            "dag_cost": self.dag_cost(),
            "tree_cost": self.tree_cost(),
            "time_s": self.time_s,
        }
        if self.gap is not None:
            out["gap"] = self.gap
        if self.lower_bound is not None:
            out["lower_bound"] = self.lower_bound
        if self.stats:
            out["stats"] = dict(self.stats)
        if include_choices:
            p = self.problem
            out["choices"] = {
                str(p.class_keys[c]): str(p.node_keys[self.choices[c]]) for c in reversed(self.topo_classes())
            }
        return out


def greedy_result(
    problem: ExtractionProblem,
    extractor: str,
    choices: Sequence[int],
    reported_cost: Callable[[], float],
    start: float,
    stats: Mapping[str, Any],
) -> ExtractionResult:
    """The result of a greedy extractor, shared by the three: ExtractionError naming the root
    classes left without a choice (``-1``: every candidate was blacklisted or closed a cycle),
    else the result timed from ``start`` (a ``time.perf_counter()`` value). ``reported_cost`` is
    only called once every root has a choice."""
    missing = [problem.class_keys[r] for r in problem.roots if choices[r] < 0]
    if missing:
        raise ExtractionError(f"{extractor}: no valid extraction for root class(es) {missing!r}")
    return ExtractionResult(
        problem=problem,
        choices=tuple(choices),
        extractor=extractor,
        reported_cost=reported_cost(),
        time_s=time.perf_counter() - start,
        stats=dict(stats),
    )
