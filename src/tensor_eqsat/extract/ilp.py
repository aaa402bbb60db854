"""ilp: exact extraction by integer linear programming (the paper's eq. 1a-1e, DAG cost).

Formulation (TENSAT's, as in the paper), over the pruned problem:

- ``x_i`` binary per node; minimise ``sum_i cost_i x_i`` (1a, 1b): each chosen node paid once;
- each root class: ``sum_{i in class} x_i = 1`` (1c); every other class ``<= 1`` (at most one
  node per class: the answer is one choice per class, and it tightens the relaxation);
- each node ``i`` and distinct child class ``m``: ``x_i <= sum_{j in m} x_j`` (1d). When every node
  of a class has ``m`` as a child, one row ``sum_{i in class} x_i <= sum_{j in m} x_j`` replaces
  them (extraction-gym's intersection trick);
- blacklisted nodes are removed (1e);
- acyclicity, only where the pruned class graph has cycles: an order variable ``t_c`` in
  ``[0, S-1]`` for each class of a strongly connected component of size S, and for each node ``i``
  of class ``c`` with child class ``m`` in the same component, ``t_c - t_m >= 1 - S (1 - x_i)``.
  TENSAT ran with ``--no_order`` and relied on its blacklist; this model is exact without it.

Pruning before solving, each step sound (an optimal solution survives): blacklisted and
self-loop nodes; nodes whose own cost exceeds the greedy-dag upper bound; nodes with a child class
left empty (propagated); classes unreachable from the roots; dominated nodes (another node of the
class costs no more and needs a subset of its child classes). Repeated until nothing changes.

Solving: greedy-dag first, as upper bound, warm start and fallback. The solver runs with a time
limit and thread count; its answer is validated independently (:meth:`ExtractionResult.check`)
and priced by :meth:`ExtractionResult.dag_cost`, never by its objective, and the cheaper of solver
and greedy answers is returned, with the solver's status, its lower bound and the optimality gap.
Costs are scaled so the upper bound is about 1000 before solving, since tensor op costs in ms can
be as small as 1e-5, near solver tolerances.

Rejected alternatives: lazily added cycle cuts (extraction-gym's faster-ilp-cbc) re-solve from
scratch per round, and on tensor e-graphs, whose cycles come from split/concat aliases, the gym
measured 85+ rounds on vgg; order variables restricted to cyclic components cost one solve and
nothing on acyclic e-graphs. OR-Tools (TENSAT's SCIP front end) would add an 80 MB dependency for
the same SCIP.

Example:
    >>> from tensor_eqsat.extract.problem import ProblemBuilder
    >>> b = ProblemBuilder()
    >>> _ = b.add_node("x", "input", cost=0.0)
    >>> _ = b.add_node("a", "f", ["x"], cost=3.0)
    >>> _ = b.add_node("a", "g", ["x"], cost=1.0)
    >>> r = IlpExtractor().extract(b.build(roots=["a"]))
    >>> r.dag_cost(), r.status.value
    (1.0, 'optimal')
"""

from __future__ import annotations

import enum
import importlib.util
import logging
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from tensor_eqsat.errors import check_positive_int
from tensor_eqsat.extract.greedy_dag import GreedyDagExtractor
from tensor_eqsat.extract.ilp_solvers import SolverOutcome, solve_highs, solve_scip
from tensor_eqsat.extract.problem import ExtractionError, ExtractionProblem, strongly_connected_components
from tensor_eqsat.extract.result import ExtractionResult, SolveStatus

log = logging.getLogger(__name__)

_SCALE_TARGET = 1000.0
"""The greedy upper bound is scaled to about this value before solving."""


class IlpBackend(enum.Enum):
    """The MILP solver. SCIP (via pyscipopt) is the paper's; HiGHS (via highspy) the alternative."""

    SCIP = "scip"
    HIGHS = "highs"

    @property
    def module(self) -> str:
        """The Python package that provides this solver."""
        return "pyscipopt" if self is IlpBackend.SCIP else "highspy"

    def unavailable(self) -> str | None:
        """Why this solver cannot be used here, or None when it can."""
        if importlib.util.find_spec(self.module) is None:
            return f"ilp backend {self.value!r} needs {self.module} (pip install 'tensor-eqsat[ilp]')"
        return None


def installed_backend() -> IlpBackend:
    """The solver used when none is named: SCIP (the paper's) where pyscipopt is installed, else
    HiGHS (highspy, a core dependency)."""
    return IlpBackend.SCIP if IlpBackend.SCIP.unavailable() is None else IlpBackend.HIGHS


@dataclass(frozen=True, kw_only=True)
class IlpConfig:
    """ILP extraction settings.

    Attributes:
        backend: the solver. Default: SCIP where pyscipopt is installed (the ``ilp`` extra),
            else HiGHS (a core dependency), see :func:`installed_backend`.
        time_limit: solver wall-time limit per solve, in seconds; None for none. Default 60 (the paper
            allowed 600 per solve).
        threads: solver threads. Default 1 (as the paper). HiGHS uses them in its MIP search;
            SCIP's branch and bound is single-threaded, it receives ``parallel/maxnthreads``.
        warm_start: give the solver the greedy-dag answer as a starting solution. Default True.
        prune: run the sound pruning passes before building the model. Default True.
        rel_gap: relative gap at which the solver may stop and call the answer optimal.
            Default 1e-9 (prove optimality).
        node_limit: branch-and-bound nodes the solver may explore (SCIP ``limits/nodes``, HiGHS
            ``mip_max_nodes``); at the limit the answer is the best found, with status
            ``NODE_LIMIT``. Unlike ``time_limit`` it stops at the same point on any machine, so
            a single-threaded solve (``threads=1``) that stops there gives the same answer
            everywhere. Default None (no limit).
        stall_limit: LP iterations (strong branching's included) the solver may spend without
            improving its best answer; at the limit the answer is the best found, with status
            ``STALL_LIMIT``. It bounds the work at a single node, which ``node_limit`` does not
            (strong branching, cut rounds, restarts at the root), and, like it, stops at the same
            point on any machine. It stops a solve without changing its path, so a solve that
            never goes that long without improving returns the same answer. SCIP only (ValueError
            with HiGHS). Default None (no limit).
    """

    backend: IlpBackend = field(default_factory=installed_backend)
    time_limit: float | None = 60.0
    threads: int = 1
    warm_start: bool = True
    prune: bool = True
    rel_gap: float = 1e-9
    node_limit: int | None = None
    stall_limit: int | None = None

    def __post_init__(self) -> None:
        if self.time_limit is not None and not self.time_limit > 0:
            raise ValueError(f"time_limit must be > 0 or None, got {self.time_limit!r}")
        if self.threads < 1:
            raise ValueError(f"threads must be >= 1, got {self.threads!r}")
        if not 0.0 <= self.rel_gap < 1.0:
            raise ValueError(f"rel_gap must be in [0, 1), got {self.rel_gap!r}")
        check_positive_int(self.node_limit, "node_limit", ValueError)
        check_positive_int(self.stall_limit, "stall_limit", ValueError)
        if self.stall_limit is not None and self.backend is not IlpBackend.SCIP:
            raise ValueError("stall_limit needs the scip backend (HiGHS reports no LP iterations to count)")


@dataclass
class IlpModel:
    """The linear model, solver-independent. Columns: nodes, then order variables.

    Rows are ``lower <= sum(coef * col) <= upper`` in compressed row form.
    """

    nodes: list[int]
    """Problem node index of each node column."""
    num_order: int
    """Number of order variables (after the node columns)."""
    order_upper: list[float]
    obj: list[float]
    row_start: list[int]
    row_index: list[int]
    row_value: list[float]
    row_lower: list[float]
    row_upper: list[float]
    scale: float

    @property
    def num_cols(self) -> int:
        return len(self.nodes) + self.num_order

    @property
    def num_rows(self) -> int:
        return len(self.row_lower)


@dataclass
class Pruned:
    """What pruning kept: per class its surviving nodes (empty = class not in the model)."""

    class_nodes: list[list[int]]
    removed: dict[str, int]

    def kept_classes(self) -> list[int]:
        return [c for c, ns in enumerate(self.class_nodes) if ns]


def prune(p: ExtractionProblem, upper_bound: float | None, *, enabled: bool = True) -> Pruned:
    """The sound pruning passes; every node of an optimal extraction within the bound survives.

    Args:
        p: the problem.
        upper_bound: a known valid DAG cost; nodes costing more cannot be in a better answer.
        enabled: False keeps everything except blacklisted and self-loop nodes and unreachable
            classes, which the model cannot contain anyway.

    Raises:
        ExtractionError: a root class has no node left (no acyclic extraction exists).
    """
    cs = p.child_sets
    own = p.node_cost
    removed = {"blacklisted": 0, "self_loop": 0, "above_bound": 0, "empty_child": 0, "dominated": 0}
    alive = [True] * p.num_nodes
    limit = math.inf
    if enabled and upper_bound is not None:
        limit = upper_bound + 1e-9 * max(1.0, abs(upper_bound))
    for n in range(p.num_nodes):
        c = p.node_class[n]
        if p.node_blacklisted[n]:
            alive[n] = False
            removed["blacklisted"] += 1
        elif c in cs[n]:
            alive[n] = False
            removed["self_loop"] += 1
        elif own[n] > limit:
            alive[n] = False
            removed["above_bound"] += 1
    while True:
        before = sum(removed.values())
        _drop_empty_children(p, alive, removed)
        reach = _reachable(p, alive)
        if enabled:
            _drop_dominated(p, alive, reach, removed)
        if sum(removed.values()) == before:
            break
    reach = _reachable(p, alive)
    class_nodes: list[list[int]] = [[] for _ in range(p.num_classes)]
    for c in range(p.num_classes):
        if reach[c]:
            class_nodes[c] = [n for n in p.class_nodes[c] if alive[n]]
    for r in p.roots:
        if not class_nodes[r]:
            raise ExtractionError(
                f"ilp: root class {p.class_keys[r]!r} has no acyclic, non-blacklisted choice"
            )
    return Pruned(class_nodes, removed)


def _drop_empty_children(p: ExtractionProblem, alive: list[bool], removed: dict[str, int]) -> None:
    count = [0] * p.num_classes
    for n, a in enumerate(alive):
        if a:
            count[p.node_class[n]] += 1
    work = [c for c in range(p.num_classes) if count[c] == 0]
    while work:
        c = work.pop()
        for n in p.parent_nodes[c]:
            if alive[n]:
                alive[n] = False
                removed["empty_child"] += 1
                pc = p.node_class[n]
                count[pc] -= 1
                if count[pc] == 0:
                    work.append(pc)


def _reachable(p: ExtractionProblem, alive: list[bool]) -> list[bool]:
    seen = [False] * p.num_classes
    stack = list(p.roots)
    while stack:
        c = stack.pop()
        if seen[c]:
            continue
        seen[c] = True
        for n in p.class_nodes[c]:
            if alive[n]:
                stack.extend(k for k in p.child_sets[n] if not seen[k])
    return seen


def _drop_dominated(
    p: ExtractionProblem, alive: list[bool], reach: list[bool], removed: dict[str, int]
) -> None:
    own = p.node_cost
    for c in range(p.num_classes):
        if not reach[c]:
            continue
        nodes = [n for n in p.class_nodes[c] if alive[n]]
        if len(nodes) < 2:
            continue
        # Fewest children, then cheapest, then first: a dominator always precedes what it dominates.
        nodes.sort(key=lambda n: (len(p.child_sets[n]), own[n], n))
        kept: list[tuple[int, frozenset[int]]] = []
        for n in nodes:
            s = frozenset(p.child_sets[n])
            if any(own[a] <= own[n] and sa <= s for a, sa in kept):
                alive[n] = False
                removed["dominated"] += 1
            else:
                kept.append((n, s))


def build_model(p: ExtractionProblem, pruned: Pruned, upper_bound: float) -> IlpModel:
    """The model of the pruned problem (see module docstring)."""
    class_nodes = pruned.class_nodes
    kept = pruned.kept_classes()
    col_of: dict[int, int] = {}
    nodes: list[int] = []
    for c in kept:
        for n in class_nodes[c]:
            col_of[n] = len(nodes)
            nodes.append(n)
    scale = _SCALE_TARGET / upper_bound if upper_bound > 0 else 1.0
    obj = [p.node_cost[n] * scale for n in nodes]
    is_root = [False] * p.num_classes
    for r in p.roots:
        is_root[r] = True
    cs = p.child_sets
    rs: list[int] = [0]
    ri: list[int] = []
    rv: list[float] = []
    lo: list[float] = []
    up: list[float] = []

    def row(idx: Sequence[int], val: Sequence[float], lower: float, upper: float) -> None:
        ri.extend(idx)
        rv.extend(val)
        rs.append(len(ri))
        lo.append(lower)
        up.append(upper)

    # Order variables on the cyclic components of the pruned class graph.
    comp, size = _pruned_components(p, pruned)
    order_col: dict[int, int] = {}
    order_upper: list[float] = []
    for c in kept:
        if size[comp[c]] > 1:
            order_col[c] = len(nodes) + len(order_upper)
            order_upper.append(float(size[comp[c]] - 1))
    for c in kept:
        members = [col_of[n] for n in class_nodes[c]]
        row(members, [1.0] * len(members), 1.0 if is_root[c] else -math.inf, 1.0)
        child_count: dict[int, int] = {}
        for n in class_nodes[c]:
            for m in cs[n]:
                child_count[m] = child_count.get(m, 0) + 1
        for m, cnt in child_count.items():
            target = [col_of[j] for j in class_nodes[m]]
            if cnt == len(class_nodes[c]):
                row([*members, *target], [1.0] * len(members) + [-1.0] * len(target), -math.inf, 0.0)
            else:
                for n in class_nodes[c]:
                    if m in cs[n]:
                        row([col_of[n], *target], [1.0] + [-1.0] * len(target), -math.inf, 0.0)
        if c in order_col:
            s = float(size[comp[c]])
            for n in class_nodes[c]:
                for m in cs[n]:
                    if comp[m] == comp[c]:
                        row([order_col[c], order_col[m], col_of[n]], [1.0, -1.0, -s], 1.0 - s, math.inf)
    return IlpModel(
        nodes=nodes,
        num_order=len(order_upper),
        order_upper=order_upper,
        obj=obj,
        row_start=rs,
        row_index=ri,
        row_value=rv,
        row_lower=lo,
        row_upper=up,
        scale=scale,
    )


def _pruned_components(p: ExtractionProblem, pruned: Pruned) -> tuple[list[int], list[int]]:
    """SCC id per class and size per SCC of the class graph restricted to surviving nodes."""
    cs = p.child_sets
    succ = [list(dict.fromkeys(k for n in ns for k in cs[n])) for ns in pruned.class_nodes]
    comp, components = strongly_connected_components(succ)
    return comp, [len(m) for m in components]


def warm_start_vector(
    p: ExtractionProblem, model: IlpModel, pruned: Pruned, greedy: ExtractionResult
) -> list[float]:
    """Column values of the greedy answer, or [] when it does not fit the model.

    A greedy node removed as dominated is replaced by a surviving node of its class that costs no
    more and needs a subset of its child classes (one exists: domination is transitive), which
    keeps the answer valid and no dearer. Order columns get longest-path values.
    """
    values = [0.0] * model.num_cols
    col_of = {n: i for i, n in enumerate(model.nodes)}
    cs = p.child_sets
    own = p.node_cost
    seen: set[int] = set()
    stack = list(p.roots)
    while stack:
        c = stack.pop()
        if c in seen:
            continue
        seen.add(c)
        n = greedy.choices[c]
        if n not in col_of:
            need = set(cs[n])
            subs = [m for m in pruned.class_nodes[c] if own[m] <= own[n] and need.issuperset(cs[m])]
            if not subs:
                return []
            n = subs[0]
        values[col_of[n]] = 1.0
        stack.extend(cs[n])
    if not model.num_order:
        return values
    # An order row t_c - t_m - S x_i >= 1 - S with x_i = 1 demands t_c >= t_m + 1: set each t to
    # its longest path over such rows (the chosen subgraph is acyclic, so this terminates).
    base = len(model.nodes)
    edges = []
    for r in range(model.num_rows):
        a, b = model.row_start[r], model.row_start[r + 1]
        idx = model.row_index[a:b]
        if b - a == 3 and idx[0] >= base and idx[1] >= base and values[idx[2]] > 0.5:
            edges.append((idx[0] - base, idx[1] - base))
    t = [0.0] * model.num_order
    for _ in range(model.num_order + 1):
        changed = False
        for c, m in edges:
            if t[c] < t[m] + 1.0:
                t[c] = t[m] + 1.0
                changed = True
        if not changed:
            break
    else:
        return []
    for j, val in enumerate(t):
        if val > model.order_upper[j]:
            return []
        values[base + j] = val
    return values


class IlpExtractor:
    """Exact DAG-cost extraction by ILP, validated, never worse than greedy-dag.

    Args:
        config: solver settings. Default :class:`IlpConfig` ().
    """

    name = "ilp"

    def __init__(self, config: IlpConfig | None = None) -> None:
        self.config = config or IlpConfig()

    def extract(
        self,
        problem: ExtractionProblem,
        hint: Sequence[int] | None = None,
        *,
        starts: Sequence[Sequence[int]] = (),
    ) -> ExtractionResult:
        """Extract; raises ExtractionError if no acyclic extraction of the roots exists.

        hint: a choice per class (node index, or -1 for none), e.g. the previous search state's
            answer mapped onto this problem. Classes without a hint take greedy-dag's choice; if
            the result is a valid extraction cheaper than greedy-dag's, it becomes the upper
            bound (pruning more) and the warm start. Default None (greedy-dag only).
        starts: further answers of the same form, e.g. another extractor's on this problem; the
            cheapest valid one of greedy-dag's, the hint and these is the upper bound, the warm
            start and the answer when the solver finds nothing better in its time, so the result
            never costs more than any of them. Default none.
        """
        cfg = self.config
        start = time.perf_counter()
        greedy, ub, stats = self._start(problem, hint, starts)
        if ub <= 0.0:
            # Costs are >= 0, so a zero-cost answer is optimal; nothing to solve.
            return self._result(problem, greedy.choices, 0.0, start, SolveStatus.OPTIMAL, 0.0, stats)
        t0 = time.perf_counter()
        pruned = prune(problem, ub, enabled=cfg.prune)
        model = build_model(problem, pruned, ub)
        stats.update(
            pruned=pruned.removed,
            columns=model.num_cols,
            rows=model.num_rows,
            order_vars=model.num_order,
            build_s=time.perf_counter() - t0,
        )
        warm = warm_start_vector(problem, model, pruned, greedy) if cfg.warm_start else []
        solve = solve_scip if cfg.backend is IlpBackend.SCIP else solve_highs
        outcome = solve(
            model, cfg.time_limit, cfg.threads, cfg.rel_gap, warm, cfg.node_limit, cfg.stall_limit
        )
        stats.update(solver_status=outcome.raw_status, solve_s=outcome.time_s, bb_nodes=outcome.nodes)
        if cfg.stall_limit is not None:
            stats.update(lp_iterations=outcome.lp_iterations, max_stall=outcome.max_stall)
        best_choices: Sequence[int] = greedy.choices
        best = ub
        source = greedy.extractor if greedy.extractor in ("hint", "start") else "greedy"
        if outcome.values is not None:
            cand = self._choices(problem, model, outcome.values)
            trial = ExtractionResult(problem, tuple(cand), self.name, 0.0, 0.0)
            if trial.is_valid():
                cost = trial.dag_cost()
                if cost < best - 1e-12 * max(1.0, best):
                    best, best_choices, source = cost, cand, "solver"
            else:
                log.warning("ilp: %s returned an invalid extraction; keeping greedy-dag", cfg.backend.value)
                stats["solver_answer_invalid"] = True
        stats["source"] = source
        # The status claims only what was proven: an optimal solver answer that failed the
        # independent check proves nothing about the greedy answer returned instead.
        lower: float | None
        if outcome.optimal and not stats.get("solver_answer_invalid"):
            status, lower = SolveStatus.OPTIMAL, best
        else:
            if outcome.time_limit_hit:
                status = SolveStatus.TIME_LIMIT
            elif outcome.stall_limit_hit:
                status = SolveStatus.STALL_LIMIT
            elif outcome.node_limit_hit:
                status = SolveStatus.NODE_LIMIT
            else:
                status = SolveStatus.HEURISTIC
            bound = None if outcome.dual_bound is None else outcome.dual_bound / model.scale
            lower = None if bound is None else min(best, max(bound, 0.0))
        gap = None if lower is None else (best - lower) / best if best > 0 else 0.0
        return self._result(problem, best_choices, best, start, status, gap, stats, lower)

    def _start(
        self, problem: ExtractionProblem, hint: Sequence[int] | None, starts: Sequence[Sequence[int]] = ()
    ) -> tuple[ExtractionResult, float, dict[str, object]]:
        """The warm start (greedy-dag's answer, or a valid cheaper ``hint`` or one of ``starts``),
        its cost, and the stats so far."""
        try:
            greedy = GreedyDagExtractor().extract(problem)
        except ExtractionError as exc:
            # The greedy-dag bound found no answer, so none exists: say so as the ILP's error.
            raise ExtractionError(str(exc).replace("greedy-dag:", "ilp:", 1)) from None
        ub = greedy.dag_cost()
        stats: dict[str, object] = {"backend": self.config.backend.value, "greedy_dag_cost": ub}
        if hint is not None:
            mixed = tuple(h if h >= 0 else g for h, g in zip(hint, greedy.choices, strict=True))
            trial = ExtractionResult(problem, mixed, "hint", 0.0, 0.0)
            hint_cost = trial.dag_cost() if trial.is_valid() else math.inf
            stats["hint_cost"] = hint_cost
            if hint_cost < ub:
                greedy, ub = trial, hint_cost
        costs = []
        for i, choices in enumerate(starts):
            if len(choices) != problem.num_classes:
                n = problem.num_classes
                raise ValueError(f"ilp: start {i} has {len(choices)} choices for {n} classes")
            mixed = tuple(h if h >= 0 else g for h, g in zip(choices, greedy.choices, strict=True))
            trial = ExtractionResult(problem, mixed, "start", 0.0, 0.0)
            costs.append(trial.dag_cost() if trial.is_valid() else math.inf)
            if costs[-1] < ub:
                greedy, ub = trial, costs[-1]
        if costs:
            stats["start_costs"] = costs
        return greedy, ub, stats

    def _result(
        self,
        problem: ExtractionProblem,
        choices: Sequence[int],
        cost: float,
        start: float,
        status: SolveStatus,
        gap: float | None,
        stats: dict[str, object],
        lower: float | None = None,
    ) -> ExtractionResult:
        return ExtractionResult(
            problem=problem,
            choices=tuple(choices),
            extractor=self.name,
            reported_cost=cost,
            time_s=time.perf_counter() - start,
            status=status,
            gap=gap,
            lower_bound=cost if status is SolveStatus.OPTIMAL and lower is None else lower,
            stats=stats,
        )

    @staticmethod
    def _choices(problem: ExtractionProblem, model: IlpModel, values: Sequence[float]) -> list[int]:
        choices = [-1] * problem.num_classes
        for col, n in enumerate(model.nodes):
            if values[col] > 0.5:
                c = problem.node_class[n]
                if choices[c] < 0:
                    choices[c] = n
        return choices


__all__ = [
    "IlpBackend",
    "IlpConfig",
    "IlpExtractor",
    "IlpModel",
    "Pruned",
    "SolverOutcome",
    "build_model",
    "prune",
]


class IlpReward:
    """The ILP cost of successive e-graphs of one search, each solve warm-started from the
    previous solve's answer (issue 15: ILP in the loop).

    A search state's e-graph mostly grows from the states solved just before it, so the previous
    answer, mapped onto the new e-graph by its e-nodes, is usually still a valid extraction and
    far tighter than greedy-dag: it prunes more nodes before the model is built and gives the
    solver a better incumbent. A state where it does not fit (another branch, a blacklisted
    node) falls back to greedy-dag. Solved to optimality, the answer is exact either way; at the
    config's ``node_limit`` (``OptimizeConfig.reward_node_limit``) it is the best found within
    the nodes, which may depend on the start, and so on the order of the solves, but on nothing
    else: one seed gives one search on any machine. So does a ``stall_limit``
    (``OptimizeConfig.reward_stall_limit``, off by default), which stops a solve after that many
    LP iterations without a better answer. A ``time_limit`` reached breaks that.

    The solver model is rebuilt for every state rather than extended with the new e-nodes'
    columns and rows: on BERT's rollout states building the problem and the model is 0.36 % of
    the solve time, the rest is branch and bound, which neither SCIP nor HiGHS carries over a
    modified model; HiGHS running the very same model again saves 12 % (docs/search.md, "ILP
    rewards").

    cost_model: prices nodes (:func:`~tensor_eqsat.extract.egraph_problem.problem_from_egraph`).
    config: :class:`IlpConfig`; its ``node_limit`` and ``time_limit`` bound each reward solve.
        Default IlpConfig().
    """

    def __init__(self, cost_model: Any, config: IlpConfig | None = None) -> None:
        self.cost_model = cost_model
        self.extractor = IlpExtractor(config)
        self._previous: list[Any] = []
        self.solves = 0
        self.hinted = 0
        """Solves whose hint (the previous answer) was a valid extraction of the new e-graph."""
        self.statuses: dict[str, int] = {}
        """Solves per :class:`SolveStatus` value."""
        self.solve_seconds = 0.0
        """Seconds in :meth:`IlpExtractor.extract` (problem building not included)."""
        self.last: ExtractionResult | None = None

    def __call__(self, egraph: Any) -> float:
        from tensor_eqsat.extract.egraph_problem import problem_from_egraph

        ep = problem_from_egraph(egraph, self.cost_model)
        problem = ep.problem
        hint = ep.carry_over(self._previous) if self._previous else None
        t = time.perf_counter()
        result = self.extractor.extract(problem, hint)
        self.solve_seconds += time.perf_counter() - t
        self.solves += 1
        self.statuses[result.status.value] = self.statuses.get(result.status.value, 0) + 1
        if math.isfinite(result.stats.get("hint_cost", math.inf)):
            self.hinted += 1
        self.last = result
        self._previous = [ep.enodes[result.choices[c]] for c in result.topo_classes()]
        return result.reported_cost

    def report(self) -> dict[str, Any]:
        """JSON-ready counters of the solves made in this process: ``solves``, ``hinted``,
        ``statuses`` (solves per status) and ``solve_s``."""
        return {
            "solves": self.solves,
            "hinted": self.hinted,
            "statuses": dict(sorted(self.statuses.items())),
            "solve_s": round(self.solve_seconds, 3),
        }
